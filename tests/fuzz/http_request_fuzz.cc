// libFuzzer target: the HTTP front's request parsers and response renderers on arbitrary bytes.
// The first byte picks the route (TEI /embed, /predict, /rerank, /tokenize, /zero_shot, OpenAI
// /v1/embeddings, Cohere /v1/rerank, the router itself on a method and path, /token_classify, or
// TEI /decode); the rest is the request body (or the path). /embed and /v1/embeddings take
// token-id inputs too: their id lists must line up with the inputs. Whatever the bytes: a refusal
// is INVALID_ARGUMENT with a message that renders as a JSON error body of status 400 or 422 in
// every family; an accepted request is a dflash.v1 message that serializes; a synthetic answer to
// it renders as JSON. Violations abort so the fuzzer reports them.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/http/cohere_rerank.h"
#include "server/http/http_errors.h"
#include "server/http/http_router.h"
#include "server/http/json_body.h"
#include "server/http/openai_embeddings.h"
#include "server/http/tei_requests.h"
#include "server/http/tei_responses.h"

namespace {

namespace http = dflash::http;
namespace v1 = dflash::v1;

[[noreturn]] void Violation(const std::string& what) {
  std::fprintf(stderr, "http_request_fuzz: invariant violated: %s\n", what.c_str());
  std::abort();
}

void CheckJson(const std::string& text, const char* what) {
  if (!nlohmann::json::accept(text)) Violation(std::string(what) + " is not JSON: " + text);
}

void CheckRefusal(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    Violation("a parser refused with " + status.ToString());
  }
  for (const http::ApiFamily family :
       {http::ApiFamily::kTei, http::ApiFamily::kOpenAi, http::ApiFamily::kCohere}) {
    const http::HttpResponse response = http::ErrorResponse(family, status);
    if (response.status != 400 && response.status != 422) {
      Violation("a parse error maps to HTTP " + std::to_string(response.status));
    }
    CheckJson(response.body, "an error body");
  }
}

// Token-id inputs: none, or one slot per input, set slots non-empty.
template <typename Parsed>
void CheckTokenIds(const Parsed& parsed) {
  if (parsed.token_ids.empty()) return;
  if (parsed.token_ids.size() != static_cast<size_t>(parsed.request.inputs_size())) {
    Violation("token-id inputs do not line up with the inputs");
  }
  for (const auto& ids : parsed.token_ids) {
    if (ids.has_value() && ids->empty()) Violation("an accepted token-id input is empty");
  }
}

template <typename Message>
void CheckSerializes(const Message& message) {
  std::string bytes;
  if (!message.SerializeToString(&bytes)) Violation("the parsed request does not serialize");
}

// Renders a synthetic answer shaped like the request's (one result per input).
template <typename Parsed, typename Parse, typename Answer>
void Run(const nlohmann::json& body, Parse parse, Answer answer) {
  absl::StatusOr<Parsed> parsed = parse(body);
  if (!parsed.ok()) {
    CheckRefusal(parsed.status());
    return;
  }
  CheckSerializes(parsed->request);
  CheckJson(answer(*parsed), "a rendered answer");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0] % 10;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (selector == 7) {  // The router: "<method> <path>".
    const size_t space = rest.find(' ');
    const absl::string_view method = rest.substr(0, space);
    const absl::string_view path =
        space == absl::string_view::npos ? absl::string_view() : rest.substr(space + 1);
    const http::RouteMatch match = http::MatchRoute(method, path);
    if (match.status != 200 && match.status != 404 && match.status != 405) {
      Violation("the router answered " + std::to_string(match.status));
    }
    CheckJson(http::ErrorResponse(match.family, match.status, path).body, "a routing error");
    return 0;
  }
  absl::StatusOr<nlohmann::json> body = http::ParseJsonBody(rest);
  if (!body.ok()) {
    CheckRefusal(body.status());
    return 0;
  }
  switch (selector) {
    case 0:
      Run<http::TeiEmbed>(*body, http::ParseTeiEmbed, [](const http::TeiEmbed& parsed) {
        CheckTokenIds(parsed);
        v1::EmbedResponse response;
        for (int i = 0; i < parsed.request.inputs_size(); ++i) {
          response.add_embeddings()->add_float32_values(static_cast<float>(i) / 3.0f);
        }
        return http::RenderTeiEmbed(response);
      });
      break;
    case 1:
      Run<http::TeiPredict>(*body, http::ParseTeiPredict, [](const http::TeiPredict& parsed) {
        v1::ClassifyResponse response;
        for (const v1::TextInput& input : parsed.request.inputs()) {
          auto* score = response.add_results()->add_scores();
          score->set_label(input.text());
          score->set_score(0.5f);
        }
        return http::RenderTeiPredict(response, parsed);
      });
      break;
    case 2:
      Run<http::TeiRerank>(*body, http::ParseTeiRerank, [](const http::TeiRerank& parsed) {
        v1::RerankResponse response;
        for (int i = 0; i < parsed.request.documents_size(); ++i) {
          auto* result = response.add_results();
          result->set_index(static_cast<uint32_t>(i));
          result->set_document(parsed.request.documents(i));
        }
        return http::RenderTeiRerank(response, parsed.return_text) +
               (http::RenderCohereRerank(response).empty() ? "x" : "");
      });
      break;
    case 3:
      Run<http::TeiTokenize>(*body, http::ParseTeiTokenize, [](const http::TeiTokenize& parsed) {
        // Token spans as a tokenizer could report them, including ones past the text's end.
        v1::TokenizeResponse response;
        for (const std::string& text : parsed.texts) {
          auto* encoding = response.add_encodings();
          for (uint32_t start = 0; start <= text.size() + 1; start += 3) {
            auto* token = encoding->add_tokens();
            token->set_start(start);
            token->set_end(start + 2);
            token->set_piece(text.substr(0, 1));
          }
        }
        return http::RenderTeiTokenize(response, parsed);
      });
      break;
    case 4:
      Run<http::TeiZeroShot>(*body, http::ParseTeiZeroShot, [](const http::TeiZeroShot& parsed) {
        v1::ZeroShotResponse response;
        for (int i = 0; i < parsed.request.texts_size(); ++i) {
          auto* score = response.add_results()->add_scores();
          score->set_label(parsed.request.candidate_labels(0));
        }
        return http::RenderTeiZeroShot(response, parsed.batch);
      });
      break;
    case 5:
      Run<http::OpenAiEmbeddings>(*body, http::ParseOpenAiEmbeddings,
                                  [](const http::OpenAiEmbeddings& parsed) {
                                    CheckTokenIds(parsed);
                                    v1::EmbedResponse response;
                                    response.mutable_metadata()->set_model(parsed.request.model());
                                    for (int i = 0; i < parsed.request.inputs_size(); ++i) {
                                      response.add_embeddings()->add_float32_values(-1.5f);
                                    }
                                    return http::RenderOpenAiEmbeddings(response, parsed.base64);
                                  });
      break;
    case 8:
      Run<http::TeiTokenClassify>(
          *body, http::ParseTeiTokenClassify, [](const http::TeiTokenClassify& parsed) {
            // A token (label id set) and a group per text, with offsets past its end too.
            v1::TokenClassifyResponse response;
            for (const std::string& text : parsed.request.inputs()) {
              auto* result = response.add_results();
              auto* token = result->add_entities();
              token->set_label(
                  parsed.request.ignore_labels().empty() ? text : parsed.request.ignore_labels(0));
              token->set_label_id(0);
              token->set_token_index(1);
              token->set_word(text);
              token->set_char_end(static_cast<uint32_t>(text.size()));
              auto* group = result->add_entities();
              group->set_label(text.substr(0, 1));
              group->set_word(text);
              group->set_char_start(static_cast<uint32_t>(text.size()) + 1);
              group->set_char_end(static_cast<uint32_t>(text.size()) + 2);
            }
            return http::RenderTeiTokenClassify(response, parsed.batch);
          });
      break;
    case 9: {
      absl::StatusOr<http::TeiDecode> parsed = http::ParseTeiDecode(*body);
      if (!parsed.ok()) {
        CheckRefusal(parsed.status());
        break;
      }
      if (parsed->ids.empty()) Violation("an accepted /decode has no id list");
      std::vector<std::string> texts;
      for (const std::vector<int32_t>& ids : parsed->ids) {
        if (ids.empty()) Violation("an accepted /decode id list is empty");
        // Text as a decoder could write it, invalid UTF-8 included.
        std::string text;
        for (const int32_t id : ids) text.push_back(static_cast<char>(id));
        texts.push_back(std::move(text));
      }
      CheckJson(http::RenderTeiDecode(texts), "a rendered /decode answer");
      break;
    }
    default:
      Run<http::CohereRerank>(*body, http::ParseCohereRerank, [](const http::CohereRerank& parsed) {
        v1::RerankResponse response;
        response.mutable_metadata()->set_request_id(parsed.request.query());
        for (int i = 0; i < parsed.request.documents_size(); ++i) {
          response.add_results()->set_index(static_cast<uint32_t>(i));
        }
        return http::RenderCohereRerank(response);
      });
      break;
  }
  return 0;
}
