// The warpgroup tile kernel's (attention_fwd_kernel.cuh with Traits::kWgmma, sm_90a) mainloop
// pieces: the TMA copies of a key tile's K, V and bias operands; a band tile's computed windows,
// the computed-window kernel's Q K^T and P V, by wgmma. The mma.sync kernels' counterparts are in
// attention_sync_mainloop.cuh.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/attention/attention_computed_windows.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/attention_tile_classes.cuh"
#include "kernels/attention/attention_wgmma_tiles.cuh"
#include "kernels/attention/tma_sm90.h"
#include "kernels/attention/wgmma_sm90.h"

namespace dflash::kernels {

// The warpgroup kernels' TMA copies of a key tile (issued by one thread; the other threads wait
// on the barriers): K and the band tile's bias operands complete on key_barrier, V on
// value_barriers[b] (tile n uses buffer b = n % 2) or, kValuesInC2P, V(n) into the C2P region on
// value_barriers[0] and tile n's PosK rows there on pos_key_barrier.
template <typename Traits>
struct WarpgroupCopies {
  using Element = typename Traits::Element;
  Element* k;
  Element* v;
  Element* c2p;
  Element* p2c;
  const AttentionTensorMaps& maps;
  uint64_t* key_barrier;
  uint64_t* value_barriers;
  uint64_t* pos_key_barrier;
  int head;
  int seq_start;

  // Key tile n0's copies (`copied`: its class, ClassifyTile): K; for a band tile its bias operands
  // (computed windows: PosK / PosQ rows window0 .. window0 + kComputedWindow - 1 of this head,
  // swizzled for the window wgmmas, rows past PosK's end arriving as zeros; tables: the C2P / P2C
  // windows of the CTA's rows at table_base + m0 and the tile's keys); and V into buffer
  // n0 / kN % 2. kValuesInC2P: the PosK rows and V come later (IssuePosKeyRows,
  // IssueValuesIntoC2P). (The class is passed whole: with band and window0 evaluated at the call,
  // the 2- and 3-CTA kernels' uniform registers came out numbered differently.)
  template <bool kComputeWindows, bool kValuesInC2P>
  __device__ __forceinline__ void IssueTile(int n0, const TileClass& copied, bool has_positions,
                                            bool has_c2p, bool has_p2c, int64_t table_base,
                                            int m0) const {
    const bool band = has_positions && !copied.saturated;
    const int window0 = copied.window0;
    constexpr int kN = Traits::kBlockN;
    constexpr int D = Traits::kHeadDim;
    constexpr uint32_t kBiasBytes =
        (kComputeWindows ? Traits::kPositionWindowElements : Traits::kWindowElements) *
        sizeof(Element);
    const bool c2p_rows = band && has_c2p && !kValuesInC2P;
    MbarrierArriveExpectBytes(key_barrier, Traits::kTileElements * sizeof(Element) +
                                               (c2p_rows ? kBiasBytes : 0) +
                                               (band && has_p2c ? kBiasBytes : 0));
    TmaLoad2d(k, &maps.k, head * D, seq_start + n0, key_barrier);
    if (band && kComputeWindows) {
      if (c2p_rows) TmaLoad2d(c2p, &maps.c2p, head * D, window0, key_barrier);
      if (has_p2c) TmaLoad2d(p2c, &maps.p2c, head * D, window0, key_barrier);
    } else if (band) {
      const int row = static_cast<int>(table_base);
      if (has_c2p) TmaLoad2d(c2p, &maps.c2p, window0, row + m0, key_barrier);
      if (has_p2c) TmaLoad2d(p2c, &maps.p2c, window0, row + n0, key_barrier);
    }
    if constexpr (!kValuesInC2P) {
      uint64_t* value_barrier = value_barriers + n0 / kN % 2;
      MbarrierArriveExpectBytes(value_barrier, Traits::kTileElements * sizeof(Element));
      TmaLoad2d(v + n0 / kN % 2 * Traits::kTileElements, &maps.v, head * D, seq_start + n0,
                value_barrier);
    }
  }

  // kValuesInC2P: V(n0) into the C2P region (v), on value_barriers[0].
  __device__ __forceinline__ void IssueValuesIntoC2P(int n0) const {
    constexpr int D = Traits::kHeadDim;
    MbarrierArriveExpectBytes(value_barriers, Traits::kTileElements * sizeof(Element));
    TmaLoad2d(v, &maps.v, head * D, seq_start + n0, value_barriers);
  }

  // kValuesInC2P: a band tile's PosK rows window0 .. window0 + kComputedWindow - 1 into the C2P
  // region, on pos_key_barrier.
  __device__ __forceinline__ void IssuePosKeyRows(int window0) const {
    constexpr int D = Traits::kHeadDim;
    MbarrierArriveExpectBytes(pos_key_barrier, Traits::kPositionWindowElements * sizeof(Element));
    TmaLoad2d(c2p, &maps.c2p, head * D, window0, pos_key_barrier);
  }
};

// The warpgroup tile kernel's schedule of copies and CTA barriers around each key tile, as the
// kernel calls it: Q once (IssueQuery, WaitQuery), then per tile the wait for its K and bias
// operands (BeginTile) and, once every warp has read them, the next tile's copies
// (ReleaseKeyTile). Thread 0 issues; every thread waits on the copies' mbarriers. The mma.sync
// kernels' counterpart is SyncMainloop (attention_sync_mainloop.cuh).
template <typename Traits, bool kComputeWindows, bool kValuesInC2P>
struct WarpgroupMainloop {
  using Element = typename Traits::Element;
  // kValuesInC2P: the C2P region holds tile n's PosK rows, then its C2P window, then V(n). Thread
  // kValuesIssuer issues V(n) after the barrier that follows tile n's bias (value_barriers[0],
  // parity n % 2), and thread 0, after the barrier that follows P V(n), tile n + 1's PosK rows if
  // it is a band tile (pos_key_barrier, parity: the band tiles before it, % 2). V(n) goes out of
  // warp 1 because thread 0 issues tile n + 1's K and PosQ rows at the same barrier: each copy's
  // instructions delay its warp, which every other warp then waits for at the next barrier or
  // wgmma. Same-call A/B on the H200 (HISTORY.md v9.13) at L = 512 / 1024 / 2048: this alone
  // -0.5% / -0.6% / -0.7%; with window0 kept for the PosK rows (the kernel's copied_window0)
  // -1.0% / -1.3% / -0.9%, +0.5% on the MNLI mix.
  static constexpr unsigned kValuesIssuer = 32;

  WarpgroupCopies<Traits> copies;
  Element* q;               // The Q tile.
  uint64_t* query_barrier;  // Where Q completes (once).
  TileDescriptor queries;   // The swizzled Q tile, for Q K^T.
  TileDescriptor keys;      // The swizzled K tile.
  TileDescriptor values;    // The V buffers (kValuesInC2P: the C2P region), for P V.
  int seqlen;

  // Thread 0 initialises the four mbarriers and issues the Q tile of rows m0 ...
  __device__ __forceinline__ void IssueQuery(int m0) const {
    if (threadIdx.x == 0) {
      for (int b = 0; b < 4; ++b) MbarrierInit(copies.key_barrier + b);
      MbarrierArriveExpectBytes(query_barrier, Traits::kQBytes);
      TmaLoad2d(q, &copies.maps.q, copies.head * Traits::kHeadDim, copies.seq_start + m0,
                query_barrier);
    }
  }

  // Q has landed (the first tile's copies were issued before, by the kernel).
  __device__ __forceinline__ void WaitQuery() const { MbarrierWait(query_barrier, 0); }

  // Key tile n_block's K and bias operands have landed (TMA writes are visible to the threads
  // that waited for them); the table kernel also meets the CTA, for the saturated column terms
  // stored after the previous tile's P V.
  template <typename GroupSync>
  __device__ __forceinline__ void BeginTile(int n_block, int /*n0*/, GroupSync group_sync) const {
    MbarrierWait(copies.key_barrier, n_block % 2);
    if constexpr (!kComputeWindows) group_sync();
  }

  // Every warp is done with K and the bias operands of tile n0 (and with the V buffer of the
  // tile before): issue_next(n0 + kBlockN) issues the next tile's copies if has_next;
  // kValuesInC2P: V(n0) goes into the C2P region. windows_stored: the tile's computed windows were
  // stored in place (generic proxy), fenced before TMA overwrites them.
  // (issue_next by reference: a copy of the kernel's closure changed the code ptxas was given,
  // and the SASS, of every mma.sync and warpgroup table kernel.)
  template <typename IssueNext, typename GroupSync>
  __device__ __forceinline__ void ReleaseKeyTile(int n0, bool has_next, bool windows_stored,
                                                 const IssueNext& issue_next,
                                                 GroupSync group_sync) const {
    if (windows_stored) FenceSharedForAsyncProxy();
    group_sync();
    if (has_next) issue_next(n0 + Traits::kBlockN);
    if (kValuesInC2P && threadIdx.x == kValuesIssuer) copies.IssueValuesIntoC2P(n0);
  }

  // S += Q K^T [64, 64] by wgmma (the table kernel: s starts at zero, or at the column terms p_j
  // on saturated tiles; the computed-window kernel's scores: WarpgroupComputedScores).
  __device__ __forceinline__ void Scores(
      float (&s)[Traits::kBlockN / 8][4],
      const uint32_t (&/*q_fragments*/)[Traits::kHeadDim / 16][4], int /*warp*/,
      int /*lane*/) const {
    WgmmaScores<Traits, true>(s, queries, keys);
  }

  // O += P V(n_block) by wgmma once V has landed (WarpgroupValues, below).
  template <typename GroupSync>
  __device__ __forceinline__ void Values(float (&o)[Traits::kHeadDim / 8][4],
                                         const float (&s)[Traits::kBlockN / 8][4], int n_block,
                                         int n0, int /*lane*/, GroupSync group_sync) const;
};

// The shared operands of a band tile's computed windows in the warpgroup kernel.
template <typename Traits>
struct WarpgroupWindowTiles {
  typename Traits::Element* c2p;  // The C2P region: PosK rows, then C2P_win [64, kSlotWindow].
  typename Traits::Element* p2c;  // The P2C region: PosQ rows, then P2C_win.
  TileDescriptor q;               // The swizzled Q tile.
  TileDescriptor k;               // The swizzled K tile.
  TileDescriptor c2p_rows;        // The staged PosK rows (the C2P region).
  TileDescriptor p2c_rows;        // The staged PosQ rows (the P2C region).
  // kValuesInC2P: where tile n's PosK rows complete (they arrive after the previous tile's P V).
  uint64_t* pos_key_barrier;
  int warp;
  int lane;
};

// A band tile's C2P / P2C windows ([64, span] slots, span <= kComputedWindow) by warpgroup MMAs
// over the swizzled Q / K tiles and staged PosK / PosQ rows, in 64-slot halves (the second only
// for tiles reaching more than 64 slots), stored over the rows they came from.
// P2C first: its window rows (keys) are read by every warp, C2P's (queries) only by the warp that
// stores them, so the barrier before the C2P store publishes P2C's and a warp barrier publishes
// C2P's (two CTA barriers for the windows, not three; with the mid-tile barrier, three per band
// tile).
// One copy per window width (the slots computed: 128, or 64, or in the four-CTA kernel 32 where
// the tile reaches no more, m64n32: v3's tiles 6-8 blocks off the diagonal): with the number of
// halves a runtime choice, the second half's packed tiles (16 registers) stayed live around the
// whole key loop, since the stores could read them on a path that had not computed them.
// pos_key_tiles: kValuesInC2P's count of band tiles waited for on pos_key_barrier (its parity).
template <typename Traits, bool kValuesInC2P, bool kSaturatedPossible, typename GroupSync>
__device__ __forceinline__ void ComputeBandWindowsWgmma(const WarpgroupWindowTiles<Traits>& tiles,
                                                        int span, bool has_c2p, bool has_p2c,
                                                        int& pos_key_tiles, GroupSync group_sync) {
  using Element = typename Traits::Element;
  const int pairs = (span + 15) / 16;
  auto band_windows = [&](auto width_constant) {
    constexpr int kWidth = decltype(width_constant)::value;
    constexpr bool kTwoHalves = kWidth > kComputedWindow / 2;
    [[maybe_unused]] constexpr int kFirstHalf = kTwoHalves ? kComputedWindow / 2 : kWidth;
    uint32_t packed[kComputedWindow / 8][2];
    // packed = A . Pos^T over the window's kWidth slots (WgmmaWindow's layout).
    auto compute = [&](TileDescriptor a, TileDescriptor pos) {
      if constexpr (kValuesInC2P) {
        float first_half[8][4];
        IssueWindowHalf<Traits, kFirstHalf>(first_half, a, pos, 0);
        CompleteWindowHalf<Traits, kFirstHalf>(packed, 0, first_half);
        if constexpr (kTwoHalves) {
          float second_half[8][4];
          IssueWindowHalf<Traits>(second_half, a, pos, 1);
          CompleteWindowHalf<Traits>(packed, 1, second_half);
        }
      } else {
        WgmmaWindow<Traits>(packed, a, pos, kTwoHalves);
      }
    };
    auto store = [&](Element* window) {
      StoreWindowRows<Traits, kSlotWindow, kComputedWindow / 8, kWidth / 8>(
          window, packed, tiles.warp * 16, pairs, tiles.lane);
    };
    if constexpr (kValuesInC2P && !kTwoHalves) {
      if (has_p2c && has_c2p) {
        // Both terms (DeBERTa's), one half: C2P's window runs on the tensor cores while the
        // CTA meets and stores the P2C window (it reads Q and the PosK rows, not the P2C
        // region). (Two halves: the P2C window's 32 packed registers beside C2P's
        // accumulators spilled.)
        compute(tiles.k, tiles.p2c_rows);
        MbarrierWait(tiles.pos_key_barrier, pos_key_tiles++ % 2);
        float c2p_half[8][4];
        IssueWindowHalf<Traits, kWidth>(c2p_half, tiles.q, tiles.c2p_rows, 0);
        group_sync();
        store(tiles.p2c);
        CompleteWindowHalf<Traits, kWidth>(packed, 0, c2p_half);
        group_sync();
        store(tiles.c2p);
        __syncwarp();
        return;
      }
    }
    if (has_p2c) {
      compute(tiles.k, tiles.p2c_rows);
      group_sync();
      store(tiles.p2c);
    }
    if (has_c2p) {
      if constexpr (kValuesInC2P) MbarrierWait(tiles.pos_key_barrier, pos_key_tiles++ % 2);
      compute(tiles.q, tiles.c2p_rows);
      group_sync();
      store(tiles.c2p);
      __syncwarp();
    } else {
      group_sync();
    }
  };
  if (span > kComputedWindow / 2) {
    band_windows(std::integral_constant<int, kComputedWindow>{});
  } else if constexpr (!kValuesInC2P) {
    band_windows(std::integral_constant<int, kComputedWindow / 2>{});
  } else if (!kSaturatedPossible || pairs > 2) {
    // (The saturation-free kernel, L <= 576, has few tiles that far from the diagonal: 6
    // of 64 at L = 512, where it timed the same with the narrow copy, HISTORY.md v9.7.)
    band_windows(std::integral_constant<int, 64>{});
  } else {
    band_windows(std::integral_constant<int, 32>{});
  }
}

// O += P V for key tile n_block (at key n0) by wgmma, P from the S accumulators, once V has
// landed: V buffer n_block % 2 (value_barriers[n_block % 2], parity n_block / 2 % 2) at
// `values`, described by `descriptor`; kValuesInC2P: the C2P region (value_barriers[0], parity
// n_block % 2). V rows past the sequence are zeroed first (P is 0 there, but another sequence's
// V may hold inf).
template <typename Traits, bool kValuesInC2P, typename GroupSync>
__device__ __forceinline__ void WarpgroupValues(float (&o)[Traits::kHeadDim / 8][4],
                                                const float (&s)[Traits::kBlockN / 8][4],
                                                typename Traits::Element* values,
                                                uint64_t* value_barriers, int n_block, int n0,
                                                int seqlen, TileDescriptor descriptor,
                                                GroupSync group_sync) {
  using Element = typename Traits::Element;
  constexpr int kN = Traits::kBlockN;
  Element* value_tile = kValuesInC2P ? values : values + n_block % 2 * Traits::kTileElements;
  if constexpr (kValuesInC2P) {
    MbarrierWait(value_barriers, n_block % 2);
  } else {
    MbarrierWait(value_barriers + n_block % 2, n_block / 2 % 2);
  }
  if (n0 + kN > seqlen) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int chunk = (seqlen - n0) * Traits::kChunksPerRow + static_cast<int>(threadIdx.x);
         chunk < kN * Traits::kChunksPerRow; chunk += Traits::kThreads) {
      *reinterpret_cast<uint4*>(value_tile + chunk * Traits::kChunkElements) = zero;
    }
    FenceSharedForAsyncProxy();
    group_sync();
  }
  WgmmaValues<Traits>(o, s,
                      kValuesInC2P
                          ? descriptor
                          : AdvanceDescriptor(descriptor, n_block % 2 * Traits::kTileElements *
                                                              static_cast<int>(sizeof(Element))));
}

// S = Q K^T of key tile n0 in the warpgroup computed-window kernel: a saturated tile with a column
// term multiplies Q' (the first slot_lo tile first stores Q'^lo over the P2C region, which every
// warp read the last band tile's window from before the barrier that preceded this tile's
// copies); a band tile starts the accumulators at its bias (window_bias(s, true): s = C2P_win +
// P2C_win, then s += Q K^T, one add per score fewer than adding the bias to Q K^T; same-call A/B
// on the H200: 1-2% at every length); other tiles run plain Q K^T, whose first k-step overwrites
// s.
template <typename Traits, typename WindowBias, typename GroupSync>
__device__ __forceinline__ void WarpgroupComputedScores(
    float (&s)[Traits::kBlockN / 8][4], const WarpgroupWindowTiles<Traits>& tiles,
    const TileClass& tile, const typename Traits::Element* queries,
    const typename Traits::Element* positions,
    const AttentionParams<typename Traits::Element>& params, int m0, int n0, bool has_positions,
    bool has_p2c, WindowBias window_bias, GroupSync group_sync) {
  constexpr int D = Traits::kHeadDim;
  constexpr int kN = Traits::kBlockN;
  if (has_p2c && tile.saturated) {
    if (!tile.high && (n0 == 0 || m0 + Traits::kBlockM - 1 - (n0 - kN) > params.lo_threshold)) {
      StoreQueriesWithColumnTerm<Traits>(tiles.p2c, queries, positions + 3 * D);
      FenceSharedForAsyncProxy();
      group_sync();
    }
    WgmmaScores<Traits>(s, tiles.p2c_rows, tiles.k);
  } else if (has_positions && !tile.saturated) {
    window_bias(s, true);
    WgmmaScores<Traits, true>(s, tiles.q, tiles.k);
  } else {
    WgmmaScores<Traits>(s, tiles.q, tiles.k);
  }
}

template <typename Traits, bool kComputeWindows, bool kValuesInC2P>
template <typename GroupSync>
__device__ __forceinline__ void WarpgroupMainloop<Traits, kComputeWindows, kValuesInC2P>::Values(
    float (&o)[Traits::kHeadDim / 8][4], const float (&s)[Traits::kBlockN / 8][4], int n_block,
    int n0, int /*lane*/, GroupSync group_sync) const {
  WarpgroupValues<Traits, kValuesInC2P>(o, s, copies.v, copies.value_barriers, n_block, n0, seqlen,
                                        values, group_sync);
}

}  // namespace dflash::kernels
