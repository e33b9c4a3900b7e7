// Tokenize: the tokenizer alone, exactly as the inference RPCs run it; nothing is queued.
#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/service/inference_pipeline.h"

namespace dflash::serving {
namespace {

v1::Segment SegmentOf(TokenSource source) {
  switch (source) {
    case TokenSource::kFirst:
      return v1::SEGMENT_TEXT;
    case TokenSource::kSecond:
      return v1::SEGMENT_TEXT_PAIR;
    case TokenSource::kTemplate:
      break;
  }
  return v1::SEGMENT_UNSPECIFIED;
}

}  // namespace

void InferencePipeline::Tokenize(const v1::TokenizeRequest& request, CallContext call,
                                 Responder<v1::TokenizeResponse> respond) {
  ServedModel* model = BeginRequest("Tokenize", request.model(), std::nullopt, call, respond);
  if (model == nullptr) return;
  if (absl::Status count = CheckCount(static_cast<size_t>(request.inputs_size()),
                                      model->entry().limits.max_inputs, "inputs", "inputs");
      !count.ok()) {
    respond(std::move(count));
    return;
  }
  // truncate = false reports over-long inputs in full instead of failing: nothing runs.
  absl::StatusOr<RequestSettings> settings =
      ResolveSettings(*model, request, TruncationStrategy::kLongestFirst);
  if (!settings.ok()) {
    respond(settings.status());
    return;
  }
  RequestTruncation truncation = settings->truncation;
  truncation.reject_over_length = false;
  const bool add_special_tokens = !request.has_add_special_tokens() || request.add_special_tokens();
  // Each input's part of the answer is built where it is tokenized, and the parts' sizes are
  // added up as they are built: a request whose answer could not be sent stops as soon as its
  // parts pass the limit, before the rest is tokenized and held.
  struct Parts {
    std::vector<v1::Encoding> encodings;
    std::atomic<size_t> bytes{0};
    std::atomic<uint64_t> tokens{0};
  };
  auto parts = std::make_shared<Parts>();
  parts->encodings.resize(static_cast<size_t>(request.inputs_size()));
  auto respond_once = std::make_shared<Responder<v1::TokenizeResponse>>(std::move(respond));
  pool_.Post([this, &request, call, model, truncation, add_special_tokens, parts, respond_once]() {
    const absl::Time start = absl::Now();
    ParallelFor(
        pool_, request.inputs_size(), 8,
        [this, &request, model, truncation, add_special_tokens, parts](int i) -> absl::Status {
          // Another chunk already passed the limit: the answer is refused, skip the work.
          DFLASH_RETURN_IF_ERROR(
              CheckResponseBudget(parts->bytes.load(std::memory_order_relaxed), "inputs"));
          DFLASH_ASSIGN_OR_RETURN(const Encoding encoding,
                                  EncodeTextInput(*model, request.inputs(i), truncation,
                                                  absl::StrCat("inputs[", i, "]")));
          v1::Encoding& out = parts->encodings[static_cast<size_t>(i)];
          out.set_truncated(encoding.truncated);
          uint64_t tokens = 0;
          for (size_t t = 0; t < encoding.ids.size(); ++t) {
            const bool special = encoding.sources[t] == TokenSource::kTemplate;
            if (special && !add_special_tokens) continue;
            v1::Token* token = out.add_tokens();
            token->set_id(encoding.ids[t]);
            token->set_piece(std::string(model->tokenizer().TokenText(encoding.ids[t])));
            token->set_start(encoding.offsets[t].begin);
            token->set_end(encoding.offsets[t].end);
            token->set_segment(SegmentOf(encoding.sources[t]));
            token->set_special(special);
            token->set_type_id(encoding.token_type_ids[t]);
            ++tokens;
          }
          parts->tokens.fetch_add(tokens, std::memory_order_relaxed);
          // The encoding's bytes plus its field tag and length prefix in the response.
          const size_t bytes = out.ByteSizeLong() + kResultEntryBytes;
          return CheckResponseBudget(
              parts->bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes, "inputs");
        },
        [&request, call, model, parts, respond_once, start](absl::Status status) {
          if (!status.ok()) {
            (*respond_once)(std::move(status));
            return;
          }
          v1::TokenizeResponse response;
          response.mutable_encodings()->Reserve(static_cast<int>(parts->encodings.size()));
          for (v1::Encoding& encoding : parts->encodings) {
            *response.add_encodings() = std::move(encoding);
          }
          v1::ResponseMetadata* metadata = response.mutable_metadata();
          metadata->set_request_id(request.request_id());
          metadata->set_model(model->id());
          metadata->set_tokens(parts->tokens.load(std::memory_order_relaxed));
          metadata->set_tokenization_us(DurationMicros(absl::Now() - start));
          metadata->set_total_us(DurationMicros(absl::Now() - call.received));
          (*respond_once)(std::move(response));
        });
  });
}

}  // namespace dflash::serving
