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
// A TileDescriptor is the descriptor's low word (start address and leading byte offset). The high
// word is the same for every such tile, kSwizzledDescriptorHigh, and the wrappers below join the
// two inside their asm: the compiler holds one 32-bit value per tile and adds 32-bit offsets to
// it, where it carried 64-bit descriptors through adds with carry (SASS of the four-CTA kernel
// with saturated tiles: 537 uniform-datapath instructions, 15 to 37 around each four-wgmma group
// of Q K^T or a window half; 408 now, 17 to 29 per group; HISTORY.md v9.9).
using TileDescriptor = uint32_t;
inline constexpr uint32_t kSwizzledGroupStride = 1024 >> 4;
inline constexpr uint32_t kSwizzledDescriptorHigh = kSwizzledGroupStride | (1u << 30);
__device__ __forceinline__ TileDescriptor SwizzledTileDescriptor(uint32_t shared_address) {
  return ((shared_address & 0x3FFFF) >> 4) | (kSwizzledGroupStride << 16);
}

// The descriptor of the same tile `bytes` (a multiple of 16) further on: the start address field
// advanced in place. Shared addresses stay below 2^18, so the field (address >> 4, 14 bits) does
// not carry into the next one.
__device__ __forceinline__ TileDescriptor AdvanceDescriptor(TileDescriptor descriptor,
                                                            uint32_t bytes) {
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

// The first 16 of them: an m64n32 wgmma's (d's first 4 column tiles), for the computed windows'
// narrow halves (a band tile reaching at most 32 slots). (m64n48, for tiles of 33-48 slots, made
// ptxas serialise the four-CTA kernel's wgmma: C7511.)
#define DFLASH_WGMMA_D16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define DFLASH_WGMMA_D16_OPERANDS(d)                                                            \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])

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

// The four k-steps of a product over d = 64 in one asm statement, each k-step's descriptors the
// low words plus a 32-bit offset, joined to the constant high word:
//   SS: d [64, N] (+)= A [64, 64] B [N, 64]^T, A and B K-major (each k-step 32 bytes further into
//       the rows: +2 in the start address fields); N = 64, or 32 (m64n32: d's first 4 column tiles,
//       16 registers). The first k-step overwrites d unless kAccumulate (scale-d = 0: the
//       accumulators need no zeroing, 32 moves per thread and tile).
//   RS: d [64, 64] += A [64, 64] B [64, 64], A from registers (a[k-step]: the warp's 16 rows, the
//       m16n8k16 A layout, mma_sm80.h), B MN-major (P V: each k-step 16 rows, 2048 bytes, further:
//       +128 in the start address field, a 64-bit add in place, which ptxas keeps as one add).
// The SS form's PTX: a, b, accumulate, high are the operands' "%N" names.
#define DFLASH_WGMMA_SS_STEP(shape, type, D, a, b, high, offset)                           \
  "add.u32 la, " a ", " offset ";\nadd.u32 lb, " b ", " offset ";\nmov.b64 da, {la, " high \
  "};\nmov.b64 db, {lb, " high                                                             \
  "};\n"                                                                                   \
  "wgmma.mma_async.sync.aligned." shape ".f32." type "." type " " D ", da, db, q, 1, 1, 0, 0;\n"
#define DFLASH_WGMMA_SS_K4(shape, type, D, a, b, accumulate, high)                        \
  "{\n.reg .pred p, q;\n.reg .b32 la, lb;\n.reg .b64 da, db;\nsetp.ne.b32 p, " accumulate \
  ", 0;\nsetp.eq.b32 q, 0, 0;\n"                                                          \
  "mov.b64 da, {" a ", " high "};\nmov.b64 db, {" b ", " high                             \
  "};\n"                                                                                  \
  "wgmma.mma_async.sync.aligned." shape ".f32." type "." type " " D                       \
  ", da, db, p, 1, 1, 0, 0;\n" DFLASH_WGMMA_SS_STEP(shape, type, D, a, b, high, "2")      \
      DFLASH_WGMMA_SS_STEP(shape, type, D, a, b, high, "4")                               \
          DFLASH_WGMMA_SS_STEP(shape, type, D, a, b, high, "6") "}\n"
#define DFLASH_WGMMA_SHARED_SHARED_K4(type)                                                        \
  asm volatile(DFLASH_WGMMA_SS_K4("m64n64k16", type, DFLASH_WGMMA_D32, "%32", "%33", "%34", "%35") \
               : DFLASH_WGMMA_D32_OPERANDS(d)                                                      \
               : "r"(a_descriptor), "r"(b_descriptor), "n"(kAccumulate ? 1 : 0),                   \
                 "n"(kSwizzledDescriptorHigh))
#define DFLASH_WGMMA_SHARED_SHARED_K4_N32(type)                                                    \
  asm volatile(DFLASH_WGMMA_SS_K4("m64n32k16", type, DFLASH_WGMMA_D16, "%16", "%17", "%18", "%19") \
               : DFLASH_WGMMA_D16_OPERANDS(d)                                                      \
               : "r"(a_descriptor), "r"(b_descriptor), "n"(kAccumulate ? 1 : 0),                   \
                 "n"(kSwizzledDescriptorHigh))
// The RS form's k-step: a0..a3 the A fragment's "%N" names.
#define DFLASH_WGMMA_RS_STEP(type, a0, a1, a2, a3)                                          \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " " DFLASH_WGMMA_D32 ", {" a0 \
  ", " a1 ", " a2 ", " a3 "}, db, q, 1, 1, 1;\n"
#define DFLASH_WGMMA_REGISTER_SHARED_K4(type) \
  asm volatile(                                                                             \
      "{\n.reg .pred q;\n.reg .b64 db;\nsetp.eq.b32 q, 0, 0;\n"                             \
      "mov.b64 db, {%48, %49};\n" DFLASH_WGMMA_RS_STEP(type, "%32", "%33", "%34", "%35")    \
      "add.s64 db, db, 128;\n" DFLASH_WGMMA_RS_STEP(type, "%36", "%37", "%38", "%39")       \
      "add.s64 db, db, 128;\n" DFLASH_WGMMA_RS_STEP(type, "%40", "%41", "%42", "%43")       \
      "add.s64 db, db, 128;\n" DFLASH_WGMMA_RS_STEP(type, "%44", "%45", "%46", "%47") "}\n" \
      : DFLASH_WGMMA_D32_OPERANDS(d)                                                        \
      : "r"(a[0][0]), "r"(a[0][1]), "r"(a[0][2]), "r"(a[0][3]), "r"(a[1][0]), "r"(a[1][1]), \
        "r"(a[1][2]), "r"(a[1][3]), "r"(a[2][0]), "r"(a[2][1]), "r"(a[2][2]), "r"(a[2][3]), \
        "r"(a[3][0]), "r"(a[3][1]), "r"(a[3][2]), "r"(a[3][3]), "r"(b_descriptor),          \
        "n"(kSwizzledDescriptorHigh))

// d [64, kN] (+)= A [64, 64] B [kN, 64]^T over the four k-steps of d = 64 (without kAccumulate:
// d = A B^T), A and B from shared memory, both K-major; kN = 64, or 32 (d's first 4 column
// tiles).
template <typename Element, bool kAccumulate, int kN = 64>
__device__ __forceinline__ void WgmmaSharedSharedK4(float (&d)[8][4], TileDescriptor a_descriptor,
                                                    TileDescriptor b_descriptor) {
  static_assert(kN == 32 || kN == 64, "m64n32 or m64n64");
#if DFLASH_SM90A_TARGET
  if constexpr (kN == 64 && WgmmaType<Element>::kBf16) {
    DFLASH_WGMMA_SHARED_SHARED_K4("bf16");
  } else if constexpr (kN == 64) {
    DFLASH_WGMMA_SHARED_SHARED_K4("f16");
  } else if constexpr (WgmmaType<Element>::kBf16) {
    DFLASH_WGMMA_SHARED_SHARED_K4_N32("bf16");
  } else {
    DFLASH_WGMMA_SHARED_SHARED_K4_N32("f16");
  }
#else
  (void)d;
  (void)a_descriptor;
  (void)b_descriptor;
  __trap();
#endif
}

// d [64, 64] += A [64, 64] B [64, 64] over four k-steps of 16: A from registers (a[k-step], the
// warp's 16 rows, m16n8k16 A layout), B from shared memory MN-major (rows of B contiguous: P V).
template <typename Element>
__device__ __forceinline__ void WgmmaRegisterSharedK4(float (&d)[8][4], const uint32_t (&a)[4][4],
                                                      TileDescriptor b_descriptor) {
#if DFLASH_SM90A_TARGET
  if constexpr (WgmmaType<Element>::kBf16) {
    DFLASH_WGMMA_REGISTER_SHARED_K4("bf16");
  } else {
    DFLASH_WGMMA_REGISTER_SHARED_K4("f16");
  }
#else
  (void)d;
  (void)a;
  (void)b_descriptor;
  __trap();
#endif
}

#undef DFLASH_WGMMA_SHARED_SHARED_K4
#undef DFLASH_WGMMA_SS_K4
#undef DFLASH_WGMMA_SS_STEP
#undef DFLASH_WGMMA_SHARED_SHARED_K4_N32
#undef DFLASH_WGMMA_REGISTER_SHARED_K4
#undef DFLASH_WGMMA_RS_STEP
#undef DFLASH_WGMMA_D16
#undef DFLASH_WGMMA_D16_OPERANDS
#undef DFLASH_WGMMA_D32
#undef DFLASH_WGMMA_D32_OPERANDS

}  // namespace dflash::kernels
