// Sequence pooling and first-token gathering for the heads (docs/deberta.md#heads-and-pooling): CLS
// or mean sentence embeddings with optional L2 normalization (float32 out), the pooler GEMM's input
// rows, and a float32 conversion for logits/hidden states leaving the device.
//
// Sequences are packed: sequence s owns rows cu_seqlens[s] .. cu_seqlens[s+1]-1 of `hidden`
// (cu_seqlens: device int32 [num_sequences + 1], nondecreasing, validated by the engine).
//
// This header needs only the CUDA runtime API: kernels/ builds with the CUDA toolkit alone.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/data_type.h"

namespace dflash::kernels {

enum class Pooling { kFirstToken, kMean };

// out[s, :] (float32, [num_sequences, width] contiguous) = hidden[cu_seqlens[s], :] (kFirstToken)
// or the mean of rows cu_seqlens[s] .. cu_seqlens[s+1]-1 (kMean, float32 accumulation; an empty
// sequence gives zeros); then, when l2_normalize, out[s, :] /= max(||out[s, :]||_2, 1e-12) (the
// epsilon of torch.nn.functional.normalize and of engine/cpu/elementwise.cc's L2Normalize).
// hidden is `dtype` with row stride ld (elements, >= width).
//
// kMean runs one block per (sequence, column chunk), each looping over the sequence's rows with
// coalesced 16-byte loads and reducing in shared memory in a fixed order (deterministic, no
// atomics); with l2_normalize a second launch normalizes the rows of out in place.
//
// Runs on `stream`, allocates nothing; num_sequences == 0 is a no-op. Returns
// cudaErrorInvalidValue for a bad dtype or pooling, width < 1, num_sequences < 0, ld < width or
// a null pointer, else the launch's error.
cudaError_t PoolSequences(DataType dtype, const void* hidden, int64_t ld, const int32_t* cu_seqlens,
                          int num_sequences, int width, Pooling pooling, bool l2_normalize,
                          float* out, cudaStream_t stream);

// out[s, :] = hidden[cu_seqlens[s], :] in the input dtype, [num_sequences, width] contiguous: the
// pooler GEMM's input. Same argument rules as PoolSequences.
cudaError_t GatherFirstTokens(DataType dtype, const void* hidden, int64_t ld,
                              const int32_t* cu_seqlens, int num_sequences, int width, void* out,
                              cudaStream_t stream);

// out[i] = float(in[i]) for i < count. count == 0 is a no-op; cudaErrorInvalidValue for a bad
// dtype, count < 0 or a null pointer.
cudaError_t ConvertToFloat(DataType dtype, const void* in, int64_t count, float* out,
                           cudaStream_t stream);

}  // namespace dflash::kernels
