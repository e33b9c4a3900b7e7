// The mma.sync tile kernel's (attention_fwd_kernel.cuh without Traits::kWgmma) mainloop pieces:
// cp.async copies of padded Q, K, V tiles, PosK / PosQ rows and C2P / P2C table windows into
// shared memory, shared by the threads of a key group; and a band tile's computed windows. The
// warpgroup kernel's counterparts are in attention_wgmma_mainloop.cuh.
#pragma once

#include <cstdint>

#include "kernels/attention/attention_computed_windows.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/attention_warp_tiles.cuh"
#include "kernels/attention/mma_sm80.h"

namespace dflash::kernels {

// This thread's index in its group of kKeyGroups (DisentangledAttentionKernel), read from
// threadIdx.x at each use: a value held for the whole kernel costs the register-capped
// computed-window kernel measurable time (5% at L = 1024).
template <typename Traits, int kKeyGroups>
__device__ __forceinline__ int ThreadInGroup() {
  return static_cast<int>(kKeyGroups == 1 ? threadIdx.x : threadIdx.x % Traits::kThreads);
}

// Copies source rows first_row .. first_row + rows - 1 (row stride `row_stride`) into rows 0 ..
// rows - 1 of a padded shared tile, 16-byte chunks first_chunk, first_chunk + chunk_step, ...;
// rows at or past `valid_rows` are zero. Rolled, each copy splitting its chunk index into row and
// column: the fewest registers, for kernels at their register cap.
template <typename Traits>
__device__ __forceinline__ void CopyRowsByChunks(typename Traits::Element* tile,
                                                 const typename Traits::Element* base,
                                                 int64_t row_stride, int first_row, int rows,
                                                 int valid_rows, int first_chunk, int chunk_step) {
#pragma unroll 1
  for (int chunk = first_chunk; chunk < rows * Traits::kChunksPerRow; chunk += chunk_step) {
    const int row = chunk / Traits::kChunksPerRow;
    const int column = (chunk % Traits::kChunksPerRow) * Traits::kChunkElements;
    const bool valid = first_row + row < valid_rows;
    const typename Traits::Element* source =
        valid ? base + static_cast<int64_t>(first_row + row) * row_stride + column : base;
    CpAsync16(tile + row * Traits::kRowStride + column, source, valid ? 16 : 0);
  }
}

// Copies rows [row0, row0 + 64) of one head into a padded shared tile; rows past `rows` are zero.
// The kThreads threads of one key group share the copies (kWholeCta: every thread of the CTA).
// kRowSteps: each thread copies the same 16-byte column of every kRowStep-th row, unrolled: no
// per-copy division of a chunk index into row and column (with the 64-bit row product, the
// rolled chunk loop was ~30% of the long-L table kernel's issued instructions, ncu). Otherwise
// the rolled chunk loop, for the register-capped computed-window kernel, which spills with the
// unrolled copies live next to a tile's scores. (The warpgroup kernels' tiles arrive by TMA.)
template <typename Traits, int kKeyGroups, bool kWholeCta = false, bool kRowSteps = true>
__device__ __forceinline__ void LoadTile(typename Traits::Element* tile,
                                         const typename Traits::Element* base, int64_t row_stride,
                                         int row0, int rows) {
  static_assert(!Traits::kWgmma, "padded tiles: the mma.sync kernels");
  constexpr int kCopiers = Traits::kThreads * (kWholeCta ? kKeyGroups : 1);
  const int thread =
      kWholeCta ? static_cast<int>(threadIdx.x) : ThreadInGroup<Traits, kKeyGroups>();
  if constexpr (kRowSteps) {
    constexpr int kRowStep = kCopiers / Traits::kChunksPerRow;
    static_assert(kCopiers % Traits::kChunksPerRow == 0 && Traits::kBlockM % kRowStep == 0,
                  "whole rows per pass");
    const int column = thread % Traits::kChunksPerRow * Traits::kChunkElements;
    const int first_row = thread / Traits::kChunksPerRow;
    const int64_t step_offset = static_cast<int64_t>(kRowStep) * row_stride;
    if (row0 + Traits::kBlockM <= rows) {
      // A whole tile (all but a sequence's last): no per-row range test and select (SASS: 7
      // instructions per copy with them, 3 without).
      const typename Traits::Element* source =
          base + static_cast<int64_t>(row0 + first_row) * row_stride + column;
#pragma unroll
      for (int step = 0; step < Traits::kBlockM / kRowStep; ++step) {
        CpAsync16(tile + (first_row + step * kRowStep) * Traits::kRowStride + column, source);
        source += step_offset;
      }
    } else {
      // Bounded by the row itself (a fixed count of steps with a 64-bit offset advanced per step
      // takes the table kernel from 167 to 191 registers at d = 64, ptxas, CUDA 13.0: one
      // resident CTA per SM less).
#pragma unroll
      for (int row = first_row; row < Traits::kBlockM; row += kRowStep) {
        const bool valid = row0 + row < rows;
        const typename Traits::Element* source =
            valid ? base + static_cast<int64_t>(row0 + row) * row_stride + column : base;
        CpAsync16(tile + row * Traits::kRowStride + column, source, valid ? 16 : 0);
      }
    }
  } else {
    static_assert(!Traits::kWgmma, "swizzled tiles are copied by row steps");
    CopyRowsByChunks<Traits>(tile, base, row_stride, row0, Traits::kBlockM, rows, thread, kCopiers);
  }
}

// Copies PosK / PosQ rows (slots) [first_slot, first_slot + rows) of one head (rows <=
// kComputedWindow) into a padded shared tile [kComputedWindow, d]; slots at or past `slots` are
// zero (never read).
template <typename Traits, int kKeyGroups>
__device__ __forceinline__ void LoadPositionWindow(typename Traits::Element* tile,
                                                   const typename Traits::Element* base,
                                                   int64_t row_stride, int first_slot, int rows,
                                                   int slots) {
  // Rolled: it runs while a tile's scores are live, where registers are scarce. (The warpgroup
  // kernel stages these rows by TMA, swizzled.)
  static_assert(!Traits::kWgmma, "padded rows: the mma.sync kernels");
  CopyRowsByChunks<Traits>(tile, base, row_stride, first_slot, rows, slots,
                           ThreadInGroup<Traits, kKeyGroups>(), Traits::kThreads);
}

// Copies slots [window0, window0 + kSlotWindow) of table rows first_row .. first_row + 63 (rows
// past `last_row` repeat it: their values are never used) into a [64, kSlotWindow] window.
template <typename Traits, int kKeyGroups>
__device__ __forceinline__ void LoadWindow(typename Traits::Element* window,
                                           const typename Traits::Element* table, int64_t row0,
                                           int first_row, int last_row, int slot_stride,
                                           int window0) {
  constexpr int kChunks = kSlotWindow / Traits::kChunkElements;
  static_assert(kSlotWindow % Traits::kChunkElements == 0, "whole chunks per window row");
  // Not unrolled: it runs while a tile's scores are live, where registers are scarce.
#pragma unroll 1
  for (int chunk = ThreadInGroup<Traits, kKeyGroups>(); chunk < Traits::kBlockM * kChunks;
       chunk += Traits::kThreads) {
    const int row = chunk / kChunks;
    const int column = (chunk % kChunks) * Traits::kChunkElements;
    const int64_t table_row = row0 + min(first_row + row, last_row);
    CpAsync16(window + row * kSlotWindow + column,
              table + table_row * slot_stride + window0 + column, 16);
  }
}

// A band tile's PosK / PosQ rows (computed windows, mma.sync) for the key group: slots window0 ..
// window0 + span - 1 rounded up to whole 16-slot MMA column pairs, of this head, into the C2P /
// P2C regions (those of the terms the problem has).
template <typename Traits, int kKeyGroups>
__device__ __forceinline__ void LoadPositionRows(
    typename Traits::Element* c2p, typename Traits::Element* p2c,
    const AttentionParams<typename Traits::Element>& params, int head, int window0, int span,
    bool has_c2p, bool has_p2c) {
  constexpr int D = Traits::kHeadDim;
  const int64_t head_column = static_cast<int64_t>(head) * D;
  const int rows = (span + 15) / 16 * 16;  // Whole 16-slot MMA column pairs.
  if (has_c2p) {
    LoadPositionWindow<Traits, kKeyGroups>(c2p, params.pos_key + head_column, params.pos_row_stride,
                                           window0, rows, params.pos_rows);
  }
  if (has_p2c) {
    LoadPositionWindow<Traits, kKeyGroups>(p2c, params.pos_query + head_column,
                                           params.pos_row_stride, window0, rows, params.pos_rows);
  }
}

// A band tile's C2P / P2C table windows (tables, mma.sync) for the key group: slots window0 ..
// window0 + kSlotWindow - 1 of the CTA's query rows m0 .. and of the tile's keys n0 .. (table
// rows at table_base + row; rows past the sequence repeat its last).
template <typename Traits, int kKeyGroups>
__device__ __forceinline__ void LoadTableWindows(
    typename Traits::Element* c2p, typename Traits::Element* p2c,
    const AttentionParams<typename Traits::Element>& params, int64_t table_base, int m0, int n0,
    int seqlen, int window0) {
  if (params.c2p != nullptr) {
    LoadWindow<Traits, kKeyGroups>(c2p, params.c2p, table_base, m0, seqlen - 1, params.slot_stride,
                                   window0);
  }
  if (params.p2c != nullptr) {
    LoadWindow<Traits, kKeyGroups>(p2c, params.p2c, table_base, n0, seqlen - 1, params.slot_stride,
                                   window0);
  }
}

// A band tile's computed windows (kComputeWindows, mma.sync): the bias regions `c2p` / `p2c` hold
// PosK / PosQ rows w0 .. w0 + 16 pairs - 1; they are replaced by the C2P / P2C windows of this
// warp's 16 query rows (from `q_fragments` and `queries`) and 16 keys (`keys`). Each warp reads
// whole PosK / PosQ rows, so a key-group barrier (group_sync) separates the reads from the
// in-place stores; the caller publishes the stores.
template <typename Traits, typename GroupSync>
__device__ __forceinline__ void ComputeTileWindows(
    const uint32_t (&q_fragments)[Traits::kHeadDim / 16][4],
    const typename Traits::Element* queries, const typename Traits::Element* keys,
    typename Traits::Element* c2p, typename Traits::Element* p2c, int span, bool has_c2p,
    bool has_p2c, int warp, int lane, GroupSync group_sync) {
  uint32_t packed[kComputedWindow / 8][2];
  const int pairs = (span + 15) / 16;
  if (has_c2p) {
    ComputeWindowRows<Traits, true>(packed, q_fragments, queries + warp * 16 * Traits::kRowStride,
                                    c2p, pairs, lane);
    group_sync();
    StoreWindowRows<Traits>(c2p, packed, warp * 16, pairs, lane);
  }
  if (has_p2c) {
    ComputeWindowRows<Traits, true>(packed, q_fragments, keys + warp * 16 * Traits::kRowStride, p2c,
                                    pairs, lane);
    group_sync();
    StoreWindowRows<Traits>(p2c, packed, warp * 16, pairs, lane);
  }
}

// The mma.sync tile kernel's schedule of cp.async copies and key-group barriers around each key
// tile, as the kernel calls it (FlashAttention-2's order, two barriers per tile): Q once
// (IssueQuery, WaitQuery), then per tile V(n) once K and the bias operands of tile n have landed
// (BeginTile) and the next tile's K and bias operands once every warp has read them
// (ReleaseKeyTile). The warpgroup kernels' counterpart is WarpgroupMainloop
// (attention_wgmma_mainloop.cuh).
template <typename Traits, int kKeyGroups, bool kComputeWindows>
struct SyncMainloop {
  using Element = typename Traits::Element;
  Element* q;             // The Q tile.
  Element* k;             // The K tile.
  Element* v;             // The V tile.
  const Element* q_base;  // This head's Q rows of the sequence.
  const Element* v_base;  // ... and its V rows.
  const AttentionParams<Element>& params;
  int seqlen;

  // The whole CTA copies the Q tile of rows m0 ... as one copy group.
  __device__ __forceinline__ void IssueQuery(int m0) const {
    LoadTile<Traits, kKeyGroups, true>(q, q_base, params.q_row_stride, m0, seqlen);
    CpAsyncCommit();
  }

  // Commits the group's first tile's copies (issued since IssueQuery; a group without tiles
  // commits an empty group: the counts stay the same) and waits for Q, CTA-wide.
  __device__ __forceinline__ void WaitQuery() const {
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();
  }

  // K and the bias operands of tile n0 have landed and every thread's copies are visible; every
  // warp is done with the V tile (P V of the group's previous tile): start V(n0).
  template <typename GroupSync>
  __device__ __forceinline__ void BeginTile(int /*n_block*/, int n0, GroupSync group_sync) const {
    CpAsyncWait<0>();
    group_sync();
    LoadTile<Traits, kKeyGroups, false, !kComputeWindows>(v, v_base, params.v_row_stride, n0,
                                                          seqlen);
    CpAsyncCommit();
  }

  // V(n0) has landed and every warp is done with K and the bias operands of tile n0:
  // issue_next(n0 + kKeyGroups * kBlockN) copies the group's next tile's if has_next.
  // (windows_stored: the warpgroup kernels' fence; cp.async needs none.)
  // (issue_next by reference: a copy of the kernel's closure changed the code ptxas was given,
  // and the SASS, of every mma.sync and warpgroup table kernel.)
  template <typename IssueNext, typename GroupSync>
  __device__ __forceinline__ void ReleaseKeyTile(int n0, bool has_next, bool /*windows_stored*/,
                                                 const IssueNext& issue_next,
                                                 GroupSync group_sync) const {
    CpAsyncWait<0>();
    group_sync();
    if (has_next) {
      issue_next(n0 + kKeyGroups * Traits::kBlockN);
      CpAsyncCommit();
    }
  }

  // S += Q K^T for this warp's 16 rows (q_fragments: their Q; the float32 tiles read Q from
  // shared memory).
  __device__ __forceinline__ void Scores(float (&s)[Traits::kBlockN / 8][4],
                                         const uint32_t (&q_fragments)[Traits::kHeadDim / 16][4],
                                         int warp, int lane) const {
    if constexpr (Traits::kTf32) {
      AccumulateScoresTf32<Traits, Traits::kBlockN>(s, q + warp * 16 * Traits::kRowStride, k, lane);
    } else {
      AccumulateScores<Traits, Traits::kBlockN>(s, q_fragments, k, lane);
    }
  }

  // O += P V for this warp's 16 rows, P from the S accumulators (V landed before ReleaseKeyTile's
  // barrier).
  template <typename GroupSync>
  __device__ __forceinline__ void Values(float (&o)[Traits::kHeadDim / 8][4],
                                         const float (&s)[Traits::kBlockN / 8][4], int /*n_block*/,
                                         int /*n0*/, int lane, GroupSync /*group_sync*/) const {
    if constexpr (Traits::kTf32) {
      AccumulateValuesTf32<Traits, Traits::kBlockN>(o, s, v, lane);
    } else {
      AccumulateValues<Traits, Traits::kBlockN>(o, s, v, lane);
    }
  }
};

}  // namespace dflash::kernels
