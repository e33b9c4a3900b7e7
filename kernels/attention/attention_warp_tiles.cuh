// Warp-level pieces of the attention forward shared by the 64 x 64 tile kernel
// (attention_fwd_kernel.cuh) and the short-sequence kernel (attention_short_kernel.cuh): one warp
// owns 16 query rows; S [16, n] and O [16, d] live in registers in the m16n8 C layout (thread
// (group g = lane / 4, quad q = lane % 4) holds rows g and g + 8, columns 8 t + 2 q and + 1 of
// each 8-column tile t); Q, K and V rows come from padded shared tiles (row stride
// Traits::kRowStride elements).
#pragma once

#include <cstdint>

#include "kernels/attention/attention_params.h"
#include "kernels/attention/mma_sm80.h"

namespace dflash::kernels {

// The first and the one-past-last token of `sequence`: the padded layout's fixed rows, or the
// packed layout's cu_seqlens.
template <typename Element>
__device__ __forceinline__ void SequenceBounds(const AttentionParams<Element>& params, int sequence,
                                               int* seq_start, int* seqlen) {
  if (params.key_padding_mask != nullptr) {
    *seq_start = sequence * params.padded_length;
    *seqlen = params.padded_length;
  } else {
    *seq_start = params.cu_seqlens[sequence];
    *seqlen = params.cu_seqlens[sequence + 1] - *seq_start;
  }
}

// Row `token` of a [tokens, row_stride] tensor, at the first column of head `head` (d columns
// per head): where one sequence's rows of one head of Q, K or V start.
template <typename Element>
__device__ __forceinline__ const Element* HeadRows(const Element* tensor, int64_t row_stride,
                                                   int token, int head, int head_dim) {
  return tensor + static_cast<int64_t>(token) * row_stride + head * head_dim;
}

// A fragments [16, d] (k-steps of m16n8k16) of rows first_row .. first_row + 15 of a shared tile.
template <typename Traits>
__device__ __forceinline__ void LoadRowFragments(uint32_t (&fragments)[Traits::kHeadDim / 16][4],
                                                 const typename Traits::Element* tile,
                                                 int first_row, int lane) {
#pragma unroll
  for (int kk = 0; kk < Traits::kHeadDim / 16; ++kk) {
    const int row = first_row + (lane % 8) + ((lane / 8) % 2) * 8;
    const int column = kk * 16 + (lane / 16) * 8;
    LdMatrixX4(fragments[kk], tile + row * Traits::kRowStride + column);
  }
}

// s [16, kKeys] += Q K^T for the kKeys shared key rows at `keys`.
template <typename Traits, int kKeys>
__device__ __forceinline__ void AccumulateScores(float (&s)[kKeys / 8][4],
                                                 const uint32_t (&q)[Traits::kHeadDim / 16][4],
                                                 const typename Traits::Element* keys, int lane) {
  using MmaOp = Mma<typename Traits::Element>;
#pragma unroll
  for (int kk = 0; kk < Traits::kHeadDim / 16; ++kk) {
#pragma unroll
    for (int pair = 0; pair < kKeys / 16; ++pair) {
      uint32_t k_fragment[4];
      const int row = pair * 16 + (lane % 8) + (lane / 16) * 8;
      const int column = kk * 16 + ((lane / 8) % 2) * 8;
      LdMatrixX4(k_fragment, keys + row * Traits::kRowStride + column);
      MmaOp::Run(s[2 * pair], q[kk], k_fragment[0], k_fragment[1]);
      MmaOp::Run(s[2 * pair + 1], q[kk], k_fragment[2], k_fragment[3]);
    }
  }
}

// o [16, d] += P V for the kKeys shared value rows at `values`, P [16, kKeys] the exponentiated
// scores in S's registers (their C layout is the A layout), rounded to the input type.
template <typename Traits, int kKeys>
__device__ __forceinline__ void AccumulateValues(float (&o)[Traits::kHeadDim / 8][4],
                                                 const float (&p)[kKeys / 8][4],
                                                 const typename Traits::Element* values, int lane) {
  using MmaOp = Mma<typename Traits::Element>;
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    const uint32_t p_fragment[4] = {MmaOp::Pack(p[2 * kk][0], p[2 * kk][1]),
                                    MmaOp::Pack(p[2 * kk][2], p[2 * kk][3]),
                                    MmaOp::Pack(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                                    MmaOp::Pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int pair = 0; pair < Traits::kHeadDim / 16; ++pair) {
      uint32_t v_fragment[4];
      const int row = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
      const int column = pair * 16 + (lane / 16) * 8;
      LdMatrixX4Trans(v_fragment, values + row * Traits::kRowStride + column);
      MmaOp::Run(o[2 * pair], p_fragment, v_fragment[0], v_fragment[1]);
      MmaOp::Run(o[2 * pair + 1], p_fragment, v_fragment[2], v_fragment[3]);
    }
  }
}

// Sets the scores of keys first_key + 8 t + 2 quad (+ 1) past the sequence end or removed by the
// padding mask to -inf.
template <typename Element, int kNTiles>
__device__ __forceinline__ void MaskInvalidKeys(float (&s)[kNTiles][4],
                                                const AttentionParams<Element>& params,
                                                int seq_start, int seqlen, int first_key,
                                                int quad) {
#pragma unroll
  for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = first_key + t * 8 + quad * 2 + (e % 2);
      const bool valid = key < seqlen && (params.key_padding_mask == nullptr ||
                                          params.key_padding_mask[seq_start + key] != 0);
      if (!valid) s[t][e] = -INFINITY;
    }
  }
}

}  // namespace dflash::kernels
