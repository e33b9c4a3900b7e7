// The inputs of the disentangled attention forward (disentangled_attention.h describes the math)
// and the device limits a launch adapts to: plain data, with no CUDA header, so that host planning
// (attention_plan.h) and its tests need no GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention/attention_kernel_config.h"
#include "kernels/common/data_type.h"

namespace dflash::kernels {

// The relative-position slot table idx(delta) for delta in [-band, band] at [delta + band]; every
// |delta| > band maps to the value at +-band. The same table in host memory (to plan slot ranges
// and saturation thresholds) and in device memory (read by the kernel), uploaded once per model.
struct RelativePositionTable {
  const int32_t* host = nullptr;
  const int32_t* device = nullptr;
  int64_t band = 0;
  int span = 0;  // k: slots are 0 .. 2k - 1.
  // False when some |delta| > band still maps elsewhere (RelativePositionIndex::settled()); such
  // exotic tables are refused.
  bool settled = true;
};

struct AttentionProblem {
  DataType dtype = DataType::kFloat16;
  // float32 inputs run the float32 tile kernel where it can (AttentionRunsFloat32Tiles): 16-byte
  // aligned Q / K / V rows and bases, 8-byte aligned output pairs, position tables whose 64 x 64
  // tiles fit the staged slot window, and its shared memory (102 / 127 / 176 KB at d = 32 / 64 /
  // 128) fits a block of the current device; elsewhere the SIMT float32 kernel (FFMA only).
  // allow_tf32 = false (strict float32): the tiles' Q K^T and P V in 3xTF32 (each operand split
  // into two TF32 parts, three tensor-core products summed in float32: about float32's accuracy,
  // 2^-22 per product) and the C2P / P2C tables by float32 FMA GEMMs. true: 1xTF32 (10-bit
  // mantissa; Q and P rounded to nearest, K and V truncated) and TF32 table GEMMs, about 1e-3
  // relative error (kernels/attention/DESIGN.md#float32).
  bool allow_tf32 = false;
  int num_heads = 0;
  int head_dim = 0;  // 32, 64 or 128.
  // Device pointers. q/k/v/out rows are tokens; head h starts at column h * head_dim.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t q_row_stride = 0;  // In elements.
  int64_t k_row_stride = 0;
  int64_t v_row_stride = 0;
  void* out = nullptr;
  int64_t out_row_stride = 0;
  // [2k, H * d] in the same dtype; null disables that term.
  const void* pos_key = nullptr;    // c2p
  const void* pos_query = nullptr;  // p2c
  // Packed layout: cu_seqlens (device, int32 [num_sequences + 1]) and the longest length.
  const int32_t* cu_seqlens = nullptr;
  int num_sequences = 0;
  int max_seqlen = 0;
  int total_tokens = 0;
  // Padded layout instead: when key_padding_mask is set, sequence b occupies rows
  // [b * padded_length, (b + 1) * padded_length) and mask[b * padded_length + j] == 0 removes key j
  // (cu_seqlens is then ignored): a masked key contributes nothing, whatever its K and V rows hold
  // (NaN and inf included; the tile kernels read V through a copy whose masked rows are zero, in
  // the workspace). Query rows are computed for every position; a row whose keys are all masked
  // is written as zeros.
  const uint8_t* key_padding_mask = nullptr;
  int padded_length = 0;
  float scale = 0.0f;
  RelativePositionTable positions;
  // Optional natural-log log-sum-exp of each row's scores, float [H, total_tokens].
  float* lse = nullptr;
  // The kernel variant to run (a tuning profile's or the autotuner's choice); null runs
  // HeuristicAttentionConfig(*this). A config that does not apply (CheckAttentionConfig) makes
  // the forward return cudaErrorInvalidValue.
  const AttentionKernelConfig* config = nullptr;
};

// What a launch adapts to on the current device.
struct AttentionDeviceLimits {
  int multiprocessors = 0;
  size_t max_shared_bytes_per_block = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
  int compute_capability = 0;             // 10 * major + minor; 0 when there is no device.
};

}  // namespace dflash::kernels
