#include "engine/model/model_config.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_document.h"
#include "common/logging.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace dflash {
namespace {

// Upper bounds that no real DeBERTa approaches; they keep a hostile config from asking for
// absurd allocations before the weight shapes are checked.
constexpr int64_t kMaxDimension = 1 << 16;
constexpr int64_t kMaxVocabulary = 1 << 24;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxPositions = 1 << 20;

absl::StatusOr<int> BoundedInt(const JsonFields& fields, absl::string_view key, int64_t fallback,
                               int64_t min, int64_t max) {
  DFLASH_ASSIGN_OR_RETURN(int64_t value, fields.Int(key, fallback));
  if (value < min || value > max) {
    return fields.FieldError(
        key, absl::StrCat("is ", value, "; expected a value in [", min, ", ", max, "]"));
  }
  return static_cast<int>(value);
}

absl::StatusOr<Activation> ActivationField(const JsonFields& fields, absl::string_view key,
                                           absl::string_view fallback) {
  DFLASH_ASSIGN_OR_RETURN(std::string name, fields.String(key, fallback));
  absl::StatusOr<Activation> activation = ParseActivation(name);
  if (!activation.ok()) return fields.FieldError(key, activation.status().message());
  return activation;
}

absl::StatusOr<HeadKind> HeadFromArchitectures(const std::vector<std::string>& architectures,
                                               const JsonFields& fields) {
  if (architectures.empty()) return HeadKind::kEncoderOnly;
  const std::string& name = architectures.front();
  if (!absl::StartsWith(name, "DebertaV2")) {
    return fields.FieldError(
        "architectures",
        absl::StrCat("names \"", name,
                     "\", which is not a DeBERTa-v2/v3 architecture (expected DebertaV2Model, "
                     "DebertaV2ForSequenceClassification or DebertaV2ForTokenClassification)"));
  }
  if (name == "DebertaV2ForSequenceClassification") return HeadKind::kSequenceClassification;
  if (name == "DebertaV2ForTokenClassification") return HeadKind::kTokenClassification;
  if (name == "DebertaV2Model" || name == "DebertaV2ForMaskedLM" ||
      name == "DebertaV2ForPreTraining") {
    return HeadKind::kEncoderOnly;
  }
  return fields.FieldError(
      "architectures",
      absl::StrCat("names \"", name,
                   "\", whose head is not supported; supported: DebertaV2Model (embeddings), "
                   "DebertaV2ForSequenceClassification, DebertaV2ForTokenClassification"));
}

absl::StatusOr<std::vector<std::string>> ParseLabels(const nlohmann::json& root,
                                                     const JsonFields& fields) {
  std::vector<std::string> labels;
  const auto it = root.find("id2label");
  if (it != root.end() && !it->is_null()) {
    if (!it->is_object()) return fields.FieldError("id2label", "must be an object {\"0\": name}");
    labels.resize(it->size());
    std::vector<bool> seen(it->size(), false);
    for (const auto& [key, value] : it->items()) {
      int id = -1;
      if (!absl::SimpleAtoi(key, &id) || id < 0 || id >= static_cast<int>(labels.size()) ||
          seen[id]) {
        return fields.FieldError("id2label",
                                 absl::StrCat("has key \"", key, "\"; keys must be the ids 0..",
                                              labels.size() - 1, ", each once"));
      }
      if (!value.is_string()) {
        return fields.FieldError(
            "id2label",
            absl::StrCat("entry \"", key, "\" must be a string, got ", JsonExcerpt(value)));
      }
      labels[id] = value.get<std::string>();
      seen[id] = true;
    }
    if (labels.empty()) return fields.FieldError("id2label", "is empty");
    return labels;
  }
  // No id2label: transformers builds LABEL_0..LABEL_{num_labels-1}, num_labels defaulting to 2.
  DFLASH_ASSIGN_OR_RETURN(int count, BoundedInt(fields, "num_labels", 2, 1, kMaxVocabulary));
  for (int i = 0; i < count; ++i) labels.push_back(absl::StrCat("LABEL_", i));
  return labels;
}

}  // namespace

absl::string_view HeadKindName(HeadKind head) {
  switch (head) {
    case HeadKind::kEncoderOnly:
      return "encoder";
    case HeadKind::kSequenceClassification:
      return "sequence-classification";
    case HeadKind::kTokenClassification:
      return "token-classification";
  }
  return "unknown";
}

absl::StatusOr<Activation> ParseActivation(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "gelu") return Activation::kGeluErf;
  if (lower == "gelu_new" || lower == "gelu_pytorch_tanh" || lower == "gelu_fast") {
    return Activation::kGeluTanh;
  }
  if (lower == "relu") return Activation::kRelu;
  if (lower == "tanh") return Activation::kTanh;
  if (lower == "silu" || lower == "swish") return Activation::kSilu;
  if (lower == "sigmoid") return Activation::kSigmoid;
  return absl::InvalidArgumentError(
      absl::StrCat("names unknown activation \"", name,
                   "\" (supported: gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu, tanh, "
                   "silu, swish, sigmoid)"));
}

int ModelConfig::EffectiveMaxRelativePositions() const {
  return max_relative_positions < 1 ? max_position_embeddings : max_relative_positions;
}

int ModelConfig::AttentionSpan() const {
  return position_buckets > 0 ? position_buckets : EffectiveMaxRelativePositions();
}

bool ModelConfig::uses_log_buckets() const {
  return position_buckets > 0 && EffectiveMaxRelativePositions() > 0;
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text,
                                             absl::string_view source) {
  DFLASH_ASSIGN_OR_RETURN(nlohmann::json root, ParseJsonDocument(json_text, source));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object"));
  }
  const JsonFields fields(root, source);
  ModelConfig config;

  DFLASH_ASSIGN_OR_RETURN(config.model_type, fields.String("model_type", ""));
  DFLASH_ASSIGN_OR_RETURN(config.architectures, fields.StringList("architectures", ','));
  if (config.model_type.empty() && config.architectures.empty()) {
    return fields.FieldError("model_type", "is missing; expected \"deberta-v2\"");
  }
  if (config.model_type == "deberta") {
    return fields.FieldError(
        "model_type",
        "is \"deberta\" (DeBERTa v1), which this service does not serve; it serves DeBERTa-v2/v3 "
        "(model_type \"deberta-v2\")");
  }
  if (!config.model_type.empty() && config.model_type != "deberta-v2") {
    return fields.FieldError(
        "model_type", absl::StrCat("is \"", config.model_type,
                                   "\"; this service serves DeBERTa-v2/v3 (\"deberta-v2\") only"));
  }
  DFLASH_ASSIGN_OR_RETURN(config.head, HeadFromArchitectures(config.architectures, fields));

  DFLASH_ASSIGN_OR_RETURN(config.vocab_size,
                          BoundedInt(fields, "vocab_size", 128100, 1, kMaxVocabulary));
  DFLASH_ASSIGN_OR_RETURN(config.hidden_size,
                          BoundedInt(fields, "hidden_size", 1536, 1, kMaxDimension));
  DFLASH_ASSIGN_OR_RETURN(config.num_hidden_layers,
                          BoundedInt(fields, "num_hidden_layers", 24, 1, kMaxLayers));
  DFLASH_ASSIGN_OR_RETURN(config.num_attention_heads,
                          BoundedInt(fields, "num_attention_heads", 24, 1, kMaxDimension));
  if (config.hidden_size % config.num_attention_heads != 0) {
    return fields.FieldError(
        "num_attention_heads",
        absl::StrCat("is ", config.num_attention_heads, ", which does not divide hidden_size ",
                     config.hidden_size));
  }
  DFLASH_ASSIGN_OR_RETURN(
      config.attention_head_size,
      BoundedInt(fields, "attention_head_size", config.hidden_size / config.num_attention_heads, 1,
                 kMaxDimension));
  // Q/K/V are [*, heads * head_size]: keep the product in int range (and sane).
  if (int64_t{config.num_attention_heads} * config.attention_head_size > kMaxDimension) {
    return fields.FieldError(
        "attention_head_size",
        absl::StrCat("times num_attention_heads is ",
                     int64_t{config.num_attention_heads} * config.attention_head_size,
                     ", above the limit of ", kMaxDimension));
  }
  DFLASH_ASSIGN_OR_RETURN(config.intermediate_size,
                          BoundedInt(fields, "intermediate_size", 6144, 1, 4 * kMaxDimension));
  DFLASH_ASSIGN_OR_RETURN(config.hidden_act, ActivationField(fields, "hidden_act", "gelu"));
  DFLASH_ASSIGN_OR_RETURN(config.max_position_embeddings,
                          BoundedInt(fields, "max_position_embeddings", 512, 1, kMaxPositions));
  DFLASH_ASSIGN_OR_RETURN(config.type_vocab_size,
                          BoundedInt(fields, "type_vocab_size", 0, 0, kMaxVocabulary));
  DFLASH_ASSIGN_OR_RETURN(double eps, fields.Number("layer_norm_eps", 1e-7));
  // Checked after the conversion to float32 too: 1e-47 is positive as a double but 0 as a float,
  // and LayerNorm would then divide by zero on a constant row.
  config.layer_norm_eps = static_cast<float>(eps);
  if (!(eps > 0.0 && eps < 1.0) || !(config.layer_norm_eps > 0.0f)) {
    return fields.FieldError("layer_norm_eps",
                             "must be in (0, 1) and representable as a positive float32");
  }

  DFLASH_ASSIGN_OR_RETURN(config.relative_attention, fields.Bool("relative_attention", false));
  DFLASH_ASSIGN_OR_RETURN(
      config.max_relative_positions,
      BoundedInt(fields, "max_relative_positions", -1, -kMaxPositions, kMaxPositions));
  DFLASH_ASSIGN_OR_RETURN(config.position_buckets, BoundedInt(fields, "position_buckets", -1,
                                                              -kMaxPositions, kMaxPositions));
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> pos_att_type,
                          fields.StringList("pos_att_type", '|'));
  for (std::string& type : pos_att_type) {
    type = absl::AsciiStrToLower(type);
    if (type == "c2p") {
      config.c2p = true;
    } else if (type == "p2c") {
      config.p2c = true;
    } else {
      // transformers ignores other entries (DeBERTa v1's "p2p"); so do we, audibly.
      Log().warn("{}: pos_att_type entry \"{}\" is ignored (only c2p and p2c exist in DeBERTa-v2)",
                 source, type);
    }
  }
  DFLASH_ASSIGN_OR_RETURN(config.share_att_key, fields.Bool("share_att_key", false));
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> norm_rel_ebd,
                          fields.StringList("norm_rel_ebd", '|'));
  for (const std::string& entry : norm_rel_ebd) {
    if (absl::AsciiStrToLower(entry) == "layer_norm") config.norm_rel_embeddings = true;
  }
  DFLASH_ASSIGN_OR_RETURN(config.position_biased_input, fields.Bool("position_biased_input", true));
  DFLASH_ASSIGN_OR_RETURN(config.embedding_size, BoundedInt(fields, "embedding_size",
                                                            config.hidden_size, 1, kMaxDimension));
  if (config.relative_attention && config.AttentionSpan() < 1) {
    return fields.FieldError("max_relative_positions",
                             "gives an attention span below 1; set position_buckets or "
                             "max_position_embeddings");
  }
  if (config.relative_attention && config.position_buckets > 0) {
    // make_log_bucket_position divides by ln((max_position - 1) / mid) with mid = buckets / 2;
    // transformers produces inf/NaN positions unless both are positive.
    const int mid = config.position_buckets / 2;
    if (mid < 1) return fields.FieldError("position_buckets", "must be at least 2 when set");
    if (config.EffectiveMaxRelativePositions() - 1 <= mid) {
      return fields.FieldError(
          "max_relative_positions",
          absl::StrCat("gives max_position ", config.EffectiveMaxRelativePositions(),
                       ", which must exceed position_buckets / 2 + 1 = ", mid + 1,
                       " for log buckets"));
    }
  }
  if (config.relative_attention && config.AttentionSpan() > kMaxPositions / 2) {
    return fields.FieldError("position_buckets", "gives an attention span that is too large");
  }

  DFLASH_ASSIGN_OR_RETURN(config.conv_kernel_size,
                          BoundedInt(fields, "conv_kernel_size", 0, 0, 1023));
  if (config.conv_kernel_size > 0 && config.conv_kernel_size % 2 == 0) {
    return fields.FieldError("conv_kernel_size",
                             absl::StrCat("is ", config.conv_kernel_size,
                                          "; an even kernel cannot keep the sequence length"));
  }
  DFLASH_ASSIGN_OR_RETURN(config.conv_groups,
                          BoundedInt(fields, "conv_groups", 1, 1, kMaxDimension));
  if (config.conv_kernel_size > 0 && config.hidden_size % config.conv_groups != 0) {
    return fields.FieldError(
        "conv_groups", absl::StrCat("is ", config.conv_groups,
                                    ", which does not divide hidden_size ", config.hidden_size));
  }
  DFLASH_ASSIGN_OR_RETURN(config.conv_act, ActivationField(fields, "conv_act", "tanh"));

  DFLASH_ASSIGN_OR_RETURN(config.pad_token_id,
                          BoundedInt(fields, "pad_token_id", 0, -1, kMaxVocabulary));
  DFLASH_ASSIGN_OR_RETURN(
      config.pooler_hidden_size,
      BoundedInt(fields, "pooler_hidden_size", config.hidden_size, 1, kMaxDimension));
  if (config.pooler_hidden_size != config.hidden_size) {
    return fields.FieldError(
        "pooler_hidden_size",
        absl::StrCat("is ", config.pooler_hidden_size, " but the classifier reads hidden_size ",
                     config.hidden_size, " features; the two must be equal"));
  }
  DFLASH_ASSIGN_OR_RETURN(config.pooler_hidden_act,
                          ActivationField(fields, "pooler_hidden_act", "gelu"));

  DFLASH_ASSIGN_OR_RETURN(config.id2label, ParseLabels(root, fields));
  DFLASH_ASSIGN_OR_RETURN(std::string problem_type, fields.String("problem_type", ""));
  if (problem_type.empty()) {
    config.problem_type = ProblemType::kUnspecified;
  } else if (problem_type == "regression") {
    config.problem_type = ProblemType::kRegression;
  } else if (problem_type == "single_label_classification") {
    config.problem_type = ProblemType::kSingleLabel;
  } else if (problem_type == "multi_label_classification") {
    config.problem_type = ProblemType::kMultiLabel;
  } else {
    return fields.FieldError("problem_type",
                             absl::StrCat("is \"", problem_type,
                                          "\"; expected regression, single_label_classification or "
                                          "multi_label_classification"));
  }
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& config_json) {
  DFLASH_ASSIGN_OR_RETURN(std::string text, ReadFile(config_json));
  return ParseModelConfig(text, config_json.string());
}

}  // namespace dflash
