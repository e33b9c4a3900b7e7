#include "server/http/tei_requests.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/http/http_errors.h"
#include "server/http/json_body.h"

namespace dflash::http {
namespace {

// The fields every TEI route shares: model (extension), truncate, truncation_direction.
template <typename Request>
absl::Status ReadCommon(const nlohmann::json& body, Request& request) {
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> model, ReadOptionalString(body, "model"));
  if (model.has_value()) request.set_model(*model);
  DFLASH_ASSIGN_OR_RETURN(std::optional<bool> truncate, ReadOptionalBool(body, "truncate"));
  if (truncate.has_value()) request.set_truncate(*truncate);
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> direction,
                          ReadOptionalString(body, "truncation_direction"));
  if (direction.has_value()) {
    const std::string lower = absl::AsciiStrToLower(*direction);
    if (lower == "right") {
      request.set_truncation_direction(v1::TRUNCATION_DIRECTION_RIGHT);
    } else if (lower == "left") {
      request.set_truncation_direction(v1::TRUNCATION_DIRECTION_LEFT);
    } else {
      return FieldError("truncation_direction",
                        absl::StrCat("must be \"Left\" or \"Right\", got \"", *direction, "\""));
    }
  }
  return absl::OkStatus();
}

// One element of a /predict batch: [text] or [text, text_pair].
absl::Status ReadSequence(const nlohmann::json& item, const std::string& field,
                          v1::TextInput& input) {
  if (!item.is_array() || item.empty() || item.size() > 2) {
    return FieldError(field, "must be [text] or [text, text_pair]");
  }
  for (size_t i = 0; i < item.size(); ++i) {
    if (!item[i].is_string()) {
      return FieldError(absl::StrCat(field, "[", i, "]"), "must be a string");
    }
  }
  input.set_text(item[0].get<std::string>());
  if (item.size() == 2) input.set_text_pair(item[1].get<std::string>());
  return absl::OkStatus();
}

// TEI's /predict inputs: "text" (one input), ["text", "pair"] (one pair), or a batch whose
// elements are ["text"] or ["text", "pair"]; a list of plain strings longer than two is a batch
// of single texts.
absl::Status ReadPredictInputs(const nlohmann::json& body, TeiPredict& predict) {
  const auto found = body.find("inputs");
  if (found == body.end() || found->is_null()) return FieldError("inputs", "is required");
  const nlohmann::json& inputs = *found;
  v1::ClassifyRequest& request = predict.request;
  if (inputs.is_string()) {
    request.add_inputs()->set_text(inputs.get<std::string>());
    return absl::OkStatus();
  }
  if (!inputs.is_array()) {
    return FieldError("inputs",
                      "must be a string, a pair [string, string] or a batch [[string], "
                      "[string, string], ...]");
  }
  if (inputs.empty()) return EmptyInput("inputs: must not be empty");
  bool all_strings = true;
  for (const nlohmann::json& item : inputs) all_strings = all_strings && item.is_string();
  if (all_strings && inputs.size() <= 2) {
    v1::TextInput* input = request.add_inputs();
    input->set_text(inputs[0].get<std::string>());
    if (inputs.size() == 2) input->set_text_pair(inputs[1].get<std::string>());
    return absl::OkStatus();
  }
  predict.batch = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string field = absl::StrCat("inputs[", i, "]");
    if (inputs[i].is_string()) {
      request.add_inputs()->set_text(inputs[i].get<std::string>());
      continue;
    }
    DFLASH_RETURN_IF_ERROR(ReadSequence(inputs[i], field, *request.add_inputs()));
  }
  return absl::OkStatus();
}

// The Hugging Face Inference API's classification parameters.
absl::Status ReadInferenceParameters(const nlohmann::json& parameters, TeiPredict& predict) {
  if (!parameters.is_object()) return FieldError("parameters", "must be an object");
  DFLASH_ASSIGN_OR_RETURN(std::optional<uint32_t> top_k, ReadOptionalCount(parameters, "top_k"));
  if (top_k.has_value()) predict.request.set_top_k(*top_k);
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> function,
                          ReadOptionalString(parameters, "function_to_apply"));
  if (function.has_value()) {
    if (*function == "softmax") {
      predict.request.set_score_function(v1::SCORE_FUNCTION_SOFTMAX);
    } else if (*function == "sigmoid") {
      predict.request.set_score_function(v1::SCORE_FUNCTION_SIGMOID);
    } else if (*function == "none") {
      predict.request.set_score_function(v1::SCORE_FUNCTION_RAW);
    } else {
      return FieldError(
          "parameters.function_to_apply",
          absl::StrCat("must be \"softmax\", \"sigmoid\" or \"none\", got \"", *function, "\""));
    }
  }
  return absl::OkStatus();
}

// The token-classification options of `object` (the body or its `parameters`); `prefix` names
// the object in errors.
absl::Status ReadTokenClassifyOptions(const nlohmann::json& object, absl::string_view prefix,
                                      v1::TokenClassifyRequest& request) {
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> strategy,
                          ReadOptionalString(object, "aggregation_strategy"));
  if (strategy.has_value()) {
    const std::string lower = absl::AsciiStrToLower(*strategy);
    if (lower == "none") {
      request.set_aggregation(v1::AGGREGATION_STRATEGY_NONE);
    } else if (lower == "simple") {
      request.set_aggregation(v1::AGGREGATION_STRATEGY_SIMPLE);
    } else if (lower == "first") {
      request.set_aggregation(v1::AGGREGATION_STRATEGY_FIRST);
    } else if (lower == "average") {
      request.set_aggregation(v1::AGGREGATION_STRATEGY_AVERAGE);
    } else if (lower == "max") {
      request.set_aggregation(v1::AGGREGATION_STRATEGY_MAX);
    } else {
      return FieldError(absl::StrCat(prefix, "aggregation_strategy"),
                        absl::StrCat("must be \"none\", \"simple\", \"first\", \"average\" "
                                     "or \"max\", got \"",
                                     *strategy, "\""));
    }
  }
  // The pipeline's ignore_labels: [] leaves nothing out.
  if (const auto ignore = object.find("ignore_labels");
      ignore != object.end() && !ignore->is_null()) {
    if (ignore->is_array() && ignore->empty()) {
      request.clear_ignore_labels();
      request.set_keep_all_labels(true);
    } else {
      DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> labels,
                              ReadStringArray(object, "ignore_labels"));
      request.clear_ignore_labels();
      request.set_keep_all_labels(false);
      for (std::string& label : labels) request.add_ignore_labels(std::move(label));
    }
  }
  // The pipeline's stride splits over-long texts into overlapping windows, which the server does
  // not do: refused rather than silently answered differently.
  if (const auto stride = object.find("stride"); stride != object.end() && !stride->is_null()) {
    return FieldError(absl::StrCat(prefix, "stride"),
                      "is not supported; over-long texts are truncated or refused (truncate)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TeiEmbed> ParseTeiEmbed(const nlohmann::json& body) {
  TeiEmbed embed;
  v1::EmbedRequest& request = embed.request;
  DFLASH_RETURN_IF_ERROR(ReadCommon(body, request));
  DFLASH_ASSIGN_OR_RETURN(InputList inputs, ReadInputList(body, "inputs"));
  for (std::string& text : inputs.texts) request.add_inputs(std::move(text));
  embed.token_ids = std::move(inputs.token_ids);
  DFLASH_ASSIGN_OR_RETURN(std::optional<bool> normalize, ReadOptionalBool(body, "normalize"));
  request.set_normalize(normalize.value_or(true));
  DFLASH_ASSIGN_OR_RETURN(std::optional<uint32_t> dimensions,
                          ReadOptionalCount(body, "dimensions"));
  if (dimensions.has_value()) {
    if (*dimensions == 0) return FieldError("dimensions", "must be at least 1");
    request.set_dimensions(*dimensions);
  }
  return embed;
}

absl::StatusOr<TeiPredict> ParseTeiPredict(const nlohmann::json& body) {
  TeiPredict predict;
  DFLASH_RETURN_IF_ERROR(ReadCommon(body, predict.request));
  DFLASH_RETURN_IF_ERROR(ReadPredictInputs(body, predict));
  DFLASH_ASSIGN_OR_RETURN(std::optional<bool> raw_scores, ReadOptionalBool(body, "raw_scores"));
  if (raw_scores.value_or(false)) predict.request.set_score_function(v1::SCORE_FUNCTION_RAW);
  if (const auto parameters = body.find("parameters"); parameters != body.end()) {
    predict.inference_api = true;
    if (!parameters->is_null())
      DFLASH_RETURN_IF_ERROR(ReadInferenceParameters(*parameters, predict));
  }
  return predict;
}

absl::StatusOr<TeiRerank> ParseTeiRerank(const nlohmann::json& body) {
  TeiRerank rerank;
  v1::RerankRequest& request = rerank.request;
  DFLASH_RETURN_IF_ERROR(ReadCommon(body, request));
  DFLASH_ASSIGN_OR_RETURN(std::string query, ReadRequiredString(body, "query"));
  request.set_query(std::move(query));
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> texts, ReadStringArray(body, "texts"));
  for (std::string& text : texts) request.add_documents(std::move(text));
  DFLASH_ASSIGN_OR_RETURN(std::optional<bool> raw_scores, ReadOptionalBool(body, "raw_scores"));
  if (raw_scores.value_or(false)) request.set_score_function(v1::SCORE_FUNCTION_RAW);
  DFLASH_ASSIGN_OR_RETURN(std::optional<bool> return_text, ReadOptionalBool(body, "return_text"));
  rerank.return_text = return_text.value_or(false);
  return rerank;
}

absl::StatusOr<TeiTokenize> ParseTeiTokenize(const nlohmann::json& body) {
  TeiTokenize tokenize;
  v1::TokenizeRequest& request = tokenize.request;
  DFLASH_RETURN_IF_ERROR(ReadCommon(body, request));
  DFLASH_ASSIGN_OR_RETURN(TextList inputs, ReadTextList(body, "inputs"));
  for (const std::string& text : inputs.texts) request.add_inputs()->set_text(text);
  tokenize.texts = std::move(inputs.texts);
  DFLASH_ASSIGN_OR_RETURN(std::optional<bool> special,
                          ReadOptionalBool(body, "add_special_tokens"));
  request.set_add_special_tokens(special.value_or(true));
  return tokenize;
}

absl::StatusOr<TeiDecode> ParseTeiDecode(const nlohmann::json& body) {
  TeiDecode decode;
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> model, ReadOptionalString(body, "model"));
  if (model.has_value()) decode.model = *model;
  const auto ids = body.find("ids");
  if (ids == body.end() || ids->is_null()) return FieldError("ids", "is required");
  if (!ids->is_array()) {
    return FieldError("ids", "must be a list of token ids or a list of such lists");
  }
  if (ids->empty()) return EmptyInput("ids: must not be empty");
  if (!(*ids)[0].is_array()) {
    DFLASH_ASSIGN_OR_RETURN(std::vector<int32_t> list, ReadTokenIds(*ids, "ids"));
    decode.ids.push_back(std::move(list));
  } else {
    for (size_t i = 0; i < ids->size(); ++i) {
      DFLASH_ASSIGN_OR_RETURN(std::vector<int32_t> list,
                              ReadTokenIds((*ids)[i], absl::StrCat("ids[", i, "]")));
      decode.ids.push_back(std::move(list));
    }
  }
  DFLASH_ASSIGN_OR_RETURN(std::optional<bool> skip, ReadOptionalBool(body, "skip_special_tokens"));
  decode.skip_special_tokens = skip.value_or(true);
  return decode;
}

absl::StatusOr<TeiZeroShot> ParseTeiZeroShot(const nlohmann::json& body) {
  TeiZeroShot zero_shot;
  v1::ZeroShotRequest& request = zero_shot.request;
  DFLASH_RETURN_IF_ERROR(ReadCommon(body, request));
  DFLASH_ASSIGN_OR_RETURN(TextList inputs, ReadTextList(body, "inputs"));
  zero_shot.batch = inputs.batch;
  for (std::string& text : inputs.texts) request.add_texts(std::move(text));
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> labels,
                          ReadStringArray(body, "candidate_labels"));
  for (std::string& label : labels) request.add_candidate_labels(std::move(label));
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> hypothesis,
                          ReadOptionalString(body, "hypothesis_template"));
  if (hypothesis.has_value()) request.set_hypothesis_template(*hypothesis);
  DFLASH_ASSIGN_OR_RETURN(std::optional<bool> multi_label, ReadOptionalBool(body, "multi_label"));
  request.set_multi_label(multi_label.value_or(false));
  DFLASH_ASSIGN_OR_RETURN(std::optional<uint32_t> top_k, ReadOptionalCount(body, "top_k"));
  if (top_k.has_value()) request.set_top_k(*top_k);
  return zero_shot;
}

absl::StatusOr<TeiTokenClassify> ParseTeiTokenClassify(const nlohmann::json& body) {
  TeiTokenClassify token_classify;
  v1::TokenClassifyRequest& request = token_classify.request;
  DFLASH_RETURN_IF_ERROR(ReadCommon(body, request));
  DFLASH_ASSIGN_OR_RETURN(TextList inputs, ReadTextList(body, "inputs"));
  token_classify.batch = inputs.batch;
  for (std::string& text : inputs.texts) request.add_inputs(std::move(text));
  DFLASH_RETURN_IF_ERROR(ReadTokenClassifyOptions(body, "", request));
  if (const auto parameters = body.find("parameters");
      parameters != body.end() && !parameters->is_null()) {
    if (!parameters->is_object()) return FieldError("parameters", "must be an object");
    DFLASH_RETURN_IF_ERROR(ReadTokenClassifyOptions(*parameters, "parameters.", request));
  }
  return token_classify;
}

}  // namespace dflash::http
