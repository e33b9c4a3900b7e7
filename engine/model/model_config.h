// The DeBERTa-v2/v3 configuration (config.json), with transformers 5.17's defaults for every
// missing key (the class defaults, which are not the v3 values: relative_attention=false and
// position_biased_input=true unless the file says otherwise). See docs/deberta.md#configuration.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash {

enum class Activation { kGeluErf, kGeluTanh, kRelu, kTanh, kSilu, kSigmoid };

// What the checkpoint's architecture puts on top of the encoder.
enum class HeadKind {
  kEncoderOnly,             // DebertaV2Model (and pretraining/MLM checkpoints): embeddings.
  kSequenceClassification,  // ContextPooler + classifier: classify, rerank, NLI.
  kTokenClassification,     // classifier on every token.
};

enum class ProblemType { kUnspecified, kRegression, kSingleLabel, kMultiLabel };

absl::string_view HeadKindName(HeadKind head);

struct ModelConfig {
  std::string model_type = "deberta-v2";
  std::vector<std::string> architectures;
  HeadKind head = HeadKind::kEncoderOnly;

  int vocab_size = 128100;
  int hidden_size = 1536;
  int num_hidden_layers = 24;
  int num_attention_heads = 24;
  int attention_head_size = 64;  // getattr default: hidden_size / num_attention_heads.
  int intermediate_size = 6144;
  Activation hidden_act = Activation::kGeluErf;
  int max_position_embeddings = 512;
  int type_vocab_size = 0;
  float layer_norm_eps = 1e-7f;

  bool relative_attention = false;
  int max_relative_positions = -1;  // As written; see EffectiveMaxRelativePositions().
  int position_buckets = -1;
  bool c2p = false;  // From pos_att_type.
  bool p2c = false;
  bool share_att_key = false;
  bool norm_rel_embeddings = false;  // "layer_norm" in norm_rel_ebd.
  bool position_biased_input = true;
  int embedding_size = 1536;  // getattr default: hidden_size.

  int conv_kernel_size = 0;
  int conv_groups = 1;
  Activation conv_act = Activation::kTanh;

  int pad_token_id = 0;
  int pooler_hidden_size = 1536;
  Activation pooler_hidden_act = Activation::kGeluErf;

  std::vector<std::string> id2label;  // Index = label id.
  ProblemType problem_type = ProblemType::kUnspecified;

  int num_labels() const { return static_cast<int>(id2label.size()); }
  int all_head_size() const { return num_attention_heads * attention_head_size; }
  // max_relative_positions after the "< 1 means max_position_embeddings" fallback.
  int EffectiveMaxRelativePositions() const;
  // The attention span k: position_buckets if > 0, else the effective max_relative_positions.
  int AttentionSpan() const;
  // Rows of rel_embeddings: 2k.
  int RelativeEmbeddingRows() const { return 2 * AttentionSpan(); }
  bool uses_log_buckets() const;
  // 1 + [c2p] + [p2c]: the score is divided by sqrt(attention_head_size * ScaleFactor()).
  int ScaleFactor() const { return 1 + (c2p ? 1 : 0) + (p2c ? 1 : 0); }
  bool has_conv() const { return conv_kernel_size > 0; }
};

// Parses config.json text. `source` names the file in errors. Unknown keys are ignored (HF configs
// carry many training-only fields); known keys of the wrong type or out of range are errors.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text, absl::string_view source);
absl::StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& config_json);

// transformers' ACT2FN names: gelu (exact erf form), gelu_new / gelu_pytorch_tanh / gelu_fast (tanh
// form), relu, tanh, silu / swish, sigmoid.
absl::StatusOr<Activation> ParseActivation(absl::string_view name);

}  // namespace dflash
