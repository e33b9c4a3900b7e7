// Warp-level pieces of the attention forward shared by the 64 x 64 tile kernel
// (attention_fwd_kernel.cuh, and its TF32 form) and the short-sequence kernel
// (attention_short_kernel.cuh): one warp owns 16 query rows; S [16, n] and O [16, d] live in
// registers in the m16n8 C layout (thread (group g = lane / 4, quad q = lane % 4) holds rows g
// and g + 8, columns 8 t + 2 q and + 1 of each 8-column tile t); Q, K and V rows come from
// padded shared tiles (row stride Traits::kRowStride elements).
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

// TF32 (Element float): s [16, kKeys] += Q K^T by m16n8k8 over 8-column k-steps, Q's fragments
// read from its 16 shared rows at `queries` per k-step and rounded to TF32 (held for the whole
// key loop they would take 2x the registers of the 16-bit types': 64 at d = 128); K enters
// truncated. ldmatrix .b16 on 16-byte float rows gives each lane the float (row lane / 4, column
// lane % 4) of an 8 x 4 block, which is the m16n8k8 .tf32 A / B element of that lane.
// Traits::kSplitTf32 (strict float32): 3xTF32, every Q and K element split as Q = Qb + Qs,
// K = Kb + Ks (SplitTf32) and
//   S [16, kKeys] += Qs Kb^T + Qb Ks^T + Qb Kb^T       (Q [16, d], K [kKeys, d])
// by three m16n8k8 per 8 x 8 block and k-step into the same float32 accumulators (the small
// products first); the dropped Qs Ks^T is below 2^-22 of each product.
template <typename Traits, int kKeys>
__device__ __forceinline__ void AccumulateScoresTf32(float (&s)[kKeys / 8][4], const float* queries,
                                                     const float* keys, int lane) {
  static_assert(Traits::kTf32, "float tiles");
  // 3xTF32 unrolled two k-steps at a time: fully unrolled, ptxas hoisted every k-step's split K
  // fragments and spilled at d = 32 (255 registers).
#pragma unroll(Traits::kSplitTf32 ? 2 : Traits::kHeadDim / 8)
  for (int kk = 0; kk < Traits::kHeadDim / 8; ++kk) {
    uint32_t q[4];
    const int q_row = (lane % 8) + ((lane / 8) % 2) * 8;
    LdMatrixX4(q, queries + q_row * Traits::kRowStride + kk * 8 + (lane / 16) * 4);
    [[maybe_unused]] uint32_t q_small[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (Traits::kSplitTf32) {
        const Tf32Split split = SplitTf32(__uint_as_float(q[e]));
        q[e] = split.big;
        q_small[e] = split.small;
      } else {
        q[e] = ToTf32(__uint_as_float(q[e]));
      }
    }
#pragma unroll
    for (int pair = 0; pair < kKeys / 16; ++pair) {
      uint32_t k_fragment[4];
      const int row = pair * 16 + (lane % 8) + (lane / 16) * 8;
      const int column = kk * 8 + ((lane / 8) % 2) * 4;
      LdMatrixX4(k_fragment, keys + row * Traits::kRowStride + column);
      if constexpr (Traits::kSplitTf32) {
        uint32_t k_small[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const Tf32Split split = SplitTf32(__uint_as_float(k_fragment[e]));
          k_fragment[e] = split.big;
          k_small[e] = split.small;
        }
        Mma<float>::Run(s[2 * pair], q_small, k_fragment[0], k_fragment[1]);
        Mma<float>::Run(s[2 * pair + 1], q_small, k_fragment[2], k_fragment[3]);
        Mma<float>::Run(s[2 * pair], q, k_small[0], k_small[1]);
        Mma<float>::Run(s[2 * pair + 1], q, k_small[2], k_small[3]);
      }
      Mma<float>::Run(s[2 * pair], q, k_fragment[0], k_fragment[1]);
      Mma<float>::Run(s[2 * pair + 1], q, k_fragment[2], k_fragment[3]);
    }
  }
}

// TF32: o [16, d] += P V over 8-key k-steps. The C layout holds keys 2q, 2q + 1 of each 8-key
// tile where the A layout wants q, q + 4; the sum over keys does not depend on their order, so
// A position q takes key 2q and q + 4 takes 2q + 1 (no shuffles), and B reads V rows 2q and
// 2q + 1 to match: b0 = V[2q][group], b1 = V[2q + 1][group], scalar loads (ldmatrix cannot
// transpose 32-bit elements), on distinct banks for row strides of 4 mod 32 floats.
// Traits::kSplitTf32 (strict float32): 3xTF32 as in AccumulateScoresTf32, P = Pb + Ps and
// V = Vb + Vs,
//   O_tile [16, d] = Ps Vb + Pb Vs + Pb Vb             (P [16, kKeys], V [kKeys, d])
//   O += O_tile
// three m16n8k8 per 8-key step and 8-column tile into a zeroed O_tile, added to O with float32
// adds. The tensor cores truncate when they add a product into their accumulator, so summing all
// L keys in O itself would grow the error with L (measured against float64: 3.1e-5 relative L2
// at L = 4,097, 2.2e-4 at 32,768); a fresh O_tile bounds each chain to one key tile.
template <typename Traits, int kKeys>
__device__ __forceinline__ void AccumulateValuesTf32(float (&o)[Traits::kHeadDim / 8][4],
                                                     const float (&p)[kKeys / 8][4],
                                                     const float* values, int lane) {
  static_assert(Traits::kTf32 && Traits::kRowStride % 32 == 4, "float tiles, conflict-free rows");
  const int group = lane / 4;
  const int quad = lane % 4;
  [[maybe_unused]] float o_tile[Traits::kSplitTf32 ? Traits::kHeadDim / 8 : 1][4] = {};
#pragma unroll
  for (int kk = 0; kk < kKeys / 8; ++kk) {
    const float* rows = values + (kk * 8 + 2 * quad) * Traits::kRowStride + group;
    if constexpr (Traits::kSplitTf32) {
      const Tf32Split p_split[4] = {SplitTf32(p[kk][0]), SplitTf32(p[kk][2]), SplitTf32(p[kk][1]),
                                    SplitTf32(p[kk][3])};
      const uint32_t p_big[4] = {p_split[0].big, p_split[1].big, p_split[2].big, p_split[3].big};
      const uint32_t p_small[4] = {p_split[0].small, p_split[1].small, p_split[2].small,
                                   p_split[3].small};
#pragma unroll
      for (int t = 0; t < Traits::kHeadDim / 8; ++t) {
        const Tf32Split v0 = SplitTf32(rows[t * 8]);
        const Tf32Split v1 = SplitTf32(rows[Traits::kRowStride + t * 8]);
        Mma<float>::Run(o_tile[t], p_small, v0.big, v1.big);
        Mma<float>::Run(o_tile[t], p_big, v0.small, v1.small);
        Mma<float>::Run(o_tile[t], p_big, v0.big, v1.big);
      }
    } else {
      const uint32_t p_fragment[4] = {ToTf32(p[kk][0]), ToTf32(p[kk][2]), ToTf32(p[kk][1]),
                                      ToTf32(p[kk][3])};
#pragma unroll
      for (int t = 0; t < Traits::kHeadDim / 8; ++t) {
        Mma<float>::Run(o[t], p_fragment, __float_as_uint(rows[t * 8]),
                        __float_as_uint(rows[Traits::kRowStride + t * 8]));
      }
    }
  }
  if constexpr (Traits::kSplitTf32) {
#pragma unroll
    for (int t = 0; t < Traits::kHeadDim / 8; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[t][e] += o_tile[t][e];
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
