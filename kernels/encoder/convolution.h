// The DeBERTa-v2 ConvLayer's 1-D convolution (docs/deberta.md#convlayer) as im2col + GEMM, over
// packed sequences, each padded with zeros on its own (no leakage across sequence boundaries).
//
// The HF layer: c[t, o] = b[o] + sum_{ch, q} W[o, ch, q] * E0[t + q - pad, g(o) * Cg + ch] with
// W = conv.weight [H, Cg, kernel_size], Cg = H / groups, g(o) = o / Cg, pad = (kernel_size - 1)
// / 2. ConvolutionColumns builds cols[t, g, q, c]; the engine then runs, for each group g, one GEMM
//   c[:, g*Cg : (g+1)*Cg] = cols[:, g, :, :] ([tokens, kernel_size * Cg], row stride
//                           kernel_size * width) x Wg^T
// CONTRACT (weight layout): the taps are reordered once per model as [groups][Cg_out][kernel_size]
// [Cg], i.e. Wg[o][q][c] = W[g * Cg + o, c, q]: group g's [Cg_out, kernel_size * Cg] block is
// row-major with K = kernel_size * Cg ordered (q, c), matching the columns. Bias and activation
// then go through BiasActivation, and the residual LayerNorm through AddLayerNorm.
//
// This header needs only the CUDA runtime API: kernels/ builds with the CUDA toolkit alone.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/data_type.h"

namespace dflash::kernels {

// Im2col for a 1-D convolution of width kernel_size (odd), padding (kernel_size - 1) / 2, over
// each packed sequence separately:
//   cols[t, g, q, c] = x[t + q - pad, g * Cg + c] if row t + q - pad lies in t's own sequence,
//                      else 0;
// Cg = width / groups; cols is [tokens, groups, kernel_size, Cg] = [tokens, kernel_size * width]
// contiguous, `dtype`. x rows (`dtype`, [tokens, width]) have stride ld (elements, >= width).
// cu_seqlens: device int32 [num_sequences + 1] with cu_seqlens[0] == 0 and
// cu_seqlens[num_sequences] == tokens (a token's sequence is found by binary search).
// 16-byte accesses when Cg and ld are multiples of 8 (16-bit) / 4 (float32) elements and x and cols
// are 16-byte aligned.
//
// Runs on `stream`, allocates nothing; tokens == 0 is a no-op. Returns cudaErrorInvalidValue for a
// bad dtype, width < 1, groups < 1 or not dividing width, an even or non-positive kernel_size,
// tokens < 0, num_sequences < 1 (with tokens > 0), ld < width or a null pointer, else the
// launch's error.
cudaError_t ConvolutionColumns(DataType dtype, const void* x, int64_t ld, int64_t tokens, int width,
                               int groups, int kernel_size, const int32_t* cu_seqlens,
                               int num_sequences, void* cols, cudaStream_t stream);

}  // namespace dflash::kernels
