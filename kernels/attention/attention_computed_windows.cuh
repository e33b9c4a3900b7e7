// The mma.sync kernels' computed C2P / P2C windows (kComputeWindows): window[r, s] = A_r . Pos[s]
// for one warp's 16 rows A (Q rows for C2P, K rows for P2C) against staged PosK / PosQ rows, by
// m16n8k16 MMAs with fp32 accumulation, packed to the input dtype and stored as rows of a shared
// window. Shared by the tile kernel (attention_fwd_kernel.cuh) and the short kernel
// (attention_short_kernel.cuh).
#pragma once

#include <cstdint>

#include "kernels/attention/attention_params.h"
#include "kernels/attention/attention_warp_tiles.cuh"
#include "kernels/attention/mma_sm80.h"
#include "kernels/common/element_conversion.cuh"

namespace dflash::kernels {

// Columns 16 pair .. 16 pair + 15 of one warp's 16 rows of a computed bias window: window[r, s] =
// A_r . Pos[s], with A [16, d] the warp's fragments `a` (k-steps of m16n8k16) or, with
// kAFromShared, 16 padded shared rows at `a_rows` read fragment by fragment (fewer live
// registers), and `pos` the pair's 16 padded shared Pos rows. Returned packed in the input dtype
// in the m16n8 C layout of column tiles t = 2 pair, 2 pair + 1: packed[t][0] = (row group,
// columns 8t + 2 quad, +1), packed[t][1] = row group + 8. fp32 accumulation, rounded once, as
// the table GEMM does.
template <typename Traits, bool kAFromShared, int kTiles>
__device__ __forceinline__ void ComputeWindowPair(uint32_t (&packed)[kTiles][2], int pair,
                                                  const uint32_t (&a)[Traits::kHeadDim / 16][4],
                                                  const typename Traits::Element* a_rows,
                                                  const typename Traits::Element* pos, int lane) {
  using MmaOp = Mma<typename Traits::Element>;
  float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
  for (int kk = 0; kk < Traits::kHeadDim / 16; ++kk) {
    uint32_t a_kk[4];
    if constexpr (kAFromShared) {
      const int row = (lane % 8) + ((lane / 8) % 2) * 8;
      const int column = kk * 16 + (lane / 16) * 8;
      LdMatrixX4(a_kk, a_rows + row * Traits::kRowStride + column);
    } else {
      a_kk[0] = a[kk][0];
      a_kk[1] = a[kk][1];
      a_kk[2] = a[kk][2];
      a_kk[3] = a[kk][3];
    }
    uint32_t b[4];
    const int row = (lane % 8) + (lane / 16) * 8;
    const int column = kk * 16 + ((lane / 8) % 2) * 8;
    LdMatrixX4(b, pos + row * Traits::kRowStride + column);
    MmaOp::Run(acc[0], a_kk, b[0], b[1]);
    MmaOp::Run(acc[1], a_kk, b[2], b[3]);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    packed[2 * pair + h][0] = MmaOp::Pack(acc[h][0], acc[h][1]);
    packed[2 * pair + h][1] = MmaOp::Pack(acc[h][2], acc[h][3]);
  }
}

// One warp's 16 rows of a computed bias window, columns s < 16 * pairs (<= kComputedWindow):
// ComputeWindowPair over the staged [kComputedWindow, d] tile `pos`, packed[t] holding column
// tile t.
template <typename Traits, bool kAFromShared, bool kWhole>
__device__ __forceinline__ void ComputeWindowRowsImpl(uint32_t (&packed)[kComputedWindow / 8][2],
                                                      const uint32_t (&a)[Traits::kHeadDim / 16][4],
                                                      const typename Traits::Element* a_rows,
                                                      const typename Traits::Element* pos,
                                                      int pairs, int lane) {
#pragma unroll
  for (int pair = 0; pair < kComputedWindow / 16; ++pair) {
    if (!kWhole && pair >= pairs) break;  // Uniform across the CTA.
    ComputeWindowPair<Traits, kAFromShared>(packed, pair, a, a_rows,
                                            pos + pair * 16 * Traits::kRowStride, lane);
  }
}

// Whole windows (every tile within 127 deltas of the diagonal at v3) take a fully unrolled
// copy: with the early exit the compiler serialised the 16-slot pairs (L = 128 ran 15% slower).
template <typename Traits, bool kAFromShared>
__device__ __forceinline__ void ComputeWindowRows(uint32_t (&packed)[kComputedWindow / 8][2],
                                                  const uint32_t (&a)[Traits::kHeadDim / 16][4],
                                                  const typename Traits::Element* a_rows,
                                                  const typename Traits::Element* pos, int pairs,
                                                  int lane) {
  if (pairs == kComputedWindow / 16) {
    ComputeWindowRowsImpl<Traits, kAFromShared, true>(packed, a, a_rows, pos, pairs, lane);
  } else {
    ComputeWindowRowsImpl<Traits, kAFromShared, false>(packed, a, a_rows, pos, pairs, lane);
  }
}

// Stores a computed window's first 16 * pairs columns (packed column tiles, ComputeWindowRows)
// as rows row0 .. row0 + 15 of a window with kStride elements per row ([64, kSlotWindow] by
// default), of at most the first kStoredTiles tiles. (A bound the compiler can see: a tile it
// could store unwritten on some path stays live around the whole key loop.)
template <typename Traits, int kStride = kSlotWindow, int kTiles = kComputedWindow / 8,
          int kStoredTiles = kTiles>
__device__ __forceinline__ void StoreWindowRows(typename Traits::Element* window,
                                                const uint32_t (&packed)[kTiles][2], int row0,
                                                int pairs, int lane) {
  static_assert(kStoredTiles <= kTiles, "stored tiles are packed tiles");
  const int group = lane / 4;
  const int quad = lane % 4;
#pragma unroll
  for (int t = 0; t < kStoredTiles; ++t) {
    if (t >= 2 * pairs) break;
    *reinterpret_cast<uint32_t*>(window + (row0 + group) * kStride + t * 8 + quad * 2) =
        packed[t][0];
    *reinterpret_cast<uint32_t*>(window + (row0 + group + 8) * kStride + t * 8 + quad * 2) =
        packed[t][1];
  }
}

}  // namespace dflash::kernels
