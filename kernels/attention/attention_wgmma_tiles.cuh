// Warpgroup-level Q K^T and P V of the 64 x 64 tile kernel (attention_fwd_kernel.cuh with
// Traits::kWgmma): the CTA's 4 warps are one warpgroup and issue one wgmma per k-step for all 64
// rows, B read once from shared memory for the warpgroup (mma.sync reads each K / V fragment
// once per warp: 4x the shared-memory traffic). The results land in the m16n8 C layout the
// mma.sync path uses (wgmma_sm90.h), so the softmax and bias code is shared.
// Shapes: Q, K, V tiles [64, 64] in shared memory, dense, 128-byte swizzled; s [16, 64] and
// o [16, 64] per warp in registers.
#pragma once

#include <cstdint>

#include "kernels/attention/mma_sm80.h"
#include "kernels/attention/wgmma_sm90.h"

namespace dflash::kernels {

// s [64, 64] += Q K^T: A = Q [64, d], B = K [64 keys, d] (K-major), k-steps of 16 columns (32
// bytes into each swizzled row). Waits for the result.
template <typename Traits>
__device__ __forceinline__ void WgmmaScores(float (&s)[8][4], const typename Traits::Element* q,
                                            const typename Traits::Element* k) {
  static_assert(Traits::kHeadDim == 64 && Traits::kBlockN == 64, "one 64 x 64 tile");
  const uint64_t q_descriptor = SwizzledTileDescriptor(SharedAddress(q));
  const uint64_t k_descriptor = SwizzledTileDescriptor(SharedAddress(k));
  WgmmaFenceOperands(s);
  WgmmaFence();
#pragma unroll
  for (int kk = 0; kk < Traits::kHeadDim / 16; ++kk) {
    WgmmaSharedShared<typename Traits::Element>(s, AdvanceDescriptor(q_descriptor, kk * 32),
                                                AdvanceDescriptor(k_descriptor, kk * 32));
  }
  WgmmaCommit();
  WgmmaWait<0>();
  WgmmaFenceOperands(s);
}

// o [64, d] += P V: A = P [64, 64 keys] from the exponentiated scores in S's registers (their C
// layout is the A layout, as for mma.sync), rounded to the input type; B = V [64 keys, d]
// (MN-major: d contiguous), k-steps of 16 keys (16 swizzled rows, 2048 bytes). Waits for the
// result. (Leaving it in flight until the next tile's copies have landed made ptxas serialize
// every wgmma of the kernel, C7515: the P fragments' registers are redefined before the wait.)
template <typename Traits>
__device__ __forceinline__ void WgmmaValues(float (&o)[8][4], const float (&p)[8][4],
                                            const typename Traits::Element* v) {
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
  const uint64_t v_descriptor = SwizzledTileDescriptor(SharedAddress(v));
  WgmmaFenceOperands(o);
  WgmmaFence();
#pragma unroll
  for (int kk = 0; kk < Traits::kBlockN / 16; ++kk) {
    WgmmaRegisterShared<typename Traits::Element>(
        o, p_fragments[kk], AdvanceDescriptor(v_descriptor, kk * 16 * Traits::kRowStride * 2));
  }
  WgmmaCommit();
  WgmmaWait<0>();
  WgmmaFenceOperands(o);
}

}  // namespace dflash::kernels
