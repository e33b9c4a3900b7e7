// Launch side of the disentangled attention forward: the plan of a problem (attention_plan.h) on
// the current device turned into kernel parameters, the C2P/P2C tables (one strided-batched cuBLAS
// GEMM each), and the launch of the plan's variant of kAttentionVariants (float32: 3xTF32 or, with
// allow_tf32, 1xTF32 tiles; the SIMT kernel where tiles cannot run). The variants' kernels are
// compiled in units of their own (attention_variant_launch.h); this one holds none of them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/attention/attention_fp32_kernel.cuh"
#include "kernels/attention/attention_plan.h"
#include "kernels/attention/attention_tensor_maps.h"
#include "kernels/attention/attention_variant_launch.h"
#include "kernels/attention/attention_variants.h"
#include "kernels/attention/disentangled_attention.h"
#include "kernels/attention/masked_values.cuh"

namespace dflash::kernels {
namespace {

// attention_variants.cmake generates one compile unit per variant, up to the count it passes.
static_assert(kAttentionVariantCount == DFLASH_ATTENTION_VARIANT_COUNT,
              "kAttentionVariants changed size: update attention_variants.cmake's count");

using attention_plan::HasPositions;
using attention_plan::SlotRange;
using attention_plan::TotalTokens;

// The current device's limits, cached per device (queried once; zeros when there is no device).
AttentionDeviceLimits CurrentDeviceLimits() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> multiprocessors[kMaxDevices] = {};
  static std::atomic<int> shared_bytes[kMaxDevices] = {};
  static std::atomic<int> capabilities[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return {};
  int count = multiprocessors[device].load(std::memory_order_relaxed);
  int shared = shared_bytes[device].load(std::memory_order_relaxed);
  int capability = capabilities[device].load(std::memory_order_relaxed);
  if (count == 0 || shared == 0 || capability == 0) {
    int major = 0;
    int minor = 0;
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
      return {};
    }
    capability = 10 * major + minor;
    multiprocessors[device].store(count, std::memory_order_relaxed);
    shared_bytes[device].store(shared, std::memory_order_relaxed);
    capabilities[device].store(capability, std::memory_order_relaxed);
  }
  return {count, static_cast<size_t>(shared), capability};
}

template <typename Element>
cudaDataType_t CudaType();
template <>
cudaDataType_t CudaType<__half>() {
  return CUDA_R_16F;
}
template <>
cudaDataType_t CudaType<__nv_bfloat16>() {
  return CUDA_R_16BF;
}
template <>
cudaDataType_t CudaType<float>() {
  return CUDA_R_32F;
}

// table[h, t, s] = sum_c X[t, h*d + c] * Pos[(first + s), h*d + c]: C^T = Pos_win^T-op X in
// cuBLAS's column-major terms, m = slots, n = tokens, k = d, batched over heads. float32 tables
// (the float32 tile kernel's) on TF32 tensor cores with allow_tf32 (`fast_tf32`), else exact
// float32 FMA (CUBLAS_COMPUTE_32F: no TF32 under the default math mode of cublasCreate's handle).
template <typename Element>
cublasStatus_t PositionTable(cublasHandle_t blas, const Element* x, int64_t x_row_stride,
                             const Element* pos, int num_heads, int head_dim, int tokens,
                             SlotRange slots, bool fast_tf32, Element* table) {
  const float one = 1.0f;
  const float zero = 0.0f;
  return cublasGemmStridedBatchedEx(
      blas, CUBLAS_OP_T, CUBLAS_OP_N, slots.count, tokens, head_dim, &one,
      pos + static_cast<int64_t>(slots.first) * num_heads * head_dim, CudaType<Element>(),
      num_heads * head_dim, head_dim, x, CudaType<Element>(), static_cast<int>(x_row_stride),
      head_dim, &zero, table, CudaType<Element>(), slots.stride,
      static_cast<int64_t>(tokens) * slots.stride, num_heads,
      std::is_same_v<Element, float> && fast_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                  : CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT);
}

// The tensors, layout and sizes of `p` as kernel parameters (position fields left empty).
template <typename Element>
AttentionParams<Element> TensorParams(const AttentionProblem& p) {
  AttentionParams<Element> params{};
  params.q = static_cast<const Element*>(p.q);
  params.k = static_cast<const Element*>(p.k);
  params.v = static_cast<const Element*>(p.v);
  params.q_row_stride = p.q_row_stride;
  params.k_row_stride = p.k_row_stride;
  params.v_row_stride = p.v_row_stride;
  params.out = static_cast<Element*>(p.out);
  params.out_row_stride = p.out_row_stride;
  params.cu_seqlens = p.cu_seqlens;
  params.key_padding_mask = p.key_padding_mask;
  params.padded_length = p.padded_length;
  params.num_heads = p.num_heads;
  params.total_tokens = TotalTokens(p);
  params.lse = p.lse;
  return params;
}

// The padded layout's copy of V [tokens, H * d] with masked keys' rows zeroed, into `out`
// (masked_values.cuh): a grid-stride pass of 16-byte chunks, at most 4096 blocks.
template <typename Element>
cudaError_t LaunchMaskedValues(const AttentionProblem& p, int tokens, Element* out,
                               cudaStream_t stream) {
  const int row_elements = p.num_heads * p.head_dim;
  const int64_t chunks =
      static_cast<int64_t>(tokens) * row_elements * static_cast<int64_t>(sizeof(Element)) / 16;
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((chunks + kThreads - 1) / kThreads, 4096));
  MaskedValuesKernel<Element><<<blocks, kThreads, 0, stream>>>(static_cast<const Element*>(p.v),
                                                               p.v_row_stride, p.key_padding_mask,
                                                               tokens, row_elements, out);
  return cudaGetLastError();
}

template <typename Element, int... kIndices>
cudaError_t LaunchIndexed(int index, const AttentionParams<Element>& params,
                          const AttentionTensorMaps& maps, int longest, int sequences,
                          int tail_ctas, cudaStream_t stream,
                          std::integer_sequence<int, kIndices...>) {
  cudaError_t result = cudaErrorInvalidValue;
  (void)((index == kIndices && (result = LaunchVariant<Element, kIndices>(
                                    params, maps, longest, sequences, tail_ctas, stream),
                                true)) ||
         ...);
  return result;
}

// The tile kernels, half precision (any variant) and float32 (tables; 1xTF32 or 3xTF32), as
// `plan` names them.
template <typename Element>
cudaError_t ForwardTiles(const AttentionProblem& p, const attention_plan::Plan& plan,
                         void* workspace, cublasHandle_t blas, cudaStream_t stream) {
  AttentionParams<Element> params = TensorParams<Element>(p);
  params.scale_log2 = p.scale * static_cast<float>(M_LOG2E);
  params.hi_threshold = INT32_MAX;
  params.lo_threshold = INT32_MIN;
  params.linear_band = -1;
  if (HasPositions(p)) {
    const RelativePositionTable& table = p.positions;
    params.lut = table.device;
    params.band = static_cast<int>(table.band);
    attention_plan::SaturationThresholds(table, &params.lo_threshold, &params.hi_threshold);
    params.slot_lo = table.host[0];
    params.slot_hi = table.host[2 * table.band];
    params.linear_band = attention_plan::LinearBand(table);
    params.slot_zero = table.host[table.band];
  }
  if (plan.compute_windows) {
    params.slot_base = 0;
    params.pos_key = static_cast<const Element*>(p.pos_key);
    params.pos_query = static_cast<const Element*>(p.pos_query);
    params.pos_row_stride = static_cast<int64_t>(p.num_heads) * p.head_dim;
    params.pos_rows = 2 * p.positions.span;
  }
  unsigned char* const bytes = static_cast<unsigned char*>(workspace);
  if (plan.tables()) {
    params.slots = plan.slots.count;
    params.slot_stride = plan.slots.stride;
    params.slot_base = plan.slots.first;
    if (plan.c2p_offset != plan.kNone) {
      params.c2p = reinterpret_cast<Element*>(bytes + plan.c2p_offset);
    }
    if (plan.p2c_offset != plan.kNone) {
      params.p2c = reinterpret_cast<Element*>(bytes + plan.p2c_offset);
    }
  }
  // Padded layout: the kernels read V through a copy whose masked rows are zero.
  Element* masked_values = nullptr;
  if (plan.masked_values_offset != plan.kNone) {
    // Padded problems needed no workspace before the copy: a caller still passing none is
    // refused rather than left to read V from null.
    if (workspace == nullptr) return cudaErrorInvalidValue;
    masked_values = reinterpret_cast<Element*>(bytes + plan.masked_values_offset);
    params.v = masked_values;
    params.v_row_stride = static_cast<int64_t>(p.num_heads) * p.head_dim;
  }
  // Everything that can refuse the problem comes before the first work is queued.
  AttentionTensorMaps maps{};
  // The float32 kernel has no warpgroup variant (CheckAttentionConfig: the default config only).
  if constexpr (!std::is_same_v<Element, float>) {
    if (plan.config.mma == AttentionMma::kWarpgroup) {
      const cudaError_t error = EncodeWarpgroupMaps(params, plan.compute_windows, &maps);
      if (error != cudaSuccess) return error;
    }
  }
  if (plan.tables() && cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS) {
    return cudaErrorUnknown;
  }
  if (masked_values != nullptr) {
    const cudaError_t error = LaunchMaskedValues(p, params.total_tokens, masked_values, stream);
    if (error != cudaSuccess) return error;
  }
  if (params.c2p != nullptr &&
      PositionTable(blas, params.q, p.q_row_stride, static_cast<const Element*>(p.pos_key),
                    p.num_heads, p.head_dim, params.total_tokens, plan.slots, p.allow_tf32,
                    const_cast<Element*>(params.c2p)) != CUBLAS_STATUS_SUCCESS) {
    return cudaErrorUnknown;
  }
  if (params.p2c != nullptr &&
      PositionTable(blas, params.k, p.k_row_stride, static_cast<const Element*>(p.pos_query),
                    p.num_heads, p.head_dim, params.total_tokens, plan.slots, p.allow_tf32,
                    const_cast<Element*>(params.p2c)) != CUBLAS_STATUS_SUCCESS) {
    return cudaErrorUnknown;
  }
  return LaunchIndexed<Element>(plan.variant, params, maps, attention_plan::LongestSequence(p),
                                p.num_sequences, plan.tail_ctas, stream,
                                std::make_integer_sequence<int, kAttentionVariantCount>{});
}

// The SIMT float32 kernel (attention_fp32_kernel.cuh): where the float32 tiles cannot run.
cudaError_t ForwardFloat32Simt(const AttentionProblem& p, cudaStream_t stream) {
  AttentionParams<float> params = TensorParams<float>(p);
  params.scale_log2 = p.scale;  // The SIMT kernel uses expf: plain scale.
  Fp32PositionInputs positions{nullptr, nullptr, p.num_sequences};
  if (HasPositions(p)) {
    params.lut = p.positions.device;
    params.band = static_cast<int>(p.positions.band);
    positions.pos_key = static_cast<const float*>(p.pos_key);
    positions.pos_query = static_cast<const float*>(p.pos_query);
  }
  const dim3 grid(params.total_tokens, p.num_heads);
  const size_t shared = (2 * p.head_dim + 128 + 8) * sizeof(float);
  DisentangledAttentionFp32Kernel<<<grid, 128, shared, stream>>>(params, positions, p.head_dim);
  return cudaGetLastError();
}

// This build on the current device.
attention_plan::Target CurrentTarget() { return {CurrentDeviceLimits(), AttentionWgmmaCompiled()}; }

}  // namespace

const char* AttentionWindowsName(AttentionWindows windows) {
  switch (windows) {
    case AttentionWindows::kTables:
      return "tables";
    case AttentionWindows::kComputed:
      return "computed";
  }
  return "?";
}

const char* AttentionMmaName(AttentionMma mma) {
  switch (mma) {
    case AttentionMma::kSync:
      return "sync";
    case AttentionMma::kWarpgroup:
      return "wgmma";
  }
  return "?";
}

bool AttentionWgmmaCompiled() {
#if defined(DFLASH_KERNELS_SM90A)
  return true;
#else
  return false;
#endif
}

bool AttentionRunsTf32(const AttentionProblem& problem) {
  return problem.allow_tf32 && AttentionRunsFloat32Tiles(problem);
}

bool AttentionRunsFloat32Tiles(const AttentionProblem& problem) {
  return attention_plan::RunsFloat32Tiles(problem, CurrentTarget());
}

bool AttentionWgmmaRuns() { return CurrentTarget().WgmmaRuns(); }

AttentionKernelConfig HeuristicAttentionConfig(const AttentionProblem& problem) {
  return attention_plan::Heuristic(problem, CurrentTarget());
}

bool AttentionTilesSaturationFree(const AttentionProblem& problem) {
  if (!HasPositions(problem)) return true;
  int lo = 0;
  int hi = 0;
  attention_plan::SaturationThresholds(problem.positions, &lo, &hi);
  return attention_plan::SaturationFree(lo, hi,
                                        (attention_plan::LongestSequence(problem) + 63) / 64);
}

AttentionKernelConfig AttentionLaunchConfig(const AttentionProblem& problem,
                                            const AttentionKernelConfig& config,
                                            const AttentionDeviceLimits& limits) {
  return attention_plan::LaunchConfig(problem, config, {limits, AttentionWgmmaCompiled()});
}

int AttentionKeyGroups(const AttentionProblem& problem, const AttentionKernelConfig& config,
                       const AttentionDeviceLimits& limits) {
  return attention_plan::KeyGroups(problem, config, limits);
}

cudaError_t CheckAttentionConfig(const AttentionProblem& problem,
                                 const AttentionKernelConfig& config) {
  return attention_plan::CheckConfig(problem, config, CurrentTarget()) ? cudaSuccess
                                                                       : cudaErrorInvalidValue;
}

std::vector<AttentionKernelConfig> AttentionCandidateConfigs(const AttentionProblem& problem) {
  return attention_plan::Candidates(problem, CurrentTarget());
}

size_t AttentionWorkspaceBytes(const AttentionProblem& problem) {
  return attention_plan::WorkspaceBytes(problem, CurrentTarget());
}

size_t AttentionMaxWorkspaceBytes(const AttentionProblem& problem) {
  return attention_plan::MaxWorkspaceBytes(problem, CurrentTarget());
}

cudaError_t DisentangledAttentionForward(const AttentionProblem& problem, void* workspace,
                                         cublasHandle_t blas, cudaStream_t stream) {
  attention_plan::Plan plan;
  if (!attention_plan::MakePlan(problem, CurrentTarget(), &plan)) return cudaErrorInvalidValue;
  if (plan.variant < 0) return ForwardFloat32Simt(problem, stream);
  switch (problem.dtype) {
    case DataType::kFloat16:
      return ForwardTiles<__half>(problem, plan, workspace, blas, stream);
    case DataType::kBFloat16:
      return ForwardTiles<__nv_bfloat16>(problem, plan, workspace, blas, stream);
    case DataType::kFloat32:
      return ForwardTiles<float>(problem, plan, workspace, blas, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dflash::kernels
