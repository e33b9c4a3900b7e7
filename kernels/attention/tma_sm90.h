// Thin wrappers over the sm_90 tensor memory accelerator (TMA) copies the warpgroup attention
// kernels use: their Q, K and V tiles (128-byte swizzled, as wgmma reads them), and for band tiles
// the C2P / P2C windows of the table kernel or the PosK / PosQ rows (swizzled too) of the
// computed-window kernel. One thread issues a 2-D tile copy from a tensor [rows, columns]
// (described by a CUtensorMap made on the host) into shared memory, and the CTA waits on a
// shared-memory mbarrier that counts the bytes landed. Elements past the tensor's extent arrive
// as zeros. Against 16-byte cp.async copies by every thread (a K tile is 64 x 8 of them, a table
// window 64 x 17, a PosK window 128 x 8), the copy costs the CTA two instructions. Outside sm_90a
// images the wrappers trap (sm90a_target.h).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/attention/mma_sm80.h"  // SharedAddress
#include "kernels/attention/sm90a_target.h"

namespace dflash::kernels {

// Initialises the mbarrier at `barrier` (8 bytes of shared memory) for one arrival per phase, and
// makes it visible to the async proxy (the initialising thread may issue copies on it at once);
// a CTA barrier must follow before other threads use it.
__device__ __forceinline__ void MbarrierInit(uint64_t* barrier) {
#if DFLASH_SM90A_TARGET
  asm volatile(
      "mbarrier.init.shared::cta.b64 [%0], 1;\n"
      "fence.mbarrier_init.release.cluster;\n" ::"r"(SharedAddress(barrier))
      : "memory");
#else
  (void)barrier;
  __trap();
#endif
}

// The issuing thread's arrival, announcing `bytes` of copies that complete the current phase.
__device__ __forceinline__ void MbarrierArriveExpectBytes(uint64_t* barrier, uint32_t bytes) {
#if DFLASH_SM90A_TARGET
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SharedAddress(barrier)),
      "r"(bytes)
      : "memory");
#else
  (void)barrier;
  (void)bytes;
  __trap();
#endif
}

// Blocks until the phase of parity `phase` has completed (its bytes have landed).
__device__ __forceinline__ void MbarrierWait(uint64_t* barrier, uint32_t phase) {
#if DFLASH_SM90A_TARGET
  const uint32_t address = SharedAddress(barrier);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred complete;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "selp.u32 %0, 1, 0, complete;\n"
        "}\n"
        : "=r"(done)
        : "r"(address), "r"(phase)
        : "memory");
  } while (done == 0);
#else
  (void)barrier;
  (void)phase;
  __trap();
#endif
}

// Copies the box at (column, row) of the 2-D tensor `map` (a __grid_constant__ kernel parameter)
// into `target` (128-byte aligned), completing on `barrier`.
__device__ __forceinline__ void TmaLoad2d(void* target, const CUtensorMap* map, int column, int row,
                                          uint64_t* barrier) {
#if DFLASH_SM90A_TARGET
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(SharedAddress(target)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(SharedAddress(barrier))
      : "memory");
#else
  (void)target;
  (void)map;
  (void)column;
  (void)row;
  (void)barrier;
  __trap();
#endif
}

}  // namespace dflash::kernels
