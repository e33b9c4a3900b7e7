// The softmax of the tensor-core attention kernels (tile kernel, attention_fwd_kernel.cuh; short
// kernel, attention_short_kernel.cuh) in the exp2 domain, and its epilogue. Scores sit in m16n8
// accumulators: a thread holds rows r = 0, 1 (group and group + 8 of its warp's 16) of each
// 8-key tile t at s[t][2 r], s[t][2 r + 1], and the four threads of a quad hold a row's keys;
// O [16, d] sits likewise in o[d / 8][4]. Per row the kernels keep the maximum m, the sum
// l = sum_j 2^(s_j - m) and O = sum_j 2^(s_j - m) V_j; the output is O / l, and
// ln(sum_j exp(S_ij * scale)) = ln 2 * (m + log2(l)).
#pragma once

#include <cmath>

#include "kernels/attention/mma_sm80.h"

namespace dflash::kernels {

// Row r's maximum over the quad's keys of one tile: max over t, e of s[t][2 r + e].
template <int kNTiles>
__device__ __forceinline__ float QuadRowMax(const float (&s)[kNTiles][4], int r) {
  float tile_max = -INFINITY;
#pragma unroll
  for (int t = 0; t < kNTiles; ++t) tile_max = fmaxf(tile_max, fmaxf(s[t][2 * r], s[t][2 * r + 1]));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
  return fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
}

// What P is exponentiated against for a maximum m: m, or 0 while m is -inf (a row with no valid
// key so far, or a key group or warp that saw none), which avoids NaN.
__device__ __forceinline__ float SoftmaxReference(float m) { return m == -INFINITY ? 0.0f : m; }

// Row r's running maximum moves to new_max: O scales by c = 2^(m_old - m_new) here, l by the
// caller (ExponentiateRow). Returns the new reference and c.
struct MovedMax {
  float reference;
  float correction;
};
template <int kDTiles>
__device__ __forceinline__ MovedMax MoveRowMax(float (&o)[kDTiles][4], float (&row_max)[2], int r,
                                               float new_max) {
  const float reference = SoftmaxReference(new_max);
  const float correction = FastExp2(row_max[r] - reference);
  row_max[r] = new_max;
#pragma unroll
  for (int t = 0; t < kDTiles; ++t) {
    o[t][2 * r] *= correction;
    o[t][2 * r + 1] *= correction;
  }
  return MovedMax{reference, correction};
}

// Row r's P = 2^(s * score_scale + offset), offset = row offset - reference, and
// l = l * sum_scale + sum(P): the first pair's sum joins l * sum_scale in one FMA, so a lazy tile
// that skips the rescale (sum_scale 1: l + x, exact) and one that takes it round as the eager
// form does.
template <int kNTiles>
__device__ __forceinline__ void ExponentiateRow(float (&s)[kNTiles][4], float& row_sum, int r,
                                                float score_scale, float offset, float sum_scale) {
#pragma unroll
  for (int t = 0; t < kNTiles; ++t) {
    s[t][2 * r] = FastExp2(fmaf(s[t][2 * r], score_scale, offset));
    s[t][2 * r + 1] = FastExp2(fmaf(s[t][2 * r + 1], score_scale, offset));
    const float pair = s[t][2 * r] + s[t][2 * r + 1];
    row_sum = t == 0 ? fmaf(row_sum, sum_scale, pair) : row_sum + pair;
  }
}

// A row's l from the quad's partial sums.
__device__ __forceinline__ float QuadRowSum(float partial) {
  partial += __shfl_xor_sync(0xffffffffu, partial, 1);
  return partial + __shfl_xor_sync(0xffffffffu, partial, 2);
}

// The output's factor 1 / l; 0 for a row without any valid key (l = 0, O = 0).
__device__ __forceinline__ float InverseRowSum(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }

// ln(sum_j exp(S_ij * scale)) = ln 2 * (m + log2(l)) in the exp2 domain; -inf without valid keys.
__device__ __forceinline__ float RowLogSumExp(float m, float l) {
  return l > 0.0f ? 0.69314718056f * (m + log2f(l)) : -INFINITY;
}

}  // namespace dflash::kernels
