// The warpgroup kernels' TMA descriptors (attention_tensor_maps.h).
#include "kernels/attention/attention_tensor_maps.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>
#include <type_traits>

namespace dflash::kernels {
namespace {

// cuTensorMapEncodeTiled from the driver, through the runtime (kernels/ links no libcuda);
// null when the driver lacks it.
PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encoder;
}

// The TMA description of a 2-D tensor [rows, columns] of 16-bit elements (`row_elements` apart)
// read in [box_rows, box_columns] boxes; elements past its extent read as zeros.
template <typename Element>
cudaError_t EncodeMap2d(const Element* base, int64_t rows, int64_t columns, int64_t row_elements,
                        int box_rows, int box_columns, CUtensorMapSwizzle swizzle,
                        CUtensorMap* map) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = TensorMapEncoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  // The kernel addresses rows with 32-bit TMA coordinates.
  if (rows > std::numeric_limits<int32_t>::max()) return cudaErrorInvalidValue;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(columns), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_elements) * sizeof(Element)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_columns),
                             static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      encode(map,
             std::is_same_v<Element, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                             : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             2, const_cast<Element*>(base), dims, strides, box, element_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// A C2P / P2C table [rows = H * tokens, slot_stride] in [64 rows, kSlotWindow slots] boxes: the
// warpgroup table kernel's band-tile windows.
template <typename Element>
cudaError_t EncodeWindowMap(const Element* table, int64_t rows, int slot_stride, CUtensorMap* map) {
  return EncodeMap2d(table, rows, slot_stride, slot_stride, 64, kSlotWindow,
                     CU_TENSOR_MAP_SWIZZLE_NONE, map);
}

// PosK / PosQ [pos_rows, H * d] (dense: pos_row_stride = H * d) in [kComputedWindow rows, 64
// elements] boxes, 128-byte swizzled (the wgmma tile layout): the warpgroup computed-window
// kernel's staged position rows (d = 64, one head's row per box row).
template <typename Element>
cudaError_t EncodePositionMap(const Element* positions, const AttentionParams<Element>& params,
                              CUtensorMap* map) {
  return EncodeMap2d(positions, params.pos_rows, params.pos_row_stride, params.pos_row_stride,
                     kComputedWindow, 64, CU_TENSOR_MAP_SWIZZLE_128B, map);
}

// Q, K or V [total_tokens, H * d] (row stride `row_elements`) in [64 rows, 64 elements] boxes,
// 128-byte swizzled (the wgmma tile layout): the warpgroup kernels' tiles of one head (d = 64).
template <typename Element>
cudaError_t EncodeTileMap(const Element* tensor, const AttentionParams<Element>& params,
                          int64_t row_elements, CUtensorMap* map) {
  return EncodeMap2d(tensor, params.total_tokens, static_cast<int64_t>(params.num_heads) * 64,
                     row_elements, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B, map);
}

}  // namespace

template <typename Element>
cudaError_t EncodeWarpgroupMaps(const AttentionParams<Element>& params, bool compute_windows,
                                AttentionTensorMaps* maps) {
  cudaError_t error = EncodeTileMap(params.q, params, params.q_row_stride, &maps->q);
  if (error == cudaSuccess) error = EncodeTileMap(params.k, params, params.k_row_stride, &maps->k);
  if (error == cudaSuccess) error = EncodeTileMap(params.v, params, params.v_row_stride, &maps->v);
  const auto encode_bias = [&](const Element* tensor, CUtensorMap* map) {
    if (error != cudaSuccess || tensor == nullptr) return;
    error =
        compute_windows
            ? EncodePositionMap(tensor, params, map)
            : EncodeWindowMap(tensor, static_cast<int64_t>(params.num_heads) * params.total_tokens,
                              params.slot_stride, map);
  };
  encode_bias(compute_windows ? params.pos_key : params.c2p, &maps->c2p);
  encode_bias(compute_windows ? params.pos_query : params.p2c, &maps->p2c);
  return error;
}

template cudaError_t EncodeWarpgroupMaps<__half>(const AttentionParams<__half>&, bool,
                                                 AttentionTensorMaps*);
template cudaError_t EncodeWarpgroupMaps<__nv_bfloat16>(const AttentionParams<__nv_bfloat16>&, bool,
                                                        AttentionTensorMaps*);

}  // namespace dflash::kernels
