// Strict float32 forward of the disentangled attention, for validation: one CTA per (query
// token, head), plain FFMA dot products (no tensor cores, no TF32), the position terms computed
// directly as Q_i . PosK[slot] and K_j . PosQ[slot], and a three-pass softmax (max, then
// exp / sum / P V over chunks of 128 keys). O(L * d) work per row: correct, not fast.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/attention/attention_params.h"

namespace dflash::kernels {

struct Fp32PositionInputs {
  const float* pos_key;    // [2k, H * d] or null
  const float* pos_query;  // [2k, H * d] or null
  int num_sequences;
};

__device__ __forceinline__ float BlockReduceMax(float value, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  float result = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) result = fmaxf(result, scratch[w]);
  __syncthreads();
  return result;
}

__device__ __forceinline__ float Dot(const float* a, const float* b, int n) {
  float sum = 0.0f;
  for (int c = 0; c < n; ++c) sum = fmaf(a[c], b[c], sum);
  return sum;
}

// blockDim.x == 128; dynamic shared memory: (2 * head_dim + 128 + 8) floats.
__global__ void DisentangledAttentionFp32Kernel(const AttentionParams<float> params,
                                                const Fp32PositionInputs positions, int head_dim) {
  const int token = blockIdx.x;
  const int head = blockIdx.y;
  int seq_start;
  int seqlen;
  if (params.key_padding_mask != nullptr) {
    seq_start = (token / params.padded_length) * params.padded_length;
    seqlen = params.padded_length;
  } else {
    int lo = 0;
    int hi = positions.num_sequences - 1;
    while (lo < hi) {  // Last sequence whose start is <= token.
      const int mid = (lo + hi + 1) / 2;
      if (params.cu_seqlens[mid] <= token)
        lo = mid;
      else
        hi = mid - 1;
    }
    seq_start = params.cu_seqlens[lo];
    seqlen = params.cu_seqlens[lo + 1] - seq_start;
  }
  const int query = token - seq_start;
  extern __shared__ float shared[];
  float* q = shared;                              // [d]
  float* accumulator = q + head_dim;              // [d]
  float* probabilities = accumulator + head_dim;  // [128]
  float* scratch = probabilities + 128;           // [8]
  const int pos_stride = params.num_heads * head_dim;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    q[c] = params.q[static_cast<int64_t>(token) * params.q_row_stride + head * head_dim + c];
    accumulator[c] = 0.0f;
  }
  __syncthreads();

  auto score = [&](int key) -> float {
    if (params.key_padding_mask != nullptr && params.key_padding_mask[seq_start + key] == 0) {
      return -INFINITY;
    }
    const float* k =
        params.k + static_cast<int64_t>(seq_start + key) * params.k_row_stride + head * head_dim;
    float value = Dot(q, k, head_dim);
    if (positions.pos_key != nullptr || positions.pos_query != nullptr) {
      const int delta = max(-params.band, min(params.band, query - key));
      const int slot = params.lut[delta + params.band];
      if (positions.pos_key != nullptr) {
        value +=
            Dot(q, positions.pos_key + static_cast<int64_t>(slot) * pos_stride + head * head_dim,
                head_dim);
      }
      if (positions.pos_query != nullptr) {
        value +=
            Dot(k, positions.pos_query + static_cast<int64_t>(slot) * pos_stride + head * head_dim,
                head_dim);
      }
    }
    return value * params.scale_log2;  // Plain scale here: the host passes scale, not scale*log2e.
  };

  float local_max = -INFINITY;
  for (int key = threadIdx.x; key < seqlen; key += blockDim.x)
    local_max = fmaxf(local_max, score(key));
  const float max_score = BlockReduceMax(local_max, scratch);
  const float reference = max_score == -INFINITY ? 0.0f : max_score;

  float local_sum = 0.0f;
  for (int chunk = 0; chunk < seqlen; chunk += 128) {
    const int key = chunk + threadIdx.x;
    const float p = key < seqlen ? expf(score(key) - reference) : 0.0f;
    probabilities[threadIdx.x] = p;
    local_sum += p;
    __syncthreads();
    const int count = min(128, seqlen - chunk);
    for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
      float sum = accumulator[c];
      for (int j = 0; j < count; ++j) {
        // A masked key adds nothing, whatever its V row holds (0 x NaN would be NaN).
        if (params.key_padding_mask != nullptr &&
            params.key_padding_mask[seq_start + chunk + j] == 0) {
          continue;
        }
        sum = fmaf(probabilities[j],
                   params.v[static_cast<int64_t>(seq_start + chunk + j) * params.v_row_stride +
                            head * head_dim + c],
                   sum);
      }
      accumulator[c] = sum;
    }
    __syncthreads();
  }
  // Block sum of the per-thread partial sums: warp shuffles, then the warp partials.
  float sum = local_sum;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = sum;
  __syncthreads();
  float row_sum = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) row_sum += scratch[w];
  const float inverse = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    params.out[static_cast<int64_t>(token) * params.out_row_stride + head * head_dim + c] =
        accumulator[c] * inverse;
  }
  if (params.lse != nullptr && threadIdx.x == 0) {
    params.lse[static_cast<int64_t>(head) * params.total_tokens + token] =
        row_sum > 0.0f ? reference + logf(row_sum) : -INFINITY;
  }
}

}  // namespace dflash::kernels
