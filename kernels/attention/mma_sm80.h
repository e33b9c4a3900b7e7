// Thin wrappers over the sm_80+ warp-level tensor-core instructions the attention kernel uses:
// ldmatrix (shared memory -> fragments), mma.sync m16n8k16 (half types) and m16n8k8 (TF32) with
// float32 accumulators, cp.async.
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = 4 * group + quad:
//   A 16x16: a0 (row group, cols 2q..2q+1), a1 (row group+8), a2 (cols +8), a3 (row +8, cols +8)
//   B 16x8:  b0 (k rows 2q..2q+1, col group), b1 (k rows 2q+8..2q+9)
//   C 16x8:  c0,c1 (row group, cols 2q, 2q+1), c2,c3 (row group+8, cols 2q, 2q+1)
// and m16n8k8 .tf32 (one 32-bit element per register; ldmatrix .b16 on float rows delivers it):
//   A 16x8:  a0 (row group, col q), a1 (row group+8, col q), a2 (col q+4), a3 (row +8, col q+4)
//   B 8x8:   b0 (k row q, col group), b1 (k row q+4, col group);   C as above.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace dflash::kernels {

__device__ __forceinline__ uint32_t SharedAddress(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(row_address)));
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(row_address)));
}

template <typename Element>
struct Mma;

template <>
struct Mma<__half> {
  __device__ __forceinline__ static void Run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static uint32_t Pack(float lo, float hi) {
    const __half2 pair = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
};

template <>
struct Mma<__nv_bfloat16> {
  __device__ __forceinline__ static void Run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static uint32_t Pack(float lo, float hi) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
};

// float32 -> TF32 (10-bit mantissa), rounded to nearest, as a 32-bit MMA operand.
__device__ __forceinline__ uint32_t ToTf32(float x) {
  uint32_t y;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(y) : "f"(x));
  return y;
}

// The 3xTF32 operands of x (the strict float32 tile kernel): x = big + small with big = tf32(x)
// (rounded to nearest, low 13 bits cleared) and small = tf32(x - big). x - big is exact in
// float32, |small| <= 2^-11 |x|, and small's own rounding loses at most 2^-11 |small|: big + small
// carries x to within 2^-22 |x|, near float32's 2^-24 (the lo * lo product a 3xTF32 sum drops is
// as small).
struct Tf32Split {
  uint32_t big;
  uint32_t small;
};
__device__ __forceinline__ Tf32Split SplitTf32(float x) {
  // (The mask keeps the subtraction exact whatever cvt leaves in the low bits, which the tensor
  // cores ignore but the FADD would not.)
  const uint32_t big = ToTf32(x) & 0xffffe000u;
  return {big, ToTf32(x - __uint_as_float(big))};
}

// TF32 operands (float32 inputs, AttentionProblem::allow_tf32): m16n8k8, half the k of the
// 16-bit types. Operands not passed through ToTf32 enter as raw float32 bits, whose low 13
// mantissa bits the tensor cores do not use (in effect truncation; the PTX ISA leaves the
// handling of such bits to the implementation), as CUTLASS's default float-to-TF32 conversion
// does; the measured errors in kernels/attention/HISTORY.md are with this.
template <>
struct Mma<float> {
  __device__ __forceinline__ static void Run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// Stores two adjacent output elements (8-byte aligned for float, 4-byte for the half types).
template <typename Element>
__device__ __forceinline__ void StorePair(Element* destination, float lo, float hi) {
  if constexpr (sizeof(Element) == 4) {
    *reinterpret_cast<float2*>(destination) = make_float2(lo, hi);
  } else {
    *reinterpret_cast<uint32_t*>(destination) = Mma<Element>::Pack(lo, hi);
  }
}

// 16-byte global -> shared copy; `bytes` < 16 zero-fills the rest (0 for out-of-range rows).
__device__ __forceinline__ void CpAsync16(void* shared, const void* global, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SharedAddress(shared)),
               "l"(global), "r"(bytes));
}
// 16-byte global -> shared copy of a chunk known to be in range.
__device__ __forceinline__ void CpAsync16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress(shared)),
               "l"(global));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// 2^x with the hardware approximation (MUFU.EX2, ~2 ulp); exp2(-inf) = +0.
__device__ __forceinline__ float FastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace dflash::kernels
