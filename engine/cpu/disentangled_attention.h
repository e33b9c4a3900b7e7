// Exact float32 disentangled self-attention over a packed batch
// (kernels/attention/DESIGN.md#the-math):
//   S[i,j] = (Q_i.K_j + Q_i.PosK[idx(i-j)] + K_j.PosQ[idx(i-j)]) * scale,  scale =
//   1/sqrt(d*(1+#types)) P = softmax_j(S) over the keys of the same sequence,  O_i = sum_j P[i,j]
//   V_j,
// with i, j local positions inside one sequence of the packed batch. This is the CPU engine's
// attention and the host reference the CUDA kernels are tested against.
#pragma once

#include <cstdint>

#include "engine/model/relative_position.h"

namespace dflash::cpu {

struct DisentangledAttentionArgs {
  int num_heads = 0;
  int head_dim = 0;
  // Packed activations: row t holds token t; head h occupies columns [h*d, (h+1)*d).
  const float* q = nullptr;  // [total_tokens, >= num_heads*d], row stride ld_q
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t ld_q = 0;
  int64_t ld_k = 0;
  int64_t ld_v = 0;
  // Projected relative embeddings [2k, num_heads*d] (row stride ld_pos). pos_key enables c2p,
  // pos_query enables p2c; both null (or index null) means plain scaled attention.
  const float* pos_key = nullptr;
  const float* pos_query = nullptr;
  int64_t ld_pos = 0;
  const RelativePositionIndex* index = nullptr;
  float scale = 1.0f;
  const int32_t* cu_seqlens = nullptr;  // [num_sequences + 1]
  int num_sequences = 0;
  float* out = nullptr;  // [total_tokens, num_heads*d], row stride ld_out
  int64_t ld_out = 0;
};

void DisentangledAttention(const DisentangledAttentionArgs& args);

}  // namespace dflash::cpu
