// The embedding sum and its LayerNorm (docs/deberta.md#embeddings):
//   sum[t] = word[token_ids[t]] + position[position_ids[t]] (if any) + token_type[type(t)] (if any)
//   out[t] = LayerNorm(sum[t]) * gamma + beta   when gamma is set, else sum[t].
// The LayerNorm is the one of layer_norm.h (float32 two-pass statistics). With an embedding
// projection (embedding_size != hidden_size) the engine passes gamma = null, runs the projection
// GEMM, then AddLayerNorm on its output.
//
// This header needs only the CUDA runtime API: kernels/ builds with the CUDA toolkit alone.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/data_type.h"

namespace dflash::kernels {

struct EmbeddingProblem {
  DataType dtype = DataType::kFloat16;
  int64_t tokens = 0;
  int width = 0;                            // E (embedding_size)
  const int32_t* token_ids = nullptr;       // [tokens], device
  const int32_t* token_type_ids = nullptr;  // [tokens] or null: every type is 0
  const int32_t* position_ids = nullptr;    // [tokens] or null: no absolute position term
  const void* word = nullptr;               // [vocab, E]
  const void* position = nullptr;           // [max_positions, E] (read when position_ids != null)
  const void* token_type = nullptr;         // [type_vocab, E] or null: no type term
  const float* gamma = nullptr;             // [E]: when set, out = LayerNorm(sum) * gamma + beta
  const float* beta = nullptr;              // [E] (required when gamma is set)
  float eps = 1e-7f;
  void* out = nullptr;  // [tokens, E], row stride E
};

// Tables and out are `dtype`, rows of E elements; the sum is formed in float32 (word, then
// position, then type) and rounded once on output. Ids are not checked here: the engine
// validates them on the host (a device-side out-of-range id reads out of bounds).
//
// Runs on `stream`, allocates nothing; tokens == 0 is a no-op. Returns cudaErrorInvalidValue
// for a bad dtype, width < 1, tokens < 0, a null token_ids / word / out, position_ids without a
// position table, gamma without beta (or beta without gamma) or eps < 0, else the launch's error.
cudaError_t EmbeddingForward(const EmbeddingProblem& problem, cudaStream_t stream);

}  // namespace dflash::kernels
