// The unit of work of every engine: sequences packed back to back with no padding, delimited by
// cu_seqlens (FlashAttention's varlen convention), and the outputs a caller wants from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
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
  // The device's span of the run, from its first command to its last (CUDA events), when the
  // engine measures one; negative otherwise. Run's wall time minus this is the host's share.
  double device_seconds = -1;
};

// The rules one sequence meets for `config`, whatever batch it joins: it is not empty; its type
// ids are absent or one per id; ids are inside the vocabulary; types are inside type_vocab_size
// (not checked without type embeddings, which transformers then ignores); an absolute-position
// model is not given more than max_position_embeddings tokens. INVALID_ARGUMENT naming the first
// offending token by its index in the sequence; the message continues a subject the caller
// writes ("sequence 2 has id 9 at token 4, outside ..."). The batcher checks each request with it
// before the request may share a batch, and ValidatePackedBatch checks each sequence of a batch
// with it.
absl::Status ValidateSequence(absl::Span<const int32_t> ids, absl::Span<const int32_t> type_ids,
                              const ModelConfig& config);

// The outputs a run asks for against the model: at least one known output, and each one the head
// can give. INVALID_ARGUMENT (unknown or no output) or FAILED_PRECONDITION (an output the model
// lacks).
absl::Status ValidateOutputs(uint32_t outputs, const ModelConfig& config);

// Checks a batch against a model before any compute: cu_seqlens starts at 0, grows strictly
// (no empty sequences), ends at total_tokens; max_seqlen is the true maximum; token_type_ids is
// empty or one per token; the outputs pass ValidateOutputs and every sequence ValidateSequence
// (errors name it: "batch: sequence 2 has id ...").
absl::Status ValidatePackedBatch(const PackedBatch& batch, const RunOptions& options,
                                 const ModelConfig& config);

}  // namespace dflash
