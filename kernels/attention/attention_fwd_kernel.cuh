// Tensor-core (mma.sync m16n8k16) forward of the disentangled attention, FlashAttention-2 style:
// one CTA of 4 warps owns 64 query rows of one (sequence, head) and streams 64-key tiles through
// shared memory, keeping the online-softmax state (row max m, row sum l, output O) in registers.
//
// Per key tile the position bias is added to S = Q K^T before the softmax. The tile's delta range
// classifies it (shared/KERNELS.md 2.8):
//   saturated (every delta >= hi_threshold, or every delta <= lo_threshold): one slot s for the
//     whole tile, bias[i,j] = c_i + p_j with c_i = C2P[h, i, s] held in registers and
//     p_j = P2C[h, j, s] staged in shared memory;
//   band (otherwise): the C2P rows of the tile's queries and the P2C rows of its keys, restricted
//     to the window of slots the tile's deltas reach (<= 127 of them), are copied into shared
//     memory next to K and V, and bias[i,j] = C2P_win[i, idx(i-j)] + P2C_win[j, idx(i-j)].
// No bias value is gathered from global memory element by element.
// Shapes: Q/K/V tiles [64, D] in shared memory (rows padded by 8 elements so that ldmatrix rows
// fall on distinct banks); C2P/P2C windows [64, kSlotWindow]; S [16, 64] and O [16, D] per warp
// in registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

#include "kernels/attention/attention_params.h"
#include "kernels/attention/mma_sm80.h"

namespace dflash::kernels {

template <int kHeadDim_, typename Element_>
struct AttentionTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = 64;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRowStride = kHeadDim + 8;  // Elements per shared-memory row.
  static constexpr int kTileElements = kBlockM * kRowStride;
  static constexpr int kWindowElements = kBlockM * kSlotWindow;
  // Q, K, V tiles; the C2P and P2C windows; the saturated column terms (float). K and V are not
  // double-buffered: measured on the H200, the extra 36 KB cost a resident CTA per SM and ran
  // 1.35x slower at L = 8192 than waiting for each tile with three CTAs per SM.
  static constexpr int kSharedBytes =
      (3 * kTileElements + 2 * kWindowElements) * static_cast<int>(sizeof(Element)) +
      kBlockN * static_cast<int>(sizeof(float)) +
      (2 * kSharedLutBand + 1) * static_cast<int>(sizeof(int16_t));
  static constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks.
  static_assert(kBlockM == kBlockN, "tile loaders assume square tiles");
  static_assert(kHeadDim % 16 == 0, "head dim must be a multiple of 16");
};

// Copies rows [row0, row0 + 64) of one head into a padded shared tile; rows past `rows` are zero.
template <typename Traits>
__device__ __forceinline__ void LoadTile(typename Traits::Element* tile,
                                         const typename Traits::Element* base, int64_t row_stride,
                                         int row0, int rows) {
  for (int chunk = threadIdx.x; chunk < Traits::kBlockM * Traits::kChunksPerRow;
       chunk += Traits::kThreads) {
    const int row = chunk / Traits::kChunksPerRow;
    const int column = (chunk % Traits::kChunksPerRow) * 8;
    const bool valid = row0 + row < rows;
    const typename Traits::Element* source =
        valid ? base + static_cast<int64_t>(row0 + row) * row_stride + column : base;
    CpAsync16(tile + row * Traits::kRowStride + column, source, valid ? 16 : 0);
  }
}

// Copies slots [window0, window0 + kSlotWindow) of table rows first_row .. first_row + 63 (rows
// past `last_row` repeat it: their values are never used) into a [64, kSlotWindow] window.
template <typename Traits>
__device__ __forceinline__ void LoadWindow(typename Traits::Element* window,
                                           const typename Traits::Element* table, int64_t row0,
                                           int first_row, int last_row, int slot_stride,
                                           int window0) {
  constexpr int kChunks = kSlotWindow / 8;
  for (int chunk = threadIdx.x; chunk < Traits::kBlockM * kChunks; chunk += Traits::kThreads) {
    const int row = chunk / kChunks;
    const int column = (chunk % kChunks) * 8;
    const int64_t table_row = row0 + min(first_row + row, last_row);
    CpAsync16(window + row * kSlotWindow + column,
              table + table_row * slot_stride + window0 + column, 16);
  }
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 2)
    DisentangledAttentionKernel(const AttentionParams<typename Traits::Element> params) {
  using Element = typename Traits::Element;
  using MmaOp = Mma<Element>;
  constexpr int D = Traits::kHeadDim;
  constexpr int kN = Traits::kBlockN;
  constexpr int kNTiles = kN / 8;  // 8-column MMA tiles of S.
  constexpr int kDTiles = D / 8;   // 8-column MMA tiles of O.
  constexpr int kKSteps = D / 16;  // k-steps of Q K^T.

  const int m_block = blockIdx.x;
  const int head = blockIdx.y;
  const int sequence = params.sequence_offset + static_cast<int>(blockIdx.z);
  int seq_start;
  int seqlen;
  if (params.key_padding_mask != nullptr) {
    seq_start = sequence * params.padded_length;
    seqlen = params.padded_length;
  } else {
    seq_start = params.cu_seqlens[sequence];
    seqlen = params.cu_seqlens[sequence + 1] - seq_start;
  }
  const int m0 = m_block * Traits::kBlockM;
  if (m0 >= seqlen) return;

  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Element* sQ = reinterpret_cast<Element*>(shared_bytes);
  Element* sK = sQ + Traits::kTileElements;
  Element* sV = sK + Traits::kTileElements;
  Element* sC2P = sV + Traits::kTileElements;
  Element* sP2C = sC2P + Traits::kWindowElements;
  float* sPSaturated = reinterpret_cast<float*>(sP2C + Traits::kWindowElements);
  int16_t* sLut = reinterpret_cast<int16_t*>(sPSaturated + kN);
  // The slot table in shared memory when it is small (v3: band 512, 1025 entries).
  const bool lut_in_shared = params.band <= kSharedLutBand;
  if (lut_in_shared && (params.c2p != nullptr || params.p2c != nullptr)) {
    for (int i = threadIdx.x; i <= 2 * params.band; i += Traits::kThreads) {
      sLut[i] = static_cast<int16_t>(params.lut[i]);
    }
  }

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group = lane / 4;
  const int quad = lane % 4;

  const Element* q_base =
      params.q + static_cast<int64_t>(seq_start) * params.q_row_stride + head * D;
  const Element* k_base =
      params.k + static_cast<int64_t>(seq_start) * params.k_row_stride + head * D;
  const Element* v_base =
      params.v + static_cast<int64_t>(seq_start) * params.v_row_stride + head * D;

  LoadTile<Traits>(sQ, q_base, params.q_row_stride, m0, seqlen);
  CpAsyncCommit();
  CpAsyncWait<0>();
  __syncthreads();

  // Q fragments of this warp's 16 rows, for every k-step.
  uint32_t q_fragments[kKSteps][4];
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
    const int row = warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
    const int column = kk * 16 + (lane / 16) * 8;
    LdMatrixX4(q_fragments[kk], sQ + row * Traits::kRowStride + column);
  }

  // This thread's two rows (local), as query positions in the sequence, and their C2P terms at
  // the two saturated slots.
  const int row_local[2] = {warp * 16 + group, warp * 16 + group + 8};
  const bool has_positions = params.c2p != nullptr || params.p2c != nullptr;
  const int64_t table_base = static_cast<int64_t>(head) * params.total_tokens + seq_start;
  int query[2];
  float c_hi[2] = {0.0f, 0.0f};
  float c_lo[2] = {0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    query[r] = m0 + row_local[r];
    if (params.c2p != nullptr) {
      // A saturated slot outside the batch's slot range belongs to no tile of this batch.
      const Element* row =
          params.c2p + (table_base + min(query[r], seqlen - 1)) * params.slot_stride;
      const int hi = params.slot_hi - params.slot_base;
      const int lo = params.slot_lo - params.slot_base;
      if (hi >= 0 && hi < params.slots) c_hi[r] = ToFloat(row[hi]);
      if (lo >= 0 && lo < params.slots) c_lo[r] = ToFloat(row[lo]);
    }
  }

  float o[kDTiles][4];
#pragma unroll
  for (int t = 0; t < kDTiles; ++t) {
    o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  }
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};

  const int n_blocks = (seqlen + kN - 1) / kN;
  for (int n_block = 0; n_block < n_blocks; ++n_block) {
    const int n0 = n_block * kN;
    __syncthreads();  // Every warp is done with the previous K/V tile.
    LoadTile<Traits>(sK, k_base, params.k_row_stride, n0, seqlen);
    LoadTile<Traits>(sV, v_base, params.v_row_stride, n0, seqlen);
    // Tile class from its delta range, and the bias operands it needs in shared memory.
    const int delta_min = m0 - (n0 + kN - 1);
    const int delta_max = (m0 + Traits::kBlockM - 1) - n0;
    const int fixed_slot = delta_min >= params.hi_threshold   ? params.slot_hi
                           : delta_max <= params.lo_threshold ? params.slot_lo
                                                              : -1;
    int window0 = 0;
    if (has_positions && fixed_slot < 0) {
      const int first_slot =
          __ldg(params.lut + max(-params.band, min(params.band, delta_min)) + params.band);
      // Deltas of the tile outside the sequence can fall below the batch's first slot; valid
      // pairs never do, so the window starts at the batch's first slot at the lowest.
      window0 = max(0, first_slot - params.slot_base) & ~7;
      if (params.c2p != nullptr) {
        LoadWindow<Traits>(sC2P, params.c2p, table_base, m0, seqlen - 1, params.slot_stride,
                           window0);
      }
      if (params.p2c != nullptr) {
        LoadWindow<Traits>(sP2C, params.p2c, table_base, n0, seqlen - 1, params.slot_stride,
                           window0);
      }
    } else if (has_positions && fixed_slot >= 0 && threadIdx.x < kN) {
      // The column term of a saturated tile, already in the exp2 domain (0 without p2c).
      const int key = min(n0 + static_cast<int>(threadIdx.x), seqlen - 1);
      sPSaturated[threadIdx.x] = params.p2c == nullptr
                                     ? 0.0f
                                     : ToFloat(params.p2c[(table_base + key) * params.slot_stride +
                                                          fixed_slot - params.slot_base]) *
                                           params.scale_log2;
    }
    CpAsyncCommit();
    CpAsyncWait<0>();
    __syncthreads();

    // S = Q K^T: [16, 64] per warp.
    float s[kNTiles][4];
#pragma unroll
    for (int t = 0; t < kNTiles; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
      for (int pair = 0; pair < kNTiles / 2; ++pair) {
        uint32_t k_fragment[4];
        const int row = pair * 16 + (lane % 8) + (lane / 16) * 8;
        const int column = kk * 16 + ((lane / 8) % 2) * 8;
        LdMatrixX4(k_fragment, sK + row * Traits::kRowStride + column);
        MmaOp::Run(s[2 * pair], q_fragments[kk], k_fragment[0], k_fragment[1]);
        MmaOp::Run(s[2 * pair + 1], q_fragments[kk], k_fragment[2], k_fragment[3]);
      }
    }

    // Scores to the exp2 domain with the bias folded in: s <- s * scale + bias * scale. The tile
    // class is uniform across the CTA, so each branch below runs without divergence; the
    // per-element work is one FFMA (no positions), one LDS + FADD + FFMA (saturated), or a
    // table lookup and two LDS (band).
    const float scale = params.scale_log2;
    if (!has_positions) {
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[t][e] *= scale;
      }
    } else if (fixed_slot >= 0) {
      const bool high = delta_min >= params.hi_threshold;
      const float row_term[2] = {(high ? c_hi[0] : c_lo[0]) * scale,
                                 (high ? c_hi[1] : c_lo[1]) * scale};
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int column = t * 8 + quad * 2 + (e % 2);
          s[t][e] = fmaf(s[t][e], scale, row_term[e / 2] + sPSaturated[column]);
        }
      }
    } else {
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e / 2;
          const int column = t * 8 + quad * 2 + (e % 2);
          const int delta = max(-params.band, min(params.band, query[r] - (n0 + column)));
          const int slot = (lut_in_shared ? static_cast<int>(sLut[delta + params.band])
                                          : __ldg(params.lut + delta + params.band)) -
                           params.slot_base - window0;
          float bias = 0.0f;
          if (params.c2p != nullptr) bias += ToFloat(sC2P[row_local[r] * kSlotWindow + slot]);
          if (params.p2c != nullptr) bias += ToFloat(sP2C[column * kSlotWindow + slot]);
          s[t][e] = fmaf(s[t][e], scale, bias * scale);
        }
      }
    }
    // Keys past the sequence end or masked by the padding mask: only tiles that have any.
    if (n0 + kN > seqlen || params.key_padding_mask != nullptr) {
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = n0 + t * 8 + quad * 2 + (e % 2);
          const bool valid = key < seqlen && (params.key_padding_mask == nullptr ||
                                              params.key_padding_mask[seq_start + key] != 0);
          if (!valid) s[t][e] = -INFINITY;
        }
      }
    }

    // Online softmax (exp2 domain): rescale the running state to the new row maxima.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int t = 0; t < kNTiles; ++t)
        tile_max = fmaxf(tile_max, fmaxf(s[t][2 * r], s[t][2 * r + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[r], tile_max);
      // A row with no valid key so far keeps max -inf; exponentiate against 0 to avoid NaN.
      const float reference = new_max == -INFINITY ? 0.0f : new_max;
      const float correction = FastExp2(row_max[r] - reference);
      row_max[r] = new_max;
      row_sum[r] *= correction;
#pragma unroll
      for (int t = 0; t < kDTiles; ++t) {
        o[t][2 * r] *= correction;
        o[t][2 * r + 1] *= correction;
      }
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) {
        s[t][2 * r] = FastExp2(s[t][2 * r] - reference);
        s[t][2 * r + 1] = FastExp2(s[t][2 * r + 1] - reference);
        row_sum[r] += s[t][2 * r] + s[t][2 * r + 1];
      }
    }

    // O += P V, P taken straight from the S accumulators (their C layout is the A layout).
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) {
      const uint32_t p_fragment[4] = {MmaOp::Pack(s[2 * kk][0], s[2 * kk][1]),
                                      MmaOp::Pack(s[2 * kk][2], s[2 * kk][3]),
                                      MmaOp::Pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                      MmaOp::Pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int pair = 0; pair < kDTiles / 2; ++pair) {
        uint32_t v_fragment[4];
        const int row = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int column = pair * 16 + (lane / 16) * 8;
        LdMatrixX4Trans(v_fragment, sV + row * Traits::kRowStride + column);
        MmaOp::Run(o[2 * pair], p_fragment, v_fragment[0], v_fragment[1]);
        MmaOp::Run(o[2 * pair + 1], p_fragment, v_fragment[2], v_fragment[3]);
      }
    }
  }

  // Normalise and store the two rows of this thread.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (query[r] >= seqlen) continue;
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
    Element* out_row =
        params.out + static_cast<int64_t>(seq_start + query[r]) * params.out_row_stride + head * D;
#pragma unroll
    for (int t = 0; t < kDTiles; ++t) {
      const uint32_t packed = MmaOp::Pack(o[t][2 * r] * inverse, o[t][2 * r + 1] * inverse);
      *reinterpret_cast<uint32_t*>(out_row + t * 8 + quad * 2) = packed;
    }
    if (params.lse != nullptr && quad == 0) {
      // ln(sum_j exp(S_ij * scale)) = ln 2 * (m + log2(l)) in the exp2 domain.
      params.lse[static_cast<int64_t>(head) * params.total_tokens + seq_start + query[r]] =
          sum > 0.0f ? 0.69314718056f * (row_max[r] + log2f(sum)) : -INFINITY;
    }
  }
}

}  // namespace dflash::kernels
