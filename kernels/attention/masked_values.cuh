// The padded layout's V operand, with the rows of masked keys zeroed, for the tile kernels.
//
// A masked key's probability is exactly 0, but the MMAs form 0 x V_j, and 0 x NaN (or inf) is
// NaN: padding rows whose V holds NaN would reach every valid output of their sequence (PyTorch's
// masked SDPA does the same). The forward copies V once, through this kernel, into its workspace:
// O(tokens) memory and one pass over V, paid by the padded layout only. Zeroing the rows inside
// the tile kernels instead cost the packed layout (the service's) 1-3% through their registers.
// Shapes: V [tokens, H * d] (row stride v_row_stride elements), mask [tokens] (0: masked key),
// out [tokens, H * d] dense.
#pragma once

#include <cstdint>

namespace dflash::kernels {

// One 16-byte chunk per thread and step: row_elements * sizeof(Element) is a multiple of 16 and
// V's rows start 16-byte aligned (the tile kernels' own requirements).
template <typename Element>
__global__ void MaskedValuesKernel(const Element* __restrict__ v, int64_t v_row_stride,
                                   const uint8_t* __restrict__ mask, int64_t tokens,
                                   int row_elements, Element* __restrict__ out) {
  constexpr int kChunkElements = 16 / static_cast<int>(sizeof(Element));
  const int chunks_per_row = row_elements / kChunkElements;
  const int64_t chunks = tokens * chunks_per_row;
  for (int64_t chunk = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; chunk < chunks;
       chunk += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t token = chunk / chunks_per_row;
    const int column = static_cast<int>(chunk % chunks_per_row) * kChunkElements;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (mask[token] != 0)
      value = *reinterpret_cast<const uint4*>(v + token * v_row_stride + column);
    *reinterpret_cast<uint4*>(out + token * row_elements + column) = value;
  }
}

}  // namespace dflash::kernels
