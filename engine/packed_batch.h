// The unit of work of every engine: sequences packed back to back with no padding, delimited by
// cu_seqlens (FlashAttention's varlen convention), and the outputs a caller wants from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"

namespace dflash {

struct PackedBatch {
  std::vector<int32_t> token_ids;       // [total_tokens]
  std::vector<int32_t> token_type_ids;  // [total_tokens], or empty for all zeros
  std::vector<int32_t> cu_seqlens;      // [num_sequences + 1], cu_seqlens[0] = 0
  int32_t max_seqlen = 0;               // max_s (cu_seqlens[s+1] - cu_seqlens[s])

  int num_sequences() const {
    return cu_seqlens.empty() ? 0 : static_cast<int>(cu_seqlens.size()) - 1;
  }
  int total_tokens() const { return static_cast<int>(token_ids.size()); }
  int sequence_length(int s) const { return cu_seqlens[s + 1] - cu_seqlens[s]; }

  // Appends one sequence; `type_ids` may be empty (all zeros).
  void Append(const std::vector<int32_t>& ids, const std::vector<int32_t>& type_ids = {});
};

// Outputs an engine can compute; a request asks for any combination.
enum OutputKind : uint32_t {
  kSequenceLogits = 1u << 0,  // [num_sequences, num_labels]: pooler + classifier.
  kTokenLogits = 1u << 1,     // [total_tokens, num_labels]: classifier on every token.
  kEmbeddings = 1u << 2,      // [num_sequences, hidden]: CLS or masked-mean pooling.
  kHiddenStates = 1u << 3,    // [total_tokens, hidden]: the last encoder layer.
};

struct RunOptions {
  uint32_t outputs = kSequenceLogits;
  PoolingMode pooling = PoolingMode::kMean;  // For kEmbeddings.
  bool normalize = true;                     // L2-normalise embeddings.
};

struct BatchOutput {
  int num_sequences = 0;
  int total_tokens = 0;
  int num_labels = 0;
  int hidden_size = 0;
  std::vector<float> sequence_logits;  // [num_sequences, num_labels]
  std::vector<float> token_logits;     // [total_tokens, num_labels]
  std::vector<float> embeddings;       // [num_sequences, hidden_size]
  std::vector<float> hidden_states;    // [total_tokens, hidden_size]
};

// Checks a batch against a model before any compute: cu_seqlens starts at 0, grows strictly
// (no empty sequences), ends at total_tokens; max_seqlen is the true maximum; ids are inside the
// vocabulary; token types inside type_vocab_size; absolute-position models are not given
// sequences longer than max_position_embeddings; the requested outputs exist for the head.
// Errors are INVALID_ARGUMENT (bad batch) or FAILED_PRECONDITION (output the model lacks).
absl::Status ValidatePackedBatch(const PackedBatch& batch, const RunOptions& options,
                                 const ModelConfig& config);

}  // namespace dflash
