// The TMA descriptors (CUtensorMap) of the warpgroup kernels' Q, K, V tiles and of their C2P / P2C
// table windows or staged PosK / PosQ rows, encoded on the host per launch; the kernels' side of
// the copies is tma_sm90.h.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention/attention_params.h"

namespace dflash::kernels {

// The warpgroup kernels' tensor maps: Q, K, V tiles, and the C2P / P2C tables' windows or, with
// computed windows, the PosK / PosQ rows (for the position terms `params` has). Element: __half
// or __nv_bfloat16. cudaErrorNotSupported when the driver lacks cuTensorMapEncodeTiled,
// cudaErrorInvalidValue when a tensor cannot be described.
template <typename Element>
cudaError_t EncodeWarpgroupMaps(const AttentionParams<Element>& params, bool compute_windows,
                                AttentionTensorMaps* maps);

}  // namespace dflash::kernels
