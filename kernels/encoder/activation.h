// Bias + activation in place, for the FFN intermediate, the pooler and the ConvLayer output
// (docs/deberta.md#forward-pass), with the activations of engine/cpu/elementwise.cc.
//
// cuBLASLt's CUBLASLT_EPILOGUE_GELU / _GELU_BIAS computes the TANH form of GELU, not the erf
// form. Sources: the cuBLAS documentation of cublasLtEpilogue_t only says "Apply GELU point-wise
// transform to the results (x:=GELU(x))" with no formula (docs.nvidia.com/cuda/cublas, and the same
// wording in hipBLASLt's datatypes reference); public users of the epilogue state it is the tanh
// approximation (e.g. diffusion-model code routing gelu(approximate="tanh") through
// torch._addmm_activation, which uses this epilogue). Measured on the H200 (CUDA 13.0, torch 2.11,
// 2026-11-29, float32, K = 64, no TF32): torch._addmm_activation(use_gelu=True) differs from
// F.gelu(approximate="tanh") by at most 5.6e-6 and from the erf GELU by 4.7e-4 (= max|erf - tanh|
// over the data). So the engine must NOT use the epilogue for hidden_act "gelu" (kGeluErf, every
// DeBERTa checkpoint); for kGeluTanh it is close but not bit-equal to this file's kernel.
//
// This header needs only the CUDA runtime API: kernels/ builds with the CUDA toolkit alone.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/data_type.h"

namespace dflash::kernels {

// kGeluErf:  0.5 x (1 + erf(x / sqrt 2)), transformers' "gelu" (computed as 0.5 x erfc(-x / sqrt
// 2)). kGeluTanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), "gelu_new" /
// "gelu_pytorch_tanh" /
//            "gelu_fast".
// kTanh, kRelu (max(x, 0)), kSilu (x / (1 + exp(-x)), "silu" / "swish"), kSigmoid.
enum class Activation { kIdentity, kGeluErf, kGeluTanh, kTanh, kRelu, kSilu, kSigmoid };

// Maps a transformers ACT2FN name (hidden_act, conv_act, pooler_hidden_act; case-insensitive) to
// an Activation: "gelu" -> kGeluErf; "gelu_new", "gelu_pytorch_tanh", "gelu_fast" -> kGeluTanh;
// "tanh"; "relu"; "silu", "swish" -> kSilu; "sigmoid"; "linear", "identity" -> kIdentity. The same
// set as engine/model/model_config.h's ParseActivation (plus identity). Returns false (and leaves
// *out alone) for an unknown name or a null argument. Host code.
bool ParseActivation(const char* hf_name, Activation* out);

// x[r, c] = act(x[r, c] + bias[c]) in place for r < rows, c < cols; row stride ld (elements,
// >= cols); bias (same dtype as x, [cols]) may be null. float32 arithmetic, one rounding on store.
// 16-byte accesses when cols and ld are multiples of 8 (16-bit types) / 4 (float32) elements and
// x and bias are 16-byte aligned.
//
// Runs on `stream`, allocates nothing; rows == 0 is a no-op. Returns cudaErrorInvalidValue for a
// bad dtype or activation, cols < 1, rows < 0, ld < cols or a null x, else the launch's error.
cudaError_t BiasActivation(DataType dtype, void* x, int64_t rows, int cols, int64_t ld,
                           const void* bias, Activation activation, cudaStream_t stream);

}  // namespace dflash::kernels
