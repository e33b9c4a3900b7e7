// Warpgroup-level Q K^T and P V of the 64 x 64 tile kernel (attention_fwd_kernel.cuh with
// Traits::kWgmma): the CTA's 4 warps are one warpgroup and issue one wgmma per k-step for all 64
// rows, B read once from shared memory for the warpgroup (mma.sync reads each K / V fragment
// once per warp: 4x the shared-memory traffic). The results land in the m16n8 C layout the
// mma.sync path uses (wgmma_sm90.h), so the softmax and bias code is shared.
// Shapes: Q, K, V tiles [64, 64] in shared memory, dense, 128-byte swizzled; s [16, 64] and
// o [16, 64] per warp in registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/attention/attention_params.h"
#include "kernels/attention/mma_sm80.h"
#include "kernels/attention/wgmma_sm90.h"

namespace dflash::kernels {

// Q K^T over the k-steps of 16 columns (32 bytes into each swizzled row), issued: s = Q K^T
// (kAccumulate false: s needs no initial value) or s += Q K^T; kN = 64 keys, or 32 (a narrow
// window half: s's first 4 column tiles).
template <typename Traits, bool kAccumulate, int kN = 64>
__device__ __forceinline__ void IssueScores(float (&s)[8][4], TileDescriptor q_descriptor,
                                            TileDescriptor k_descriptor) {
  using Element = typename Traits::Element;
  static_assert(Traits::kHeadDim == 64, "four k-steps");
  WgmmaSharedSharedK4<Element, kAccumulate, kN>(s, q_descriptor, k_descriptor);
}

// s [64, 64] = Q K^T (kAccumulate: s += Q K^T): A = Q [64, d], B = K [64 keys, d] (K-major),
// both by their descriptors (TileDescriptor, wgmma_sm90.h). Waits for the result.
template <typename Traits, bool kAccumulate = false>
__device__ __forceinline__ void WgmmaScores(float (&s)[8][4], TileDescriptor q_descriptor,
                                            TileDescriptor k_descriptor) {
  static_assert(Traits::kHeadDim == 64 && Traits::kBlockN == 64, "one 64 x 64 tile");
  WgmmaFenceOperands(s);
  WgmmaFence();
  IssueScores<Traits, kAccumulate>(s, q_descriptor, k_descriptor);
  WgmmaCommit();
  WgmmaWait<0>();
  WgmmaFenceOperands(s);
}

// Q' [64, d] = Q + 1 pos^T (pos [d] in shared memory), rounded once per element to the input type,
// into a swizzled tile beside Q (the same 128-byte swizzle: chunk c of row r at c ^ (r % 8)): on a
// saturated tile of the computed-window kernel, Q'_i . K_j = Q_i . K_j + p_j with p_j = K_j .
// PosQ[s], so WgmmaScores over Q' gives its scores with their column term in the four k-steps of
// plain attention (against p_j by four more k-steps: -2.5% at L = 2048, -8.5% at 8192). Every
// thread of the CTA stores kBlockM * d / 8 / kThreads chunks; the caller fences (generic to async
// proxy, FenceSharedForAsyncProxy) and meets at a barrier before a wgmma reads Q'.
template <typename Traits>
__device__ __forceinline__ void StoreQueriesWithColumnTerm(typename Traits::Element* q_shifted,
                                                           const typename Traits::Element* q,
                                                           const typename Traits::Element* pos) {
  using Element = typename Traits::Element;
  using Pair = std::conditional_t<std::is_same_v<Element, __half>, __half2, __nv_bfloat162>;
  static_assert(Traits::kHeadDim == 64 && !Traits::kTf32, "one 64 x 64 half-precision tile");
  constexpr int kChunks = Traits::kBlockM * Traits::kChunksPerRow;
  static_assert(kChunks % Traits::kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int chunk = static_cast<int>(threadIdx.x); chunk < kChunks; chunk += Traits::kThreads) {
    const int row = chunk / Traits::kChunksPerRow;
    const int column = ((chunk % Traits::kChunksPerRow) ^ (row % 8)) * Traits::kChunkElements;
    uint4 values = *reinterpret_cast<const uint4*>(q + chunk * Traits::kChunkElements);
    const uint4 shift = *reinterpret_cast<const uint4*>(pos + column);
    Pair* value_pairs = reinterpret_cast<Pair*>(&values);
    const Pair* shift_pairs = reinterpret_cast<const Pair*>(&shift);
#pragma unroll
    for (int e = 0; e < 4; ++e) value_pairs[e] = __hadd2(value_pairs[e], shift_pairs[e]);
    *reinterpret_cast<uint4*>(q_shifted + chunk * Traits::kChunkElements) = values;
  }
}

// o [64, d] += P V: A = P [64, 64 keys] from the exponentiated scores in S's registers (their C
// layout is the A layout, as for mma.sync), rounded to the input type; B = V [64 keys, d] by its
// descriptor (MN-major: d contiguous), k-steps of 16 keys (16 swizzled rows, 2048 bytes). Waits for
// the result. (Leaving it in flight until the next tile's copies have landed made ptxas serialize
// every wgmma of the kernel, C7515: the P fragments' registers are redefined before the wait.)
template <typename Traits>
__device__ __forceinline__ void WgmmaValues(float (&o)[8][4], const float (&p)[8][4],
                                            TileDescriptor v_descriptor) {
  static_assert(Traits::kHeadDim == 64 && Traits::kBlockN == 64, "one 64 x 64 tile");
  using MmaOp = Mma<typename Traits::Element>;
  uint32_t p_fragments[Traits::kBlockN / 16][4];
#pragma unroll
  for (int kk = 0; kk < Traits::kBlockN / 16; ++kk) {
    p_fragments[kk][0] = MmaOp::Pack(p[2 * kk][0], p[2 * kk][1]);
    p_fragments[kk][1] = MmaOp::Pack(p[2 * kk][2], p[2 * kk][3]);
    p_fragments[kk][2] = MmaOp::Pack(p[2 * kk + 1][0], p[2 * kk + 1][1]);
    p_fragments[kk][3] = MmaOp::Pack(p[2 * kk + 1][2], p[2 * kk + 1][3]);
  }
  WgmmaFenceOperands(o);
  WgmmaFence();
  static_assert(Traits::kBlockN / 16 == 4 && 16 * Traits::kRowStride * 2 == 2048,
                "four k-steps of 16 V rows, 2048 bytes apart (WgmmaRegisterSharedK4)");
  WgmmaRegisterSharedK4<typename Traits::Element>(o, p_fragments, v_descriptor);
  WgmmaCommit();
  WgmmaWait<0>();
  WgmmaFenceOperands(o);
}

// Window half h's accumulators [64, 8 kTiles], rounded to the input type, into packed's column
// tiles 8 h .. 8 h + kTiles - 1 (WgmmaWindow's layout).
template <typename Traits, int kTiles = 8>
__device__ __forceinline__ void PackWindowHalf(uint32_t (&packed)[kComputedWindow / 8][2], int h,
                                               const float (&acc)[8][4]) {
  using MmaOp = Mma<typename Traits::Element>;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    packed[8 * h + t][0] = MmaOp::Pack(acc[t][0], acc[t][1]);
    packed[8 * h + t][1] = MmaOp::Pack(acc[t][2], acc[t][3]);
  }
}

// Issues half h of a computed window as one commit group, without waiting: acc [64, kN] = A
// [64, d] . Pos[64 h .. 64 h + kN - 1]^T (A = Q or K, Pos = the staged PosK / PosQ rows
// [kComputedWindow, d], swizzled tiles; kN = 32 for a tile reaching at most 32 slots: m64n32,
// half the MMA work and half of Pos's operand reads). CompleteWindowHalf waits for it.
// Each half needs its own accumulator array: with one array for both halves issued back to back
// (the halves a compile-time count), ptxas (CUDA 13.0) dropped the first half's wgmma and stored
// the second half's results in both halves' columns (HISTORY.md v9.7).
template <typename Traits, int kN = 64>
__device__ __forceinline__ void IssueWindowHalf(float (&acc)[8][4], TileDescriptor a_descriptor,
                                                TileDescriptor pos_descriptor, int h) {
  constexpr uint32_t kHalfBytes = Traits::kBlockN * Traits::kRowStride * 2;
  WgmmaFenceOperands<kN / 8>(acc);
  WgmmaFence();
  IssueScores<Traits, false, kN>(acc, a_descriptor,
                                 AdvanceDescriptor(pos_descriptor, h * kHalfBytes));
  WgmmaCommit();
}

// Waits for every wgmma this thread issued, then packs half h's accumulators [64, kN] into
// packed's column tiles 8 h .. 8 h + kN / 8 - 1.
template <typename Traits, int kN = 64>
__device__ __forceinline__ void CompleteWindowHalf(uint32_t (&packed)[kComputedWindow / 8][2],
                                                   int h, float (&acc)[8][4]) {
  WgmmaWait<0>();
  WgmmaFenceOperands<kN / 8>(acc);
  PackWindowHalf<Traits, kN / 8>(packed, h, acc);
}

// A computed bias window of the computed-window kernel: window [64, 64 h + n] = A [64, d] .
// Pos[64 h + n]^T for halves h = 0 and, with `two_halves`, 1: A = Q (C2P_win) or K (P2C_win) and
// Pos = the staged PosK / PosQ rows [kComputedWindow, d], all swizzled tiles. fp32 accumulation,
// rounded once to the input type (as the table GEMM does), returned packed in the m16n8 C layout
// of column tiles t (ComputeWindowRows' form): packed[t][0] = (row group, columns 8 t + 2 quad,
// +1), packed[t][1] = row group + 8. Tiles of the second half are left unset without it.
// Both halves go out in one commit group (64 accumulator registers live): the three-CTA kernel's
// form. The four-CTA kernel, capped at 128 registers, issues its halves one after the other
// (IssueWindowHalf / CompleteWindowHalf, attention_fwd_kernel.cuh's band_windows).
template <typename Traits>
__device__ __forceinline__ void WgmmaWindow(uint32_t (&packed)[kComputedWindow / 8][2],
                                            TileDescriptor a_descriptor,
                                            TileDescriptor pos_descriptor, bool two_halves) {
  static_assert(kComputedWindow == 2 * Traits::kBlockN, "two 64-slot halves");
  constexpr uint32_t kHalfBytes = Traits::kBlockN * Traits::kRowStride * 2;
  float acc[2][8][4];  // Written by the first k-step of each half (no zeroing).
#pragma unroll
  for (int h = 0; h < 2; ++h) WgmmaFenceOperands(acc[h]);
  WgmmaFence();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (h == 1 && !two_halves) break;  // Uniform across the warpgroup.
    IssueScores<Traits, false>(acc[h], a_descriptor,
                               AdvanceDescriptor(pos_descriptor, h * kHalfBytes));
  }
  WgmmaCommit();
  WgmmaWait<0>();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    WgmmaFenceOperands(acc[h]);
    PackWindowHalf<Traits>(packed, h, acc[h]);
  }
}

}  // namespace dflash::kernels
