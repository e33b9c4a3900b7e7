#include "server/http/tei_responses.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/http/json_number.h"

namespace dflash::http {
namespace {

std::string Dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json Scores(const google::protobuf::RepeatedPtrField<v1::LabelScore>& scores) {
  nlohmann::json list = nlohmann::json::array();
  for (const v1::LabelScore& score : scores) {
    list.push_back({{"score", JsonFloat(score.score())}, {"label", score.label()}});
  }
  return list;
}

// A token (aggregation none: it has a label id) or a group, as the pipeline writes them.
nlohmann::json Entities(const google::protobuf::RepeatedPtrField<v1::TokenEntity>& entities) {
  nlohmann::json list = nlohmann::json::array();
  for (const v1::TokenEntity& entity : entities) {
    nlohmann::json item;
    if (entity.has_label_id()) {
      item = {{"entity", entity.label()}, {"index", entity.token_index()}};
    } else {
      item = {{"entity_group", entity.label()}};
    }
    item["score"] = JsonFloat(entity.score());
    item["word"] = entity.word();
    item["start"] = entity.char_start();
    item["end"] = entity.char_end();
    list.push_back(std::move(item));
  }
  return list;
}

}  // namespace

std::string RenderTeiEmbed(const v1::EmbedResponse& response) {
  nlohmann::json list = nlohmann::json::array();
  for (const v1::Embedding& embedding : response.embeddings()) {
    nlohmann::json values = nlohmann::json::array();
    for (const float value : embedding.float32_values()) values.push_back(JsonFloat(value));
    list.push_back(std::move(values));
  }
  return Dump(list);
}

std::string RenderTeiDecode(const std::vector<std::string>& texts) {
  // Text from arbitrary ids can be invalid UTF-8 (a lone byte piece): Dump writes U+FFFD for it.
  return Dump(texts);
}

std::string RenderTeiPredict(const v1::ClassifyResponse& response, const TeiPredict& request) {
  if (!request.batch && !request.inference_api && response.results_size() == 1) {
    return Dump(Scores(response.results(0).scores()));
  }
  nlohmann::json list = nlohmann::json::array();
  for (const v1::Classification& result : response.results()) {
    list.push_back(Scores(result.scores()));
  }
  return Dump(list);
}

std::string RenderTeiRerank(const v1::RerankResponse& response, bool return_text) {
  nlohmann::json list = nlohmann::json::array();
  for (const v1::RerankResult& result : response.results()) {
    nlohmann::json rank = {{"index", result.index()}, {"score", JsonFloat(result.score())}};
    if (return_text) rank["text"] = result.document();
    list.push_back(std::move(rank));
  }
  return Dump(list);
}

std::string RenderTeiTokenize(const v1::TokenizeResponse& response, const TeiTokenize& request) {
  nlohmann::json list = nlohmann::json::array();
  for (int i = 0; i < response.encodings_size(); ++i) {
    const std::string& text = request.texts[static_cast<size_t>(i)];
    nlohmann::json tokens = nlohmann::json::array();
    for (const v1::Token& token : response.encodings(i).tokens()) {
      nlohmann::json entry = {{"id", token.id()}, {"special", token.special()}};
      if (token.special() || token.end() > text.size() || token.start() > token.end()) {
        entry["text"] = token.piece();
        entry["start"] = nullptr;
        entry["stop"] = nullptr;
      } else {
        entry["text"] = text.substr(token.start(), token.end() - token.start());
        entry["start"] = token.start();
        entry["stop"] = token.end();
      }
      tokens.push_back(std::move(entry));
    }
    list.push_back(std::move(tokens));
  }
  return Dump(list);
}

std::string RenderTeiZeroShot(const v1::ZeroShotResponse& response, bool batch) {
  if (!batch && response.results_size() == 1) return Dump(Scores(response.results(0).scores()));
  nlohmann::json list = nlohmann::json::array();
  for (const v1::ZeroShotResult& result : response.results()) {
    list.push_back(Scores(result.scores()));
  }
  return Dump(list);
}

std::string RenderTeiTokenClassify(const v1::TokenClassifyResponse& response, bool batch) {
  if (!batch && response.results_size() == 1) {
    return Dump(Entities(response.results(0).entities()));
  }
  nlohmann::json list = nlohmann::json::array();
  for (const v1::TokenClassification& result : response.results()) {
    list.push_back(Entities(result.entities()));
  }
  return Dump(list);
}

std::string RenderTeiInfo(const v1::InfoResponse& info, const v1::ModelInfo& model,
                          int max_inflight, int tokenization_workers) {
  nlohmann::json model_type;
  bool embeds = false;
  bool reranks = false;
  for (const int task : model.tasks()) {
    embeds = embeds || task == v1::TASK_EMBED;
    reranks = reranks || task == v1::TASK_RERANK;
  }
  if (!model.labels().empty()) {
    nlohmann::json id2label = nlohmann::json::object();
    nlohmann::json label2id = nlohmann::json::object();
    for (const v1::Label& label : model.labels()) {
      id2label[absl::StrCat(label.id())] = label.name();
      label2id[label.name()] = label.id();
    }
    model_type[reranks ? "reranker" : "classifier"] = {{"id2label", id2label},
                                                       {"label2id", label2id}};
  } else if (embeds) {
    model_type["embedding"] = {{"pooling", model.pooling() == v1::POOLING_CLS ? "cls" : "mean"}};
  }
  absl::string_view dtype = "float32";
  if (model.dtype() == v1::DATA_TYPE_FLOAT16) dtype = "float16";
  if (model.dtype() == v1::DATA_TYPE_BFLOAT16) dtype = "bfloat16";
  const nlohmann::json body = {
      {"model_id", model.id()},
      {"model_sha", nullptr},
      {"model_dtype", dtype},
      {"model_type", model_type},
      {"max_concurrent_requests", max_inflight},
      {"max_input_length", model.max_input_length()},
      {"max_batch_tokens", model.batching().max_batch_tokens()},
      {"max_batch_requests", model.batching().max_batch_sequences()},
      {"max_client_batch_size", model.limits().max_inputs()},
      {"auto_truncate", model.default_truncate()},
      {"tokenization_workers", tokenization_workers},
      {"version", info.version()},
      {"sha", info.revision().empty() ? nlohmann::json(nullptr) : nlohmann::json(info.revision())},
      {"docker_label", nullptr},
  };
  return Dump(body);
}

}  // namespace dflash::http
