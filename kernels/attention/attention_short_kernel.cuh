// Short-sequence forward of the disentangled attention (every sequence <= kShortMaxKeys = 128
// tokens, d <= 64, C2P/P2C windows computed from PosK / PosQ): for batches too small to fill the
// GPU (one short sequence), where one CTA's latency is the kernel's time. The 64 x 64 tile
// kernel (attention_fwd_kernel.cuh) gives each warp 16 rows x 64 keys and a [16, 128] C2P window
// of which a warp's rows reach 79 slots: ~2,200 dependent instructions per warp at L = 128 (ncu).
// Here one CTA of 8 warps owns 32 query rows of one (sequence, head) and all of its keys:
//   warp w = (row warp r = w % 2, key warp c = w / 2) computes rows m0 + 16 r .. + 15 against
//   keys 32 c .. 32 c + 31, so S [16, 32] per warp;
//   C2P_w [16, 48] = Q_rows . PosK[s_c2p .. s_c2p + 47]^T, s_c2p = idx(m0 + 16 r - 32 c - 31): the
//     47 deltas of the warp's tile (idx grows by at most one slot per delta: the host checks);
//   P2C_b [16, 48] = K_b . PosQ[s_p2c(b) .. + 47]^T for the 16 keys of block b = 2 c + r against
//     the CTA's 32 rows, s_p2c(b) = idx(m0 - 16 b - 15), read by both warps of key warp c;
//   S_ij = (Q_i.K_j + C2P_w[i, idx(i-j) - s_c2p] + P2C_b(j)[j, idx(i-j) - s_p2c(b(j))]) * scale,
//   one softmax block per warp (m, l over its 32 keys), O_w [16, d] = P V_keys;
//   the four key warps of a row warp merge (m, l, O) through shared memory, each normalising and
//   storing d / 4 output columns: m = max_c m_c, O = sum_c 2^(m_c - m) O_c / sum_c 2^(m_c - m) l_c.
// Every delta of a CTA lies in [m0 - 127, m0 + 31]: PosK / PosQ rows idx(m0 - 127) .. + 159 are
// staged once (160 slots), so every warp's window is a slice of them; where idx is not linear
// over those 159 deltas their slot table is staged in shared memory. Tensors: Q [32, d], K / V
// [128, d] (rows past the sequence zero), PosK / PosQ windows [160, d], C2P [8 warps][16, 48], P2C
// [128, 48]; S [16, 32] and O [16, d] per warp in registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/attention/attention_fwd_kernel.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/attention_softmax.cuh"
#include "kernels/attention/attention_traits.h"
#include "kernels/attention/attention_warp_tiles.cuh"
#include "kernels/attention/mma_sm80.h"
#include "kernels/common/element_conversion.cuh"

namespace dflash::kernels {

// Asynchronous copy of source rows first_row .. first_row + kRows - 1 (row stride `row_stride`)
// into a padded shared tile, rows at or past `valid_rows` zero: every thread copies one 16-byte
// column of every (kThreads / chunks per row)-th row, unrolled (no division per copy). The tile
// kernel's LoadTile does the same with a 64-bit row product per copy; advancing one pointer per
// pass measured 1.5% faster here (ncu, one 128-token sequence: 6.70-6.75 against 6.85 us), and
// LoadTile keeps its form for the register-capped tile kernels, whose ptxas counts it sets.
template <typename Traits, int kRows>
__device__ __forceinline__ void CopyRows(typename Traits::Element* tile,
                                         const typename Traits::Element* base, int64_t row_stride,
                                         int first_row, int valid_rows) {
  constexpr int kChunksPerRow = Traits::kHeadDim / 8;
  constexpr int kRowStep = Traits::kThreads / kChunksPerRow;
  static_assert(Traits::kThreads % kChunksPerRow == 0, "whole rows per pass");
  const int column = static_cast<int>(threadIdx.x) % kChunksPerRow * 8;
  const int row0 = static_cast<int>(threadIdx.x) / kChunksPerRow;
  const typename Traits::Element* source = base + (first_row + row0) * row_stride + column;
#pragma unroll
  for (int pass = 0; pass < (kRows + kRowStep - 1) / kRowStep; ++pass) {
    const int row = row0 + pass * kRowStep;
    if (kRows % kRowStep != 0 && row >= kRows) break;  // The last, partial pass (d = 32).
    const bool valid = first_row + row < valid_rows;
    CpAsync16(tile + row * Traits::kRowStride + column,
              valid ? source + pass * kRowStep * row_stride : base, valid ? 16 : 0);
  }
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    ShortDisentangledAttentionKernel(const AttentionParams<typename Traits::Element> params) {
  using Element = typename Traits::Element;
  using Tile = typename Traits::Tile;
  using MmaOp = Mma<Element>;
  constexpr int D = Traits::kHeadDim;
  constexpr int kStride = Traits::kRowStride;
  constexpr int kWindow = Traits::kWindow;
  constexpr int kKSteps = D / 16;
  constexpr int kNTiles = Traits::kKeysPerWarp / 8;  // 8-key MMA tiles of S.
  constexpr int kDTiles = D / 8;                     // 8-column MMA tiles of O.

  const int head = blockIdx.y;
  const int sequence = params.sequence_offset + static_cast<int>(blockIdx.z);
  const int m0 = static_cast<int>(blockIdx.x) * Traits::kBlockM;
  const int thread = static_cast<int>(threadIdx.x);

  extern __shared__ __align__(1024) unsigned char shared_bytes[];
  Element* sQ = reinterpret_cast<Element*>(shared_bytes);
  Element* sK = sQ + Traits::kQElements;
  Element* sV = sK + Traits::kKeyElements;
  Element* sPosK = sV + Traits::kKeyElements;
  Element* sPosQ = sPosK + Traits::kPositionElements;
  Element* sC2P = sPosQ + Traits::kPositionElements;
  Element* sP2C = sC2P + Traits::kC2PElements;
  int16_t* sLut = reinterpret_cast<int16_t*>(sP2C + Traits::kP2CElements);
  float* exchange = reinterpret_cast<float*>(sPosK);

  // The CTA's lowest delta and its slot: window columns are slots relative to slot_base. Where
  // idx(delta) = slot_zero + delta over every delta of the CTA (v3 at L <= 128), slots are
  // arithmetic: the PosK / PosQ windows are requested before anything else is read, and no slot
  // table is staged.
  const int delta0 = m0 - (Traits::kMaxKeys - 1);
  const bool linear =
      delta0 >= -params.linear_band && m0 + Traits::kBlockM - 1 <= params.linear_band;
  const int slot_base =
      linear ? params.slot_zero + delta0 : params.lut[max(-params.band, delta0) + params.band];
  const bool has_c2p = params.pos_key != nullptr;
  const bool has_p2c = params.pos_query != nullptr;
  const int64_t head_column = static_cast<int64_t>(head) * D;
  if (has_c2p) {
    CopyRows<Traits, Traits::kPositionRows>(sPosK, params.pos_key + head_column,
                                            params.pos_row_stride, slot_base, params.pos_rows);
  }
  if (has_p2c) {
    CopyRows<Traits, Traits::kPositionRows>(sPosQ, params.pos_query + head_column,
                                            params.pos_row_stride, slot_base, params.pos_rows);
  }

  int seq_start;
  int seqlen;
  SequenceBounds(params, sequence, &seq_start, &seqlen);
  if (m0 >= seqlen) {
    // No copy outlives the CTA's shared memory (wait_group waits for committed groups only).
    CpAsyncCommit();
    CpAsyncWait<0>();
    return;
  }

  const int warp = thread / 32;
  const int lane = thread % 32;
  const int group = lane / 4;
  const int quad = lane % 4;
  const int row_warp = warp % Traits::kRowWarps;
  const int key_warp = warp / Traits::kRowWarps;
  const int key0 = key_warp * Traits::kKeysPerWarp;  // The warp's first key.
  // Key warps past the sequence hold no valid key (uniform across the two warps of a key warp).
  const bool has_keys = key0 < seqlen;

  // Q, K (with the windows: one copy group), then V (a second one, waited for before P V).
  const Element* q_base = HeadRows(params.q, params.q_row_stride, seq_start, head, D);
  const Element* k_base = HeadRows(params.k, params.k_row_stride, seq_start, head, D);
  const Element* v_base = HeadRows(params.v, params.v_row_stride, seq_start, head, D);
  const int key_rows = min(seqlen, Traits::kMaxKeys);
  CopyRows<Traits, Traits::kBlockM>(sQ, q_base, params.q_row_stride, m0, seqlen);
  CopyRows<Traits, Traits::kMaxKeys>(sK, k_base, params.k_row_stride, 0, key_rows);
  CpAsyncCommit();
  CopyRows<Traits, Traits::kMaxKeys>(sV, v_base, params.v_row_stride, 0, key_rows);
  CpAsyncCommit();
  if (!linear) {
    for (int i = thread; i < Traits::kDeltas; i += Traits::kThreads) {
      const int delta = max(-params.band, min(params.band, delta0 + i));
      sLut[i] = static_cast<int16_t>(params.lut[delta + params.band] - slot_base);
    }
  }
  CpAsyncWait<1>();
  __syncthreads();

  // Q fragments of the warp's 16 rows (k-steps of m16n8k16).
  uint32_t q_fragments[kKSteps][4];
  LoadRowFragments<Tile>(q_fragments, sQ, row_warp * 16, lane);

  // The warp's C2P window and its key block's P2C window (slots relative to slot_base).
  const int block = 2 * key_warp + row_warp;  // Key block (16 keys) whose P2C this warp makes.
  // Window starts: idx of the lowest delta of the warp's tile (C2P) and of each key block of its
  // key warp against the CTA's rows (P2C: column = idx(i - j) - p2c_first[j's block - 2 c]).
  auto slot_of = [&](int delta) { return linear ? delta - delta0 : int{sLut[delta - delta0]}; };
  const int c2p_first = slot_of(m0 + row_warp * 16 - key0 - (Traits::kKeysPerWarp - 1));
  const int p2c_first[2] = {slot_of(m0 - 16 * (2 * key_warp) - 15),
                            slot_of(m0 - 16 * (2 * key_warp + 1) - 15)};
  Element* c2p_window = sC2P + warp * 16 * kWindow;
  if (has_keys) {
    uint32_t packed[2 * Traits::kWindowPairs][2];
    if (has_c2p) {
#pragma unroll
      for (int pair = 0; pair < Traits::kWindowPairs; ++pair) {
        ComputeWindowPair<Tile, false>(packed, pair, q_fragments, nullptr,
                                       sPosK + (c2p_first + 16 * pair) * kStride, lane);
      }
      StoreWindowRows<Tile, kWindow, 2 * Traits::kWindowPairs>(c2p_window, packed, 0,
                                                               Traits::kWindowPairs, lane);
    }
    if (has_p2c) {
      const int first = row_warp == 0 ? p2c_first[0] : p2c_first[1];  // No local-memory index.
#pragma unroll
      for (int pair = 0; pair < Traits::kWindowPairs; ++pair) {
        ComputeWindowPair<Tile, true>(packed, pair, q_fragments, sK + block * 16 * kStride,
                                      sPosQ + (first + 16 * pair) * kStride, lane);
      }
      StoreWindowRows<Tile, kWindow, 2 * Traits::kWindowPairs>(sP2C, packed, block * 16,
                                                               Traits::kWindowPairs, lane);
    }
  }
  // The two warps of a key warp read each other's P2C rows; C2P is the warp's own.
  asm volatile("bar.sync %0, %1;" ::"r"(1 + key_warp), "r"(64) : "memory");

  float o[kDTiles][4];
#pragma unroll
  for (int t = 0; t < kDTiles; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};
  float s[kNTiles][4];
  if (has_keys) {
    // S = Q K^T over the warp's 32 keys.
#pragma unroll
    for (int t = 0; t < kNTiles; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
    AccumulateScores<Tile, Traits::kKeysPerWarp>(s, q_fragments, sK + key0 * kStride, lane);

    // Bias and scale (exp2 domain): s = (s + C2P + P2C) * scale. Element (row i = m0 + 16 r + g
    // (+ 8), key j = key0 + 8 t + 2 quad + e): C2P column idx(i - j) - c2p_first, P2C at row j,
    // column idx(i - j) - p2c_first[t / 2]. Where idx(delta) = slot_zero + delta over every
    // delta of the CTA, both columns are the row's part plus compile-time offsets.
    const float scale = params.scale_log2;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row_in_warp = group + 8 * r;
      const int row_in_block = row_warp * 16 + row_in_warp;
      if (linear) {
        // C2P column = row_in_warp - (8 t + 2 quad + e) + 31; P2C column = row_in_block -
        // (j % 16) + 15 with j % 16 = 8 (t % 2) + 2 quad + e.
        const Element* c2p_row =
            c2p_window + row_in_warp * kWindow + row_in_warp + Traits::kKeysPerWarp - 1 - 2 * quad;
        const Element* p2c_row = sP2C + (key0 + 2 * quad) * kWindow + row_in_block + 15 - 2 * quad;
#pragma unroll
        for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float bias = 0.0f;
            if (has_c2p) bias += ToFloat(c2p_row[-(8 * t + e)]);
            if (has_p2c) bias += ToFloat(p2c_row[(8 * t + e) * kWindow - 8 * (t % 2) - e]);
            s[t][2 * r + e] = fmaf(s[t][2 * r + e], scale, bias * scale);
          }
        }
      } else {
        const int query = m0 + row_in_block;
#pragma unroll
        for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = key0 + 8 * t + 2 * quad + e;
            const int slot = sLut[query - key - delta0];
            float bias = 0.0f;
            if (has_c2p) bias += ToFloat(c2p_window[row_in_warp * kWindow + slot - c2p_first]);
            if (has_p2c) bias += ToFloat(sP2C[key * kWindow + slot - p2c_first[t / 2]]);
            s[t][2 * r + e] = fmaf(s[t][2 * r + e], scale, bias * scale);
          }
        }
      }
    }
    // Keys past the sequence end or masked by the padding mask.
    if (key0 + Traits::kKeysPerWarp > seqlen || params.key_padding_mask != nullptr) {
      MaskInvalidKeys(s, params, seq_start, seqlen, key0, quad);
    }

    // Softmax block of the warp's keys (exp2 domain).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = QuadRowMax(s, r);
      // A row whose keys here are all masked keeps max -inf: exponentiate against 0 (P = 0).
      const float reference = SoftmaxReference(row_max[r]);
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) {
        s[t][2 * r] = FastExp2(s[t][2 * r] - reference);
        s[t][2 * r + 1] = FastExp2(s[t][2 * r + 1] - reference);
        row_sum[r] += s[t][2 * r] + s[t][2 * r + 1];
      }
    }
  }

  // V has landed (every thread's copies): O = P V, P taken straight from the S accumulators.
  CpAsyncWait<0>();
  __syncthreads();
  if (has_keys) AccumulateValues<Tile, Traits::kKeysPerWarp>(o, s, sV + key0 * kStride, lane);

  // Merge the four key warps of each row warp. Every warp publishes (O, m, l) value-major
  // ([warp][value][lane]: no bank conflicts) into the position windows, which no warp reads any
  // more (all passed the barrier above after their window MMAs).
  constexpr int kValues = Traits::kMergeValues;
  float* mine = exchange + warp * kValues * 32 + lane;
#pragma unroll
  for (int t = 0; t < kDTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) mine[(t * 4 + e) * 32] = o[t][e];
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mine[(kDTiles * 4 + r) * 32] = row_max[r];
    mine[(kDTiles * 4 + 2 + r) * 32] = row_sum[r];
  }
  __syncthreads();

  // This warp normalises and stores output column tiles key_warp * kDTiles / 4 .. + kDTiles / 4
  // of its row warp's 16 rows: m = max_c m_c, weights 2^(m_c - m) (a key warp that saw no valid
  // key has m_c = -inf and weight 0).
  constexpr int kOwnTiles = kDTiles / Traits::kKeyWarps;
  const int first_tile = key_warp * kOwnTiles;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float maxima[Traits::kKeyWarps];
    float merged = -INFINITY;
#pragma unroll
    for (int c = 0; c < Traits::kKeyWarps; ++c) {
      const float* theirs = exchange + (c * Traits::kRowWarps + row_warp) * kValues * 32 + lane;
      maxima[c] = theirs[(kDTiles * 4 + r) * 32];
      merged = fmaxf(merged, maxima[c]);
    }
    const float reference = SoftmaxReference(merged);
    float sum = 0.0f;
    float out[kOwnTiles][2] = {};
#pragma unroll
    for (int c = 0; c < Traits::kKeyWarps; ++c) {
      const float* theirs = exchange + (c * Traits::kRowWarps + row_warp) * kValues * 32 + lane;
      const float weight = FastExp2(maxima[c] - reference);
      sum += weight * theirs[(kDTiles * 4 + 2 + r) * 32];
#pragma unroll
      for (int t = 0; t < kOwnTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          out[t][e] += weight * theirs[((first_tile + t) * 4 + 2 * r + e) * 32];
        }
      }
    }
    sum = QuadRowSum(sum);
    const int query = m0 + row_warp * 16 + group + 8 * r;
    if (query >= seqlen) continue;
    const float inverse = InverseRowSum(sum);
    Element* out_row =
        params.out + static_cast<int64_t>(seq_start + query) * params.out_row_stride + head * D;
#pragma unroll
    for (int t = 0; t < kOwnTiles; ++t) {
      *reinterpret_cast<uint32_t*>(out_row + (first_tile + t) * 8 + quad * 2) =
          MmaOp::Pack(out[t][0] * inverse, out[t][1] * inverse);
    }
    if (params.lse != nullptr && key_warp == 0 && quad == 0) {
      params.lse[static_cast<int64_t>(head) * params.total_tokens + seq_start + query] =
          RowLogSumExp(merged, sum);
    }
  }
}

}  // namespace dflash::kernels
