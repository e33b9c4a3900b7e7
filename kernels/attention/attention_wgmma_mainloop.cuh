// The warpgroup tile kernel's (attention_fwd_kernel.cuh with Traits::kWgmma, sm_90a) mainloop
// pieces: a band tile's computed windows by wgmma. The mma.sync kernels' counterparts are in
// attention_sync_mainloop.cuh.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/attention/attention_computed_windows.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/attention_wgmma_tiles.cuh"
#include "kernels/attention/tma_sm90.h"
#include "kernels/attention/wgmma_sm90.h"

namespace dflash::kernels {

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

}  // namespace dflash::kernels
