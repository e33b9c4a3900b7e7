// The 64 x 64 tile kernel's (attention_fwd_kernel.cuh) key-tile classes and band bias
// (kernels/attention/DESIGN.md#saturation-and-tile-classes). A key tile at n0 against the CTA's
// query rows m0 .. m0 + kBlockM - 1 spans deltas m0 - (n0 + kBlockN - 1) .. m0 + kBlockM - 1 - n0:
// saturated when every delta is at or past one threshold (one slot for the tile), else a band
// tile, which stages the window of slots its deltas reach and adds, per score,
// bias[i, j] = C2P_win[i, idx(i - j)] + P2C_win[j, idx(i - j)].
#pragma once

#include <cstdint>

#include "kernels/attention/attention_params.h"
#include "kernels/common/element_conversion.cuh"

namespace dflash::kernels {

// Class of a key tile (from its delta range): a saturated tile reads one slot (slot_hi when
// `high`, else slot_lo); a band tile stages the window of slots window0 .. window0 + kSlotWindow
// - 1 (relative to slot_base), and a linear band tile (every delta in [-linear_band,
// linear_band]) finds slot(delta) = slot_zero + delta without the table. `saturated` comes from
// the thresholds alone: testing the slot itself made the compiler load it from the constant bank
// on every tile and wait for it (ncu, L = 16384: 3% of the stall samples).
struct TileClass {
  int window0;
  int span;  // Computed windows: slots from window0 through the tile's last slot.
  bool saturated;
  bool high;  // Saturated at slot_hi (else slot_lo).
  bool linear;
};

// The class of key tile n0 for the CTA at m0. kSaturatedTiles: the kernel runs saturated tiles
// as such (the mma.sync computed-window kernels run them as band tiles). lut_shared: read the
// slot table from its copy in shared memory (`lut`, entries shifted left by kLutShift), else from
// global memory.
template <typename Traits, bool kComputeWindows, bool kSaturatedTiles, int kLutShift>
__device__ __forceinline__ TileClass
ClassifyTile(const AttentionParams<typename Traits::Element>& params, int m0, int n0,
             bool has_positions, bool lut_shared, const int16_t* lut) {
  const int delta_min = m0 - (n0 + Traits::kBlockN - 1);
  const int delta_max = (m0 + Traits::kBlockM - 1) - n0;
  TileClass tile;
  tile.high = delta_min >= params.hi_threshold;
  tile.saturated = kSaturatedTiles && (tile.high || delta_max <= params.lo_threshold);
  tile.linear = delta_min >= -params.linear_band && delta_max <= params.linear_band;
  tile.window0 = 0;
  tile.span = 0;
  if (has_positions && !tile.saturated) {
    const int first = max(-params.band, min(params.band, delta_min)) + params.band;
    auto slot_of = [&](int entry) {
      return lut_shared ? static_cast<int>(lut[entry]) >> kLutShift : __ldg(params.lut + entry);
    };
    const int first_slot = slot_of(first);
    // Deltas of the tile outside the sequence can fall below the batch's first slot; valid
    // pairs never do, so the window starts at the batch's first slot at the lowest.
    tile.window0 = kComputeWindows ? first_slot : max(0, first_slot - params.slot_base) & ~7;
    if (kComputeWindows) {
      // Log buckets: a tile's 127 deltas reach fewer slots away from the diagonal (v3: 26 of
      // them for deltas 385 .. 511, one on saturated tiles), and only those are computed.
      const int last = max(-params.band, min(params.band, delta_max)) + params.band;
      tile.span = slot_of(last) - first_slot + 1;
    }
  }
  return tile;
}

// A band tile's bias from its staged C2P / P2C windows ([kBlockM, kSlotWindow] each), for the two
// rows of one thread of the m16n8 score layout (key j = n0 + 8 t + 2 quad + e). kBothWindows:
// both windows are added without testing which terms exist (the absent one holds zeros).
template <typename Traits, bool kBothWindows>
struct BandBias {
  using Element = typename Traits::Element;
  static constexpr int kNTiles = Traits::kBlockN / 8;
  // log2(sizeof(Element)): the table path's entries scaled to bytes (2- and 4-byte elements).
  static constexpr int kElementShift = sizeof(Element) == 4 ? 2 : 1;
  static_assert(sizeof(Element) == 2 || sizeof(Element) == 4, "16- or 32-bit elements");

  const Element* c2p;         // C2P_win
  const Element* p2c;         // P2C_win
  const int16_t* lut;         // The slot table in shared memory, at [delta + band].
  const int (&query)[2];      // The thread's rows as query positions in the sequence.
  const int (&row_local)[2];  // ... and in the CTA's block.
  int quad;
  bool has_c2p;
  bool has_p2c;

  // score += C2P_win + P2C_win (each only where that term exists, unless kBothWindows), or with
  // `assign`, score = C2P_win + P2C_win (kBothWindows only).
  __device__ __forceinline__ void Accumulate(float& score, const Element* c2p_value,
                                             const Element* p2c_value, bool assign) const {
    if (assign) {
      score = ToFloat(*c2p_value) + ToFloat(*p2c_value);
      return;
    }
    if (kBothWindows || has_c2p) score += ToFloat(*c2p_value);
    if (kBothWindows || has_p2c) score += ToFloat(*p2c_value);
  }

  // C2P_win + P2C_win per score of a band tile whose slots are linear in the delta (read at
  // compile-time offsets) or looked up in the shared table, whose margins hold the tile's
  // deltas, into acc by Accumulate. kLutShift: the table holds idx * sizeof(Element) (1) or
  // idx (0).
  template <int kLutShift>
  __device__ __forceinline__ void AddWindows(float (&acc)[kNTiles][4],
                                             const AttentionParams<Element>& params,
                                             const TileClass& tile, int n0, bool assign) const {
    if (tile.linear) {
      // Window slot of element (row i, key j) = slot_zero + (i - j) - slot_base - window0: with
      // j = n0 + 8t + 2 quad + e, the row part is per thread and the column part compile-time,
      // so C2P_win[i, .] and P2C_win[j, .] (row stride kSlotWindow) are read at fixed offsets.
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int slot0 =
            params.slot_zero + query[r] - n0 - quad * 2 - params.slot_base - tile.window0;
        const Element* c2p_row = c2p + row_local[r] * kSlotWindow + slot0;
        const Element* p2c_row = p2c + quad * 2 * kSlotWindow + slot0;
#pragma unroll
        for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int column = t * 8 + e;  // Past quad * 2.
            Accumulate(acc[t][2 * r + e], c2p_row - column, p2c_row + column * (kSlotWindow - 1),
                       assign);
          }
        }
      }
    } else {
      // The tile's deltas lie within the shared table's margins (kLutPad): no clamp. Per score, a
      // table load at a compile-time offset from the row's entry, two address adds and the two
      // window loads (ncu, L = 512: the clamped form, AddClamped, took 12.7 instructions per
      // score).
      const int window_base = params.slot_base + tile.window0;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // lut_row[-column] = idx(query - (n0 + 2 quad + column)).
        const int16_t* lut_row = lut + (query[r] - n0 - quad * 2 + params.band);
        const Element* c2p_row = c2p + (row_local[r] * kSlotWindow - window_base);
        const Element* p2c_rows = p2c + (quad * 2 * kSlotWindow - window_base);
#pragma unroll
        for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int column = t * 8 + e;  // Past quad * 2.
            // The entry in bytes: idx * sizeof(Element) (kLutShift 1 stores it so).
            const int offset = lut_row[-column] << (kElementShift - kLutShift);
            const unsigned char* c2p_bytes = reinterpret_cast<const unsigned char*>(c2p_row);
            const unsigned char* p2c_bytes =
                reinterpret_cast<const unsigned char*>(p2c_rows + column * kSlotWindow);
            Accumulate(acc[t][2 * r + e], reinterpret_cast<const Element*>(c2p_bytes + offset),
                       reinterpret_cast<const Element*>(p2c_bytes + offset), assign);
          }
        }
      }
    }
  }

  // s += C2P_win + P2C_win for a tile of any delta, deltas clamped to the band: slot_of(delta +
  // band) = idx(delta), from the table in shared or global memory (one instantiation per
  // location: with the location tested per element, the compiler issued both paths'
  // instructions, the global one predicated off; ncu, L = 16384: 800 instructions per warp and
  // band tile, half of them).
  template <typename SlotOf>
  __device__ __forceinline__ void AddClamped(float (&s)[kNTiles][4],
                                             const AttentionParams<Element>& params,
                                             const TileClass& tile, int n0, SlotOf slot_of) const {
    const int window_base = params.slot_base + tile.window0;
#pragma unroll
    for (int t = 0; t < kNTiles; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        const int column = t * 8 + quad * 2 + (e % 2);
        const int delta = max(-params.band, min(params.band, query[r] - (n0 + column)));
        const int slot = slot_of(delta + params.band) - window_base;
        if (kBothWindows || has_c2p) s[t][e] += ToFloat(c2p[row_local[r] * kSlotWindow + slot]);
        if (kBothWindows || has_p2c) s[t][e] += ToFloat(p2c[column * kSlotWindow + slot]);
      }
    }
  }
};

}  // namespace dflash::kernels
