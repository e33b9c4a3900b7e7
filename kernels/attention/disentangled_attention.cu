// Host side of the disentangled attention forward: validation, the slot range and saturation
// thresholds of a batch, the C2P/P2C tables (one strided-batched cuBLAS GEMM each), and the
// kernel launch for each dtype (float32: 3xTF32 or, with allow_tf32, 1xTF32 tiles; the SIMT
// kernel where tiles cannot run) and head dimension.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/attention/attention_fp32_kernel.cuh"
#include "kernels/attention/attention_fwd_kernel.cuh"
#include "kernels/attention/attention_short_kernel.cuh"
#include "kernels/attention/disentangled_attention.h"
#include "kernels/attention/masked_values.cuh"

namespace dflash::kernels {
namespace {

constexpr size_t kWorkspaceAlignment = 256;

size_t AlignUp(size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

bool HasPositions(const AttentionProblem& p) {
  return (p.pos_key != nullptr || p.pos_query != nullptr) && p.positions.host != nullptr &&
         p.positions.device != nullptr && p.positions.span > 0;
}

int LongestSequence(const AttentionProblem& p) {
  return p.key_padding_mask != nullptr ? p.padded_length : p.max_seqlen;
}

int TotalTokens(const AttentionProblem& p) {
  return p.key_padding_mask != nullptr ? p.num_sequences * p.padded_length : p.total_tokens;
}

int LookUp(const RelativePositionTable& table, int64_t delta) {
  delta = std::max(-table.band, std::min(table.band, delta));
  return table.host[delta + table.band];
}

// Slots [first, first + count) that deltas of a sequence of `length` can reach (idx is
// monotone); table rows hold them at a stride rounded up to 8 (16-byte aligned window loads).
struct SlotRange {
  int first = 0;
  int count = 0;
  int stride = 0;
};

SlotRange ActiveSlots(const AttentionProblem& p) {
  const int length = LongestSequence(p);
  int first = LookUp(p.positions, -(length - 1));
  const int last = LookUp(p.positions, length - 1);
  int count = last - first + 1;
  const int stride = (count + 7) / 8 * 8;
  // Widen the range to a multiple of 8 slots (moving its start down when it would pass the last
  // relative-embedding row): with an odd slot count (511 at L = 512, 255 at L = 128) cuBLAS
  // falls back to unaligned sm_75 kernels that ran 5x slower than the attention itself.
  if (stride <= 2 * p.positions.span) {
    first = std::min(first, 2 * p.positions.span - stride);
    count = stride;
  }
  return {first, count, stride};
}

// Elements of one table: [H, T, stride] plus the slack that window loads may read past its end.
size_t TableElements(const AttentionProblem& p) {
  return static_cast<size_t>(p.num_heads) * TotalTokens(p) * ActiveSlots(p).stride + kTableSlack;
}

// Deltas from which the slot no longer changes: >= hi reads table[+band], <= lo table[-band].
void SaturationThresholds(const RelativePositionTable& table, int* lo, int* hi) {
  const int top = table.host[2 * table.band];
  const int bottom = table.host[0];
  int64_t delta = table.band;
  while (delta > 0 && table.host[delta - 1 + table.band] == top) --delta;
  *hi = static_cast<int>(delta);
  delta = -table.band;
  while (delta < 0 && table.host[delta + 1 + table.band] == bottom) ++delta;
  *lo = static_cast<int>(delta);
}

// Whether no key tile of a batch whose longest sequence has `m_blocks` 64-row query blocks is
// saturated (DisentangledAttentionKernel's classification, thresholds from SaturationThresholds):
// the tile at (m0, n0) tests delta_min = m0 - n0 - 63 against hi and delta_max = m0 - n0 + 63
// against lo, over the whole tile (rows and keys past the sequence's end included), and m0 - n0
// reaches (m_blocks - 1) * 64 either way.
bool SaturationFree(int lo, int hi, int64_t m_blocks) {
  using Traits = AttentionTraits<64, __half, true>;
  static_assert(Traits::kBlockM == Traits::kBlockN);
  const int64_t reach = (m_blocks - 1) * Traits::kBlockM;
  const int64_t edge = Traits::kBlockN - 1;
  return reach - edge < hi && edge - reach > lo;
}

// The widest band [-linear, linear] on which idx(delta) = idx(0) + delta (-1 when idx(1) is not
// idx(0) + 1). A 64 x 64 band tile whose deltas all lie in it skips the table lookup.
int LinearBand(const RelativePositionTable& table) {
  const int32_t* zero = table.host + table.band;
  int64_t linear = 0;
  while (linear < table.band && zero[linear + 1] == zero[0] + linear + 1 &&
         zero[-(linear + 1)] == zero[0] - (linear + 1)) {
    ++linear;
  }
  return linear == 0 ? -1 : static_cast<int>(linear);
}

// What the tile kernels (half precision, and TF32) need beyond Valid: 16-byte aligned rows and
// bases of Q / K / V (vector loads), and output pairs aligned for one store; a band tile stages
// kSlotWindow slots: enough when the 127 deltas of a 64 x 64 tile reach at most 128 slots (7
// more are lost aligning the window start). Log buckets with (max_position - 1) / (buckets / 2)
// below about e grow faster than one slot per delta there.
bool FitsTileKernel(const AttentionProblem& p) {
  const int64_t align = 16 / static_cast<int64_t>(DataTypeBytes(p.dtype));
  auto aligned = [](const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; };
  if (p.q_row_stride % align || p.k_row_stride % align || p.v_row_stride % align ||
      p.out_row_stride % 2 || !aligned(p.q) || !aligned(p.k) || !aligned(p.v) ||
      reinterpret_cast<uintptr_t>(p.out) % (2 * DataTypeBytes(p.dtype)) != 0) {
    return false;
  }
  if (HasPositions(p)) {
    const RelativePositionTable& table = p.positions;
    for (int64_t delta = -table.band; delta + 126 <= table.band; ++delta) {
      if (table.host[delta + 126 + table.band] - table.host[delta + table.band] > kSlotWindow - 8) {
        return false;
      }
    }
  }
  return true;
}

bool Valid(const AttentionProblem& p) {
  // Every tile scales in the exponent and takes its maximum before scaling: scale > 0.
  if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) return false;
  if (p.head_dim != 32 && p.head_dim != 64 && p.head_dim != 128) return false;
  if (p.num_heads < 1 || p.num_sequences < 1 || p.q == nullptr || p.k == nullptr ||
      p.v == nullptr || p.out == nullptr) {
    return false;
  }
  if (p.key_padding_mask != nullptr) {
    if (p.padded_length < 1) return false;
  } else if (p.cu_seqlens == nullptr || p.max_seqlen < 1 || p.total_tokens < 1) {
    return false;
  }
  if ((p.pos_key != nullptr || p.pos_query != nullptr) && !HasPositions(p)) return false;
  if (p.key_padding_mask != nullptr &&
      static_cast<int64_t>(p.num_sequences) * p.padded_length > INT32_MAX) {
    return false;
  }
  if (p.dtype != DataType::kFloat32 && !FitsTileKernel(p)) return false;
  if (HasPositions(p)) {
    const RelativePositionTable& table = p.positions;
    if (!table.settled || table.span < 1 || table.band < 0) return false;
    // Every slot names a PosK / PosQ row: the kernels read rows idx(delta) without a bound.
    for (int64_t entry = 0; entry <= 2 * table.band; ++entry) {
      if (table.host[entry] < 0 || table.host[entry] >= 2 * table.span) return false;
    }
  }
  return true;
}

// Longest sequence for which the kernel computes the C2P/P2C windows of its tiles itself. Measured
// on the H200 (BF16, 12 x 64 heads, 16k tokens, v3 positions, same kernel otherwise): computed
// windows ran 1.5x faster than tables at L = 128, 1.2x at 512 and 1.05x at 1024, and 1.15x slower
// at 2048, where 43% of the tiles are saturated and read one table slot each.
constexpr int kComputeWindowsMaxLength = 1024;
// The warpgroup kernels (AttentionMma::kWarpgroup, d = 64) have no such crossover: their computed
// windows (PosK / PosQ rows by TMA, windows by wgmma, saturated tiles as in the table kernel with
// computed row and column terms) beat their table kernel at every length. H200, BF16, same shapes,
// same call (dflash-bench-attention --mma=wgmma --windows=computed|tables), ms: L = 128 0.084
// against 0.179, 512 0.228 against 0.378, 2048 0.580 against 0.666, 8192 1.67 against 1.77,
// 32768 12.05 against 12.6.

// Whether the kernel can compute the C2P/P2C windows of its band tiles itself (from PosK / PosQ,
// with MMAs: C2P_win [64, <=128] = Q_blk . PosK_win^T) instead of reading tables [H, T, slots]
// made by two GEMMs. Worth it for short sequences, where nearly every tile is a band tile and the
// tables, written and read once each, cost more DRAM traffic than the attention itself (L = 512:
// 400 MB). Needs position terms, d <= 64 (shared-memory budget), 16-byte aligned PosK / PosQ, the
// slot table in shared memory, and idx growing by at most one slot per delta (a window of
// kComputedWindow slots then covers a tile). Any sequence length is correct: the mma.sync kernels
// run saturated tiles as band tiles, the warpgroup one as the table kernels do.
bool CanComputeWindows(const AttentionProblem& p) {
  if (p.dtype == DataType::kFloat32 || !HasPositions(p)) return false;
  if (p.head_dim > 64 || p.positions.band > kSharedLutBand) return false;
  // PosK / PosQ rows are copied in 16-byte chunks (cp.async) or by TMA, which needs a 16-byte
  // aligned base (rows are H * d elements apart: a multiple of 16 bytes for d >= 8).
  for (const void* rows : {p.pos_key, p.pos_query}) {
    if (reinterpret_cast<uintptr_t>(rows) % 16 != 0) return false;
  }
  const RelativePositionTable& table = p.positions;
  for (int64_t delta = -table.band; delta + 126 <= table.band; ++delta) {
    if (table.host[delta + 126 + table.band] - table.host[delta + table.band] >
        kComputedWindow - 1) {
      return false;
    }
  }
  return true;
}

// Whether the four-CTA warpgroup kernel can run `p`: it keeps V where the C2P window was, so a
// problem with P2C alone would read V as its absent (zero) C2P window.
bool ValuesCanShareC2P(const AttentionProblem& p) {
  return p.pos_key != nullptr || p.pos_query == nullptr;
}

// Whether the short-sequence kernel (four key warps of 32 keys over 32 query rows) can run `p`:
// computed windows, every sequence <= kShortMaxKeys, and idx growing by at most one slot per
// delta over the deltas of such sequences (|delta| <= kShortMaxKeys - 1), so that the 47 deltas
// of a warp's tile fit its 48-slot windows.
bool CanRunShort(const AttentionProblem& p) {
  // The cheap checks first: this runs at every launch of a grid that leaves SMs idle.
  if (LongestSequence(p) > kShortMaxKeys || (p.head_dim != 32 && p.head_dim != 64)) return false;
  if (!CanComputeWindows(p)) return false;
  constexpr int64_t kReach = kShortMaxKeys - 1;
  for (int64_t delta = -kReach; delta < kReach; ++delta) {
    const int step = LookUp(p.positions, delta + 1) - LookUp(p.positions, delta);
    if (step < 0 || step > 1) return false;
  }
  return true;
}

// The register caps (resident CTAs per SM) each window mode is compiled with at a head dim: the
// first is the default. Every pair here is one template instantiation per dtype below
// (LaunchHalf), each costing minutes of nvcc time: the d = 64 computed-window kernel alone has a
// second one (2 CTAs per SM, uncapped), because d = 64 is every public DeBERTa checkpoint. (Its
// four-CTA warpgroup form is also built without saturated-tile code, for batches that have none:
// AttentionTilesSaturationFree; not a variant of its own, the launch picks it.)
int DefaultMinBlocks(int head_dim, AttentionWindows windows) {
  // The Traits' caps (attention_fwd_kernel.cuh says why); they do not depend on the dtype.
  if (windows == AttentionWindows::kComputed) {
    return head_dim <= 32   ? AttentionTraits<32, __half>::kMinBlocksPerSmComputed
           : head_dim <= 64 ? AttentionTraits<64, __half>::kMinBlocksPerSmComputed
                            : AttentionTraits<128, __half>::kMinBlocksPerSmComputed;
  }
  return AttentionTraits<64, __half>::kMinBlocksPerSm;
}

bool HasVariant(int head_dim, AttentionWindows windows, int min_blocks, AttentionMma mma) {
  if (mma == AttentionMma::kWarpgroup) {
    // The table and computed-window kernels at d = 64, each with its default cap; the
    // computed-window one also capped for four CTAs per SM (its V shares the C2P region).
    return head_dim == 64 &&
           (min_blocks == DefaultMinBlocks(head_dim, windows) ||
            (windows == AttentionWindows::kComputed && min_blocks == 4)) &&
           AttentionWgmmaRuns();
  }
  switch (windows) {
    case AttentionWindows::kTables:
      return min_blocks == 2;
    case AttentionWindows::kComputed:
      return (head_dim == 64 && (min_blocks == 3 || min_blocks == 2)) ||
             (head_dim == 32 && min_blocks == 3);
  }
  return false;
}

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

// Shared memory of the two-key-group kernel at `head_dim` (the same for both half types).
size_t TwoGroupSharedBytes(int head_dim) {
  return static_cast<size_t>(head_dim <= 32 ? AttentionTraits<32, __half>::SharedBytes(2)
                                            : AttentionTraits<64, __half>::SharedBytes(2));
}

// Whether the grid of 64-row blocks x heads x sequences leaves SMs idle (one short sequence):
// where a CTA's latency is the kernel's, which the launch rules (key groups, computed windows
// instead of the warpgroup table kernel) adapt to.
bool GridLeavesSmsIdle(const AttentionProblem& p, const AttentionDeviceLimits& limits) {
  const int64_t blocks =
      int64_t{(LongestSequence(p) + 63) / 64} * p.num_heads * static_cast<int64_t>(p.num_sequences);
  return blocks <= limits.multiprocessors;
}

size_t ShortSharedBytes(int head_dim) {
  return static_cast<size_t>(head_dim <= 32 ? ShortAttentionTraits<32, __half>::kSharedBytes
                                            : ShortAttentionTraits<64, __half>::kSharedBytes);
}

// Shared memory of the float32 tile kernel (1xTF32 and 3xTF32 alike) at `head_dim` (float tiles
// and windows: 102 / 127 / 176 KB at d = 32 / 64 / 128).
size_t Tf32SharedBytes(int head_dim) {
  return static_cast<size_t>(head_dim <= 32   ? AttentionTraits<32, float>::kSharedBytes
                             : head_dim <= 64 ? AttentionTraits<64, float>::kSharedBytes
                                              : AttentionTraits<128, float>::kSharedBytes);
}

// Whether the float32 problem `p` runs the float32 tile kernel: the tile kernel's needs met
// (FitsTileKernel), and its shared memory fits a block of the current device (H100 / H200 and
// A100 but for d = 128 there; not sm_86 / sm_89's 99 KB); the SIMT kernel otherwise.
bool RunsFloat32Tiles(const AttentionProblem& p) {
  return p.dtype == DataType::kFloat32 && FitsTileKernel(p) &&
         Tf32SharedBytes(p.head_dim) <= CurrentDeviceLimits().max_shared_bytes_per_block;
}

// The float32 tile kernel in its 1xTF32 form (allow_tf32); 3xTF32 when not allowed.
bool RunsTf32(const AttentionProblem& p) { return p.allow_tf32 && RunsFloat32Tiles(p); }

AttentionKernelConfig ConfigFor(const AttentionProblem& p) {
  return p.config != nullptr ? *p.config : HeuristicAttentionConfig(p);
}

// A tile kernel (half precision, or float32 tiles) runs `p`, not the SIMT float32 one.
bool RunsTileKernel(const AttentionProblem& p) {
  return p.dtype != DataType::kFloat32 || RunsFloat32Tiles(p);
}

bool UsesTables(const AttentionProblem& p) {
  return RunsTileKernel(p) && HasPositions(p) && ConfigFor(p).windows == AttentionWindows::kTables;
}

// Workspace bytes of one C2P or P2C table (the P2C table starts this far in when both exist).
size_t OneTableBytes(const AttentionProblem& p) {
  return AlignUp(TableElements(p) * DataTypeBytes(p.dtype));
}

// Workspace bytes of the C2P / P2C tables of a problem whose kernel reads tables.
size_t TableBytes(const AttentionProblem& p) {
  const size_t table = OneTableBytes(p);
  return (p.pos_key != nullptr ? table : 0) + (p.pos_query != nullptr ? table : 0);
}

// Workspace bytes of the padded layout's V copy (masked_values.cuh), after the tables: the tile
// kernels' (the SIMT float32 kernel skips masked keys itself).
size_t MaskedValueBytes(const AttentionProblem& p) {
  if (p.key_padding_mask == nullptr || !RunsTileKernel(p)) return 0;
  return AlignUp(static_cast<size_t>(TotalTokens(p)) * p.num_heads * p.head_dim *
                 DataTypeBytes(p.dtype));
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

// The warpgroup kernels' tensor maps: Q, K, V tiles, and the C2P / P2C tables' windows or, with
// computed windows, the PosK / PosQ rows (for the position terms `params` has).
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

// The float32 table kernels, one per head dim and form: 1xTF32 (`tf32`) or 3xTF32.
cudaError_t LaunchFloat32(int head_dim, bool tf32, const AttentionParams<float>& params,
                          int longest, int sequences, cudaStream_t stream) {
  constexpr int kBlockM = AttentionTraits<64, float>::kBlockM;
  const int m_blocks = (longest + kBlockM - 1) / kBlockM;
  switch (head_dim) {
    case 32:
      return tf32 ? LaunchFloat32Tiles<32, false>(params, m_blocks, sequences, stream)
                  : LaunchFloat32Tiles<32, true>(params, m_blocks, sequences, stream);
    case 64:
      return tf32 ? LaunchFloat32Tiles<64, false>(params, m_blocks, sequences, stream)
                  : LaunchFloat32Tiles<64, true>(params, m_blocks, sequences, stream);
    case 128:
      return tf32 ? LaunchFloat32Tiles<128, false>(params, m_blocks, sequences, stream)
                  : LaunchFloat32Tiles<128, true>(params, m_blocks, sequences, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

// The compiled half-precision variants (HasVariant lists the same set). `key_groups` is
// resolved (1, 2 or 4).
template <typename Element>
cudaError_t LaunchHalf(const AttentionKernelConfig& config, int key_groups, int head_dim,
                       const AttentionParams<Element>& params, const AttentionTensorMaps& maps,
                       int longest, int sequences, const AttentionDeviceLimits& limits,
                       cudaStream_t stream) {
  const bool computed = config.windows == AttentionWindows::kComputed;
  if (computed && key_groups == 4) {
    return head_dim == 32 ? LaunchShort<32, Element>(params, longest, sequences, stream)
                          : LaunchShort<64, Element>(params, longest, sequences, stream);
  }
  const int m_blocks = (longest + 63) / 64;
  if (computed && key_groups == 2) {
    // Two groups of 4 warps: 256 threads, one CTA per SM by design (uncapped registers).
    return head_dim == 32 ? LaunchTensorCore<32, Element, true, 1, 2>(params, maps, m_blocks,
                                                                      sequences, stream)
                          : LaunchTensorCore<64, Element, true, 1, 2>(params, maps, m_blocks,
                                                                      sequences, stream);
  }
  switch (head_dim) {
    case 32:
      return computed
                 ? LaunchTensorCore<32, Element, true, 3>(params, maps, m_blocks, sequences, stream)
                 : LaunchTensorCore<32, Element, false, 2>(params, maps, m_blocks, sequences,
                                                           stream);
    case 64:
      if (!computed) {
        return config.mma == AttentionMma::kWarpgroup
                   ? LaunchTensorCore<64, Element, false, 2, 1, true>(params, maps, m_blocks,
                                                                      sequences, stream)
                   : LaunchTensorCore<64, Element, false, 2>(params, maps, m_blocks, sequences,
                                                             stream);
      }
      if (config.mma == AttentionMma::kWarpgroup) {
        if (config.min_blocks_per_sm == 4) {
          // The profiles' kernel at every length: without its saturated-tile code where the
          // batch can have no saturated tile.
          if (SaturationFree(params.lo_threshold, params.hi_threshold, m_blocks)) {
            return LaunchTensorCore<64, Element, true, 4, 1, true, false>(params, maps, m_blocks,
                                                                          sequences, stream);
          }
          // Saturated tiles make the query blocks differ in cost: the launch's last CTAs take
          // the heaviest blocks first (attention_block_order.h). Three quarters of a wave of
          // resident CTAs measured best of 0.5 to 3 waves (HISTORY.md v9.8: -2.0% at L = 1024,
          // -1.6% at 2048 against linear order in the same call). Without saturated tiles the
          // blocks cost about the same, and the order gained nothing at L = 512.
          constexpr int kRankMajorTailCtasPerSm = 3;  // 0.75 x 4 resident CTAs.
          return LaunchTensorCore<64, Element, true, 4, 1, true>(
              params, maps, m_blocks, sequences, stream,
              kRankMajorTailCtasPerSm * limits.multiprocessors);
        }
        return LaunchTensorCore<64, Element, true, 3, 1, true>(params, maps, m_blocks, sequences,
                                                               stream);
      }
      return config.min_blocks_per_sm == 2
                 ? LaunchTensorCore<64, Element, true, 2>(params, maps, m_blocks, sequences, stream)
                 : LaunchTensorCore<64, Element, true, 3>(params, maps, m_blocks, sequences,
                                                          stream);
    case 128:
      return LaunchTensorCore<128, Element, false, 2>(params, maps, m_blocks, sequences, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

// The tile kernels: half precision (any variant) and float32 (tables; 1xTF32 or 3xTF32).
template <typename Element>
cudaError_t ForwardTiles(const AttentionProblem& p, const AttentionKernelConfig& config,
                         const AttentionDeviceLimits& limits, void* workspace, cublasHandle_t blas,
                         cudaStream_t stream) {
  AttentionParams<Element> params = TensorParams<Element>(p);
  params.scale_log2 = p.scale * static_cast<float>(M_LOG2E);
  params.hi_threshold = INT32_MAX;
  params.lo_threshold = INT32_MIN;
  params.linear_band = -1;
  bool compute_windows = false;
  if (HasPositions(p)) {
    const RelativePositionTable& table = p.positions;
    params.lut = table.device;
    params.band = static_cast<int>(table.band);
    SaturationThresholds(table, &params.lo_threshold, &params.hi_threshold);
    params.slot_lo = table.host[0];
    params.slot_hi = table.host[2 * table.band];
    params.linear_band = LinearBand(table);
    params.slot_zero = table.host[table.band];
    compute_windows = config.windows == AttentionWindows::kComputed;
  }
  if (compute_windows) {
    params.slot_base = 0;
    params.pos_key = static_cast<const Element*>(p.pos_key);
    params.pos_query = static_cast<const Element*>(p.pos_query);
    params.pos_row_stride = static_cast<int64_t>(p.num_heads) * p.head_dim;
    params.pos_rows = 2 * p.positions.span;
  }
  // The C2P / P2C tables' slots (table kernels with position terms).
  SlotRange slots;
  if (!compute_windows && HasPositions(p)) {
    slots = ActiveSlots(p);
    params.slots = slots.count;
    params.slot_stride = slots.stride;
    params.slot_base = slots.first;
    Element* tables = static_cast<Element*>(workspace);
    if (p.pos_key != nullptr) params.c2p = tables;
    // After the C2P table when there is one (AttentionWorkspaceBytes sizes for what is used).
    if (p.pos_query != nullptr) {
      params.p2c = tables + (p.pos_key != nullptr ? OneTableBytes(p) / sizeof(Element) : 0);
    }
  }
  const bool tables = params.c2p != nullptr || params.p2c != nullptr;
  // Padded layout: the kernels read V through a copy whose masked rows are zero (after the tables
  // in the workspace; AttentionWorkspaceBytes sizes both).
  Element* masked_values = nullptr;
  if (p.key_padding_mask != nullptr) {
    // Padded problems needed no workspace before the copy: a caller still passing none is
    // refused rather than left to read V from null.
    if (workspace == nullptr) return cudaErrorInvalidValue;
    masked_values = reinterpret_cast<Element*>(static_cast<unsigned char*>(workspace) +
                                               (tables ? TableBytes(p) : 0));
    params.v = masked_values;
    params.v_row_stride = static_cast<int64_t>(p.num_heads) * p.head_dim;
  }
  // Everything that can refuse the problem comes before the first work is queued.
  AttentionTensorMaps maps{};
  // The float32 kernel has no warpgroup variant (CheckAttentionConfig: the default config only).
  if constexpr (!std::is_same_v<Element, float>) {
    if (config.mma == AttentionMma::kWarpgroup) {
      const cudaError_t error = EncodeWarpgroupMaps(params, compute_windows, &maps);
      if (error != cudaSuccess) return error;
    }
  }
  const int key_groups = AttentionKeyGroups(p, config, limits);
  // A pinned two-group or short config on a device whose blocks cannot hold its shared memory.
  if ((key_groups == 2 && TwoGroupSharedBytes(p.head_dim) > limits.max_shared_bytes_per_block) ||
      (key_groups == 4 && ShortSharedBytes(p.head_dim) > limits.max_shared_bytes_per_block)) {
    return cudaErrorInvalidValue;
  }
  if (tables && cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  if (masked_values != nullptr) {
    const cudaError_t error = LaunchMaskedValues(p, params.total_tokens, masked_values, stream);
    if (error != cudaSuccess) return error;
  }
  if (tables) {
    if (params.c2p != nullptr &&
        PositionTable(blas, params.q, p.q_row_stride, static_cast<const Element*>(p.pos_key),
                      p.num_heads, p.head_dim, params.total_tokens, slots, p.allow_tf32,
                      const_cast<Element*>(params.c2p)) != CUBLAS_STATUS_SUCCESS) {
      return cudaErrorUnknown;
    }
    if (params.p2c != nullptr &&
        PositionTable(blas, params.k, p.k_row_stride, static_cast<const Element*>(p.pos_query),
                      p.num_heads, p.head_dim, params.total_tokens, slots, p.allow_tf32,
                      const_cast<Element*>(params.p2c)) != CUBLAS_STATUS_SUCCESS) {
      return cudaErrorUnknown;
    }
  }
  if constexpr (std::is_same_v<Element, float>) {
    return LaunchFloat32(p.head_dim, p.allow_tf32, params, LongestSequence(p), p.num_sequences,
                         stream);
  } else {
    return LaunchHalf<Element>(config, key_groups, p.head_dim, params, maps, LongestSequence(p),
                               p.num_sequences, limits, stream);
  }
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

bool AttentionRunsTf32(const AttentionProblem& problem) { return RunsTf32(problem); }

bool AttentionRunsFloat32Tiles(const AttentionProblem& problem) {
  return RunsFloat32Tiles(problem);
}

bool AttentionWgmmaRuns() {
  return AttentionWgmmaCompiled() && CurrentDeviceLimits().compute_capability == 90;
}

AttentionKernelConfig HeuristicAttentionConfig(const AttentionProblem& problem) {
  AttentionKernelConfig config;
  // The warpgroup kernels where they run (d = 64, half types, H100 / H200): computed windows at
  // every length they can be computed, else tables (AttentionLaunchConfig runs the mma.sync
  // computed-window kernels and their key groups for grids that leave SMs idle).
  const bool warpgroup =
      problem.dtype != DataType::kFloat32 && problem.head_dim == 64 && AttentionWgmmaRuns();
  if (CanComputeWindows(problem) &&
      (warpgroup || LongestSequence(problem) <= kComputeWindowsMaxLength)) {
    config.windows = AttentionWindows::kComputed;
  }
  if (warpgroup) config.mma = AttentionMma::kWarpgroup;
  config.min_blocks_per_sm = DefaultMinBlocks(problem.head_dim, config.windows);
  // The warpgroup computed-window kernel at four CTAs per SM where it applies: on the H200,
  // 7.5-10% faster than at three at L = 128 ... 8192 (kernels/attention/HISTORY.md, v9).
  if (warpgroup && config.windows == AttentionWindows::kComputed && ValuesCanShareC2P(problem)) {
    config.min_blocks_per_sm = 4;
  }
  return config;
}

bool AttentionTilesSaturationFree(const AttentionProblem& problem) {
  if (!HasPositions(problem)) return true;
  int lo = 0;
  int hi = 0;
  SaturationThresholds(problem.positions, &lo, &hi);
  return SaturationFree(lo, hi, (LongestSequence(problem) + 63) / 64);
}

AttentionKernelConfig AttentionLaunchConfig(const AttentionProblem& problem,
                                            const AttentionKernelConfig& config,
                                            const AttentionDeviceLimits& limits) {
  if (config.mma != AttentionMma::kWarpgroup || !CanComputeWindows(problem) ||
      LongestSequence(problem) > kComputeWindowsMaxLength) {
    return config;
  }
  if (!GridLeavesSmsIdle(problem, limits)) return config;
  AttentionKernelConfig computed;
  computed.windows = AttentionWindows::kComputed;
  computed.min_blocks_per_sm = DefaultMinBlocks(problem.head_dim, computed.windows);
  return computed;
}

int AttentionKeyGroups(const AttentionProblem& problem, const AttentionKernelConfig& config,
                       const AttentionDeviceLimits& limits) {
  // The key-group kernels are mma.sync ones: a warpgroup config runs one group, as named
  // (AttentionLaunchConfig has already switched the grids where those kernels pay off).
  if (config.windows != AttentionWindows::kComputed || config.mma == AttentionMma::kWarpgroup) {
    return 1;
  }
  if (config.key_groups != 0) return config.key_groups;
  // Two groups halve a CTA's serial chain of key tiles when one CTA's latency is the kernel's
  // time: the 64-row blocks x heads x sequences do not fill the SMs, each block has at least
  // two key tiles, and the device's blocks hold the two groups' shared memory (not sm_86 / sm_89
  // at d = 64: 122 KB against 99 KB).
  if (!GridLeavesSmsIdle(problem, limits)) return 1;
  // Sequences <= kShortMaxKeys: the short kernel, whose warps each take a quarter of the keys of
  // 16 rows (H200, one 128-token sequence of 12 heads: 6.8 us against two groups' 9.7; faster
  // than both tile variants up to 5 such sequences, kernels/attention/HISTORY.md).
  if (CanRunShort(problem) &&
      ShortSharedBytes(problem.head_dim) <= limits.max_shared_bytes_per_block) {
    return 4;
  }
  const bool fits = TwoGroupSharedBytes(problem.head_dim) <= limits.max_shared_bytes_per_block;
  return LongestSequence(problem) > 64 && fits ? 2 : 1;
}

cudaError_t CheckAttentionConfig(const AttentionProblem& problem,
                                 const AttentionKernelConfig& config) {
  if (problem.dtype == DataType::kFloat32) {
    // The float32 paths (tiles in 1xTF32 or 3xTF32, chosen by allow_tf32, or the SIMT kernel
    // where tiles cannot run: AttentionRunsFloat32Tiles) are not chosen by the config: only the
    // heuristic's (the default config) names them.
    return config == HeuristicAttentionConfig(problem) ? cudaSuccess : cudaErrorInvalidValue;
  }
  if (config.block_m != 64 || config.block_n != 64 || config.warps != 4) {
    return cudaErrorInvalidValue;
  }
  if (config.windows == AttentionWindows::kComputed && !CanComputeWindows(problem)) {
    return cudaErrorInvalidValue;
  }
  // Pinned key groups are mma.sync kernels (the two-group and short ones).
  if (config.key_groups < 0 || config.key_groups == 3 || config.key_groups > 4 ||
      (config.key_groups >= 2 &&
       (config.windows != AttentionWindows::kComputed || config.mma == AttentionMma::kWarpgroup))) {
    return cudaErrorInvalidValue;
  }
  if (config.key_groups == 4 && !CanRunShort(problem)) return cudaErrorInvalidValue;
  if (config.mma == AttentionMma::kWarpgroup && config.min_blocks_per_sm == 4 &&
      !ValuesCanShareC2P(problem)) {
    return cudaErrorInvalidValue;
  }
  // One two-group and one short kernel per head dim (256 threads, one CTA per SM by design): they
  // run whatever register cap the config names (computed windows, so d <= 64, checked above).
  if (config.key_groups >= 2) return cudaSuccess;
  return HasVariant(problem.head_dim, config.windows, config.min_blocks_per_sm, config.mma)
             ? cudaSuccess
             : cudaErrorInvalidValue;
}

std::vector<AttentionKernelConfig> AttentionCandidateConfigs(const AttentionProblem& problem) {
  const AttentionKernelConfig heuristic = HeuristicAttentionConfig(problem);
  std::vector<AttentionKernelConfig> candidates{heuristic};
  if (problem.dtype == DataType::kFloat32) return candidates;
  for (AttentionWindows windows : {AttentionWindows::kTables, AttentionWindows::kComputed}) {
    for (int min_blocks : {3, 2}) {
      AttentionKernelConfig config;
      config.windows = windows;
      config.min_blocks_per_sm = min_blocks;
      if (config != heuristic && CheckAttentionConfig(problem, config) == cudaSuccess) {
        candidates.push_back(config);
      }
    }
  }
  // The warpgroup kernels, where this device and build run them: tables, computed windows, and
  // computed windows at four CTAs per SM.
  const std::pair<AttentionWindows, int> warpgroup_variants[] = {
      {AttentionWindows::kTables, DefaultMinBlocks(problem.head_dim, AttentionWindows::kTables)},
      {AttentionWindows::kComputed,
       DefaultMinBlocks(problem.head_dim, AttentionWindows::kComputed)},
      {AttentionWindows::kComputed, 4}};
  for (const auto& [windows, min_blocks] : warpgroup_variants) {
    AttentionKernelConfig warpgroup;
    warpgroup.mma = AttentionMma::kWarpgroup;
    warpgroup.windows = windows;
    warpgroup.min_blocks_per_sm = min_blocks;
    if (warpgroup != heuristic && CheckAttentionConfig(problem, warpgroup) == cudaSuccess) {
      candidates.push_back(warpgroup);
    }
  }
  // No pinned key groups: a tuner's workload family spans batch sizes, and the launch's choice
  // (key_groups 0) takes the short kernel or two groups only for grids that leave SMs idle (pinned,
  // the short kernel runs 16k-token batches of L = 128 1.36x slower).
  return candidates;
}

size_t AttentionWorkspaceBytes(const AttentionProblem& problem) {
  return (UsesTables(problem) ? TableBytes(problem) : 0) + MaskedValueBytes(problem);
}

size_t AttentionMaxWorkspaceBytes(const AttentionProblem& problem) {
  size_t bytes = 0;
  for (const AttentionKernelConfig& config : AttentionCandidateConfigs(problem)) {
    AttentionProblem with = problem;
    with.config = &config;
    bytes = std::max(bytes, AttentionWorkspaceBytes(with));
  }
  return bytes;
}

cudaError_t DisentangledAttentionForward(const AttentionProblem& problem, void* workspace,
                                         cublasHandle_t blas, cudaStream_t stream) {
  if (!Valid(problem)) return cudaErrorInvalidValue;
  const AttentionKernelConfig chosen = ConfigFor(problem);
  if (CheckAttentionConfig(problem, chosen) != cudaSuccess) return cudaErrorInvalidValue;
  const AttentionDeviceLimits limits = CurrentDeviceLimits();
  const AttentionKernelConfig config = AttentionLaunchConfig(problem, chosen, limits);
  switch (problem.dtype) {
    case DataType::kFloat16:
      return ForwardTiles<__half>(problem, config, limits, workspace, blas, stream);
    case DataType::kBFloat16:
      return ForwardTiles<__nv_bfloat16>(problem, config, limits, workspace, blas, stream);
    case DataType::kFloat32:
      return RunsFloat32Tiles(problem)
                 ? ForwardTiles<float>(problem, config, limits, workspace, blas, stream)
                 : ForwardFloat32Simt(problem, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dflash::kernels
