// Thin wrappers over the sm_90a warpgroup tensor-core instructions (wgmma.mma_async) the
// attention kernel uses for its 64 x 64 tiles. One warpgroup (4 warps, 128 threads) computes a
// [64, 64] f32 tile D += A B per k-step of 16:
//   A [64, 16]: from shared memory (descriptor) or, for P V, from registers in the mma.sync
//     m16n8k16 A layout of each warp's 16 rows (mma_sm80.h);
//   B [16, 64]: from shared memory (descriptor), K-major (Q K^T: K rows, d contiguous) or
//     MN-major (P V: V rows, d contiguous; the "transposed" operand);
//   D: warp w owns rows 16 w .. 16 w + 15, register 4 t + e holding the m16n8 C element e of
//     8-column tile t: the layout of the mma.sync kernels' S and O fragments, so their softmax
//     and bias code applies unchanged.
// Tiles are [64 rows, 64 elements] of 16-bit type, 128 bytes per row, 1024-byte aligned, with
// the 128-byte swizzle: the 16-byte chunk c of row r is stored at chunk c ^ (r % 8) (PTX ISA,
// "Shared Memory Matrix Layout"; TMA's CU_TENSOR_MAP_SWIZZLE_128B writes it).
//
// On other targets (sm_80 / sm_89 images, sm_90 without the "a" features, the PTX for later GPUs)
// the wrappers trap (sm90a_target.h): the launch code runs the warpgroup kernel only where the
// sm_90a image exists (AttentionWgmmaRuns()).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/attention/sm90a_target.h"

namespace dflash::kernels {

// Matrix descriptor of a swizzled [rows, 64] 16-bit tile (128-byte swizzle, layout type 1):
// start address >> 4 (bits 0-13), leading byte offset >> 4 (16-29), stride byte offset >> 4
// (32-45), layout (62-63). The 8-row core groups are 1024 bytes apart; the two offsets are both
// that stride (only one of them is read for the k16 slices used here, whichever the operand's
// major-ness selects), so one form serves K-major and MN-major operands.
__device__ __forceinline__ uint64_t SwizzledTileDescriptor(uint32_t shared_address) {
  constexpr uint64_t kGroupStride = 1024 >> 4;
  return static_cast<uint64_t>((shared_address & 0x3FFFF) >> 4) | (kGroupStride << 16) |
         (kGroupStride << 32) | (uint64_t{1} << 62);
}

// The descriptor of the same tile `bytes` (a multiple of 16) further on: the start address field
// advanced in place. Shared addresses stay below 2^18, so the field (address >> 4, 14 bits) does
// not carry into the next one. One add per wgmma instead of rebuilding the descriptor from the
// address (SASS: 8 uniform-datapath instructions per wgmma, 15% of the tile loop's instructions).
__device__ __forceinline__ uint64_t AdvanceDescriptor(uint64_t descriptor, uint32_t bytes) {
  return descriptor + (bytes >> 4);
}

// Orders this thread's earlier register and shared-memory accesses before later wgmma.
__device__ __forceinline__ void WgmmaFence() {
#if DFLASH_SM90A_TARGET
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void WgmmaCommit() {
#if DFLASH_SM90A_TARGET
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
#if DFLASH_SM90A_TARGET
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
// Makes this thread's generic-proxy shared-memory writes (cp.async, st.shared) visible to the
// async proxy that wgmma reads shared memory through; a barrier then publishes them.
__device__ __forceinline__ void FenceSharedForAsyncProxy() {
#if DFLASH_SM90A_TARGET
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Pins the accumulators' registers at this point of the program: the compiler sees wgmma's
// outputs as written when the instruction is issued, so without this it may move their readers
// above the wait that completes them (or their writers below the issue). kTiles < 8: only the
// first kTiles column tiles (a narrow wgmma's, m64n32: 4).
template <int kTiles = 8>
__device__ __forceinline__ void WgmmaFenceOperands(float (&d)[8][4]) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[t][e])::"memory");
  }
}

#define DFLASH_WGMMA_D32                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define DFLASH_WGMMA_D32_OPERANDS(d)                                                            \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), \
      "+f"(d[7][2]), "+f"(d[7][3])

// True for bf16 inputs, false for fp16: which instruction suffix the wrappers emit.
template <typename Element>
struct WgmmaType;
template <>
struct WgmmaType<__half> {
  static constexpr bool kBf16 = false;
};
template <>
struct WgmmaType<__nv_bfloat16> {
  static constexpr bool kBf16 = true;
};

// One m64n64k16 wgmma with input type `type` ("bf16" or "f16"): A and B from descriptors (both
// K-major), or A from registers and B MN-major. Accumulating (scale-d = 1), or, for the first
// k-step of a product that starts from zero, overwriting (scale-d = 0: the accumulators need no
// zeroing, 32 moves per thread and tile).
#define DFLASH_WGMMA_SHARED_SHARED(type)                                               \
  asm volatile(                                                                        \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                     \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " " DFLASH_WGMMA_D32 \
      ", %32, %33, p, 1, 1, 0, 0;\n}\n"                                                \
      : DFLASH_WGMMA_D32_OPERANDS(d)                                                   \
      : "l"(a_descriptor), "l"(b_descriptor), "n"(kAccumulate ? 1 : 0))
#define DFLASH_WGMMA_REGISTER_SHARED(type)                                             \
  asm volatile(                                                                        \
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                       \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " " DFLASH_WGMMA_D32 \
      ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                  \
      : DFLASH_WGMMA_D32_OPERANDS(d)                                                   \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_descriptor))

// The computed windows' narrow halves (a band tile reaching at most 32 slots): one m64n32k16
// wgmma, A and B from descriptors (both K-major), into d's first 4 column tiles (16 registers;
// the rest of d is neither read nor written). (m64n48, for tiles of 33-48 slots, made ptxas
// serialise the four-CTA kernel's wgmma: C7511.)
#define DFLASH_WGMMA_D16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define DFLASH_WGMMA_D16_OPERANDS(d)                                                            \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
#define DFLASH_WGMMA_SHARED_SHARED_N32(type)                                           \
  asm volatile(                                                                        \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                     \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." type "." type " " DFLASH_WGMMA_D16 \
      ", %16, %17, p, 1, 1, 0, 0;\n}\n"                                                \
      : DFLASH_WGMMA_D16_OPERANDS(d)                                                   \
      : "l"(a_descriptor), "l"(b_descriptor), "n"(kAccumulate ? 1 : 0))

// d [64, kN] += A [64, 16] B [16, kN] (without kAccumulate: d = A B), A and B from shared memory,
// both K-major; kN = 64, or 32 (d's first 4 column tiles).
template <typename Element, bool kAccumulate = true, int kN = 64>
__device__ __forceinline__ void WgmmaSharedShared(float (&d)[8][4], uint64_t a_descriptor,
                                                  uint64_t b_descriptor) {
  static_assert(kN == 32 || kN == 64, "m64n32 or m64n64");
#if DFLASH_SM90A_TARGET
  if constexpr (kN == 64 && WgmmaType<Element>::kBf16) {
    DFLASH_WGMMA_SHARED_SHARED("bf16");
  } else if constexpr (kN == 64) {
    DFLASH_WGMMA_SHARED_SHARED("f16");
  } else if constexpr (WgmmaType<Element>::kBf16) {
    DFLASH_WGMMA_SHARED_SHARED_N32("bf16");
  } else {
    DFLASH_WGMMA_SHARED_SHARED_N32("f16");
  }
#else
  (void)d;
  (void)a_descriptor;
  (void)b_descriptor;
  __trap();
#endif
}

// d [64, 64] += A [64, 16] B [16, 64], A from registers (the warp's 16 rows, m16n8k16 A
// layout), B from shared memory MN-major (rows of B contiguous: P V).
template <typename Element>
__device__ __forceinline__ void WgmmaRegisterShared(float (&d)[8][4], const uint32_t (&a)[4],
                                                    uint64_t b_descriptor) {
#if DFLASH_SM90A_TARGET
  if constexpr (WgmmaType<Element>::kBf16) {
    DFLASH_WGMMA_REGISTER_SHARED("bf16");
  } else {
    DFLASH_WGMMA_REGISTER_SHARED("f16");
  }
#else
  (void)d;
  (void)a;
  (void)b_descriptor;
  __trap();
#endif
}

#undef DFLASH_WGMMA_SHARED_SHARED_N32
#undef DFLASH_WGMMA_D16
#undef DFLASH_WGMMA_D16_OPERANDS
#undef DFLASH_WGMMA_SHARED_SHARED
#undef DFLASH_WGMMA_REGISTER_SHARED
#undef DFLASH_WGMMA_D32
#undef DFLASH_WGMMA_D32_OPERANDS

}  // namespace dflash::kernels
