// The definition of LaunchVariant (attention_variant_launch.h): kernel parameters, grid and
// shared memory of each kernel family, and the launch of the kernel a variant names. Included only
// by the per-variant compile units (attention_variant.cu.in), each of which instantiates one index.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <type_traits>

#include "kernels/attention/attention_block_order.h"
#include "kernels/attention/attention_fwd_kernel.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/attention_short_kernel.cuh"
#include "kernels/attention/attention_traits.h"
#include "kernels/attention/attention_variant_launch.h"
#include "kernels/attention/attention_variants.h"

namespace dflash::kernels {
namespace attention_launch_detail {

// Launches `kernel` over grid (m_blocks, heads, sequences) with `shared` bytes of dynamic shared
// memory. Sequences run along grid z, which holds at most 65535: larger batches (a rerank of many
// short passages) take several launches. `extra`: the kernel's parameters after the first.
// tail_ctas: about how many CTAs at the end of each launch run in rank-major order
// (attention_block_order.h; 0: none).
template <typename Element, typename... Extra>
cudaError_t LaunchOverSequences(void (*kernel)(AttentionParams<Element>, Extra...), int threads,
                                int shared, AttentionParams<Element> params, int m_blocks,
                                int num_sequences, int tail_ctas, cudaStream_t stream,
                                const Extra&... extra) {
  if (shared > 48 * 1024) {
    const cudaError_t error =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
    if (error != cudaSuccess) return error;
  }
  constexpr int kMaxGridZ = 65535;
  for (int first = 0; first < num_sequences; first += kMaxGridZ) {
    params.sequence_offset = first;
    const dim3 grid(m_blocks, params.num_heads, std::min(kMaxGridZ, num_sequences - first));
    params.tail_groups = TailGroups(tail_ctas, m_blocks, static_cast<int>(grid.y * grid.z));
    kernel<<<grid, threads, shared, stream>>>(params, extra...);
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

template <int kHeadDim, typename Element, bool kComputeWindows, int kMinBlocks, int kKeyGroups = 1,
          bool kWgmma = false, bool kSaturatedPossible = true>
cudaError_t LaunchTensorCore(const AttentionParams<Element>& params,
                             const AttentionTensorMaps& maps, int m_blocks, int num_sequences,
                             cudaStream_t stream, int tail_ctas = 0) {
  using Traits = AttentionTraits<kHeadDim, Element, kWgmma>;
  return LaunchOverSequences<Element, AttentionTensorMaps>(
      DisentangledAttentionKernel<Traits, kComputeWindows, kMinBlocks, kKeyGroups,
                                  kSaturatedPossible>,
      Traits::kThreads * kKeyGroups,
      Traits::ValuesInC2P(kComputeWindows, kMinBlocks) ? Traits::kValuesInC2PSharedBytes
                                                       : Traits::SharedBytes(kKeyGroups),
      params, m_blocks, num_sequences, tail_ctas, stream, maps);
}

// The short-sequence kernel: 32-row blocks of sequences <= kShortMaxKeys.
template <int kHeadDim, typename Element>
cudaError_t LaunchShort(const AttentionParams<Element>& params, int longest, int num_sequences,
                        cudaStream_t stream) {
  using Traits = ShortAttentionTraits<kHeadDim, Element>;
  return LaunchOverSequences<Element>(
      ShortDisentangledAttentionKernel<Traits>, Traits::kThreads, Traits::kSharedBytes, params,
      (longest + Traits::kBlockM - 1) / Traits::kBlockM, num_sequences, 0, stream);
}

// The float32 table kernel at one head dim: 3xTF32 (kSplitTf32, strict) or 1xTF32.
template <int kHeadDim, bool kSplitTf32>
cudaError_t LaunchFloat32Tiles(const AttentionParams<float>& params, int m_blocks, int sequences,
                               cudaStream_t stream) {
  using Traits = AttentionTraits<kHeadDim, float, false, kSplitTf32>;
  return LaunchOverSequences<float, AttentionTensorMaps>(
      DisentangledAttentionKernel<Traits, false, Traits::kMinBlocksPerSmTf32, 1>, Traits::kThreads,
      Traits::kSharedBytes, params, m_blocks, sequences, 0, stream, AttentionTensorMaps{});
}

}  // namespace attention_launch_detail

template <typename Element, int kIndex>
cudaError_t LaunchVariant(const AttentionParams<Element>& params, const AttentionTensorMaps& maps,
                          int longest, int sequences, int tail_ctas, cudaStream_t stream) {
  constexpr AttentionVariant kVariant = kAttentionVariants[kIndex];
  constexpr bool kFloat32 = std::is_same_v<Element, float>;
  if constexpr ((kVariant.kernel == AttentionKernel::kFloat32Tile) != kFloat32) {
    return cudaErrorInvalidValue;
  } else if constexpr (kFloat32) {
    constexpr int kBlockM = AttentionTraits<kVariant.head_dim, float>::kBlockM;
    return attention_launch_detail::LaunchFloat32Tiles<kVariant.head_dim, kVariant.split_tf32>(
        params, (longest + kBlockM - 1) / kBlockM, sequences, stream);
  } else if constexpr (kVariant.kernel == AttentionKernel::kShort) {
    return attention_launch_detail::LaunchShort<kVariant.head_dim, Element>(params, longest,
                                                                            sequences, stream);
  } else {
    return attention_launch_detail::LaunchTensorCore<
        kVariant.head_dim, Element, kVariant.windows == AttentionWindows::kComputed,
        kVariant.min_blocks, kVariant.key_groups, kVariant.mma == AttentionMma::kWarpgroup,
        kVariant.saturated_tiles>(params, maps, (longest + 63) / 64, sequences, stream, tail_ctas);
  }
}

}  // namespace dflash::kernels
