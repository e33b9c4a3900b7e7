// The launch of one compiled variant of kAttentionVariants (attention_variants.h). Each variant
// is instantiated in a compile unit of its own (attention_variant.cu.in, generated per index by
// attention_variants.cmake), so that nvcc compiles the variants in parallel; the caller
// (disentangled_attention.cu) sees this declaration only and instantiates no kernel itself.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention/attention_params.h"

namespace dflash::kernels {

// Launches variant kIndex of kAttentionVariants for Element (__half, __nv_bfloat16 or float) over
// grid (query blocks of `longest`, heads, sequences); a variant of the other precision is refused
// (cudaErrorInvalidValue) and never instantiates a kernel. tail_ctas: attention_block_order.h.
template <typename Element, int kIndex>
cudaError_t LaunchVariant(const AttentionParams<Element>& params, const AttentionTensorMaps& maps,
                          int longest, int sequences, int tail_ctas, cudaStream_t stream);

}  // namespace dflash::kernels
