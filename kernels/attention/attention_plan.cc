// The host plan of the disentangled attention forward (attention_plan.h).
#include "kernels/attention/attention_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention/attention_params.h"

namespace dflash::kernels::attention_plan {
namespace {

constexpr size_t kWorkspaceAlignment = 256;

size_t AlignUp(size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

int LookUp(const RelativePositionTable& table, int64_t delta) {
  delta = std::max(-table.band, std::min(table.band, delta));
  return table.host[delta + table.band];
}

// Elements of one table: [H, T, stride] plus the slack that window loads may read past its end.
size_t TableElements(const AttentionProblem& p) {
  return static_cast<size_t>(p.num_heads) * TotalTokens(p) * ActiveSlots(p).stride + kTableSlack;
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

// The default register cap (resident CTAs per SM) of a window mode at a head dim; the other caps
// compiled are kAttentionVariants' entries.
int DefaultMinBlocks(int head_dim, AttentionWindows windows) {
  // The Traits' caps (attention_traits.h says why); they do not depend on the dtype.
  if (windows == AttentionWindows::kComputed) {
    return head_dim <= 32   ? AttentionTraits<32, __half>::kMinBlocksPerSmComputed
           : head_dim <= 64 ? AttentionTraits<64, __half>::kMinBlocksPerSmComputed
                            : AttentionTraits<128, __half>::kMinBlocksPerSmComputed;
  }
  return AttentionTraits<64, __half>::kMinBlocksPerSm;
}

// Whether the grid of 64-row blocks x heads x sequences leaves SMs idle (one short sequence):
// where a CTA's latency is the kernel's, which the launch rules (key groups, computed windows
// instead of the warpgroup table kernel) adapt to.
bool GridLeavesSmsIdle(const AttentionProblem& p, const AttentionDeviceLimits& limits) {
  const int64_t blocks =
      int64_t{(LongestSequence(p) + 63) / 64} * p.num_heads * static_cast<int64_t>(p.num_sequences);
  return blocks <= limits.multiprocessors;
}

// The compiled variant a config names for `head_dim` (kTile or kShort; kg >= 2 whatever cap the
// config names); null when this binary has none. A warpgroup one only where it runs.
const AttentionVariant* ConfiguredVariant(int head_dim, const AttentionKernelConfig& config,
                                          bool saturated_tiles, const Target& target) {
  const int key_groups = std::max(config.key_groups, 1);
  for (const AttentionVariant& variant : kAttentionVariants) {
    if (variant.kernel == AttentionKernel::kFloat32Tile || variant.head_dim != head_dim ||
        variant.mma != config.mma || variant.windows != config.windows ||
        variant.key_groups != key_groups || variant.saturated_tiles != saturated_tiles) {
      continue;
    }
    if (key_groups == 1 && variant.min_blocks != config.min_blocks_per_sm) continue;
    if (variant.mma == AttentionMma::kWarpgroup && !target.WgmmaRuns()) continue;
    return &variant;
  }
  return nullptr;
}

// Shared memory of the half-precision variant with `key_groups` groups (2 or 4: the two-group and
// short kernels) at `head_dim`; 0 when there is none.
size_t KeyGroupSharedBytes(int head_dim, int key_groups) {
  for (const AttentionVariant& variant : kAttentionVariants) {
    if (variant.kernel != AttentionKernel::kFloat32Tile && variant.head_dim == head_dim &&
        variant.key_groups == key_groups) {
      return static_cast<size_t>(variant.shared_bytes);
    }
  }
  return 0;
}

bool KeyGroupsFit(int head_dim, int key_groups, const AttentionDeviceLimits& limits) {
  const size_t bytes = KeyGroupSharedBytes(head_dim, key_groups);
  return bytes != 0 && bytes <= limits.max_shared_bytes_per_block;
}

// The float32 tile variant of `p` (3xTF32, or 1xTF32 with allow_tf32); null when none.
const AttentionVariant* Float32TileVariant(const AttentionProblem& p) {
  for (const AttentionVariant& variant : kAttentionVariants) {
    if (variant.kernel == AttentionKernel::kFloat32Tile && variant.head_dim == p.head_dim &&
        variant.split_tf32 == !p.allow_tf32) {
      return &variant;
    }
  }
  return nullptr;
}

AttentionKernelConfig ConfigFor(const AttentionProblem& p, const Target& target) {
  return p.config != nullptr ? *p.config : Heuristic(p, target);
}

// A tile kernel (half precision, or float32 tiles) runs `p`, not the SIMT float32 one.
bool RunsTileKernel(const AttentionProblem& p, const Target& target) {
  return p.dtype != DataType::kFloat32 || RunsFloat32Tiles(p, target);
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
size_t MaskedValueBytes(const AttentionProblem& p, const Target& target) {
  if (p.key_padding_mask == nullptr || !RunsTileKernel(p, target)) return 0;
  return AlignUp(static_cast<size_t>(TotalTokens(p)) * p.num_heads * p.head_dim *
                 DataTypeBytes(p.dtype));
}

}  // namespace

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

// Whether the float32 problem `p` runs the float32 tile kernel: the tile kernel's needs met
// (FitsTileKernel), and its shared memory fits a block of the device (H100 / H200 and A100 but
// for d = 128 there; not sm_86 / sm_89's 99 KB); the SIMT kernel otherwise.
bool RunsFloat32Tiles(const AttentionProblem& p, const Target& target) {
  if (p.dtype != DataType::kFloat32 || !FitsTileKernel(p)) return false;
  const AttentionVariant* variant = Float32TileVariant(p);
  return variant != nullptr &&
         static_cast<size_t>(variant->shared_bytes) <= target.limits.max_shared_bytes_per_block;
}

AttentionKernelConfig Heuristic(const AttentionProblem& p, const Target& target) {
  AttentionKernelConfig config;
  // The warpgroup kernels where they run (d = 64, half types, H100 / H200): computed windows at
  // every length they can be computed, else tables (LaunchConfig runs the mma.sync computed-window
  // kernels and their key groups for grids that leave SMs idle).
  const bool warpgroup = p.dtype != DataType::kFloat32 && p.head_dim == 64 && target.WgmmaRuns();
  if (CanComputeWindows(p) && (warpgroup || LongestSequence(p) <= kComputeWindowsMaxLength)) {
    config.windows = AttentionWindows::kComputed;
  }
  if (warpgroup) config.mma = AttentionMma::kWarpgroup;
  config.min_blocks_per_sm = DefaultMinBlocks(p.head_dim, config.windows);
  // The warpgroup computed-window kernel at four CTAs per SM where it applies: on the H200,
  // 7.5-10% faster than at three at L = 128 ... 8192 (kernels/attention/HISTORY.md, v9).
  if (warpgroup && config.windows == AttentionWindows::kComputed && ValuesCanShareC2P(p)) {
    config.min_blocks_per_sm = 4;
  }
  return config;
}

AttentionKernelConfig LaunchConfig(const AttentionProblem& p, const AttentionKernelConfig& config,
                                   const Target& target) {
  if (config.mma != AttentionMma::kWarpgroup || !CanComputeWindows(p) ||
      LongestSequence(p) > kComputeWindowsMaxLength) {
    return config;
  }
  if (!GridLeavesSmsIdle(p, target.limits)) return config;
  AttentionKernelConfig computed;
  computed.windows = AttentionWindows::kComputed;
  computed.min_blocks_per_sm = DefaultMinBlocks(p.head_dim, computed.windows);
  return computed;
}

int KeyGroups(const AttentionProblem& p, const AttentionKernelConfig& config,
              const AttentionDeviceLimits& limits) {
  // The key-group kernels are mma.sync ones: a warpgroup config runs one group, as named
  // (LaunchConfig has already switched the grids where those kernels pay off).
  if (config.windows != AttentionWindows::kComputed || config.mma == AttentionMma::kWarpgroup) {
    return 1;
  }
  if (config.key_groups != 0) return config.key_groups;
  // Two groups halve a CTA's serial chain of key tiles when one CTA's latency is the kernel's
  // time: the 64-row blocks x heads x sequences do not fill the SMs, each block has at least
  // two key tiles, and the device's blocks hold the two groups' shared memory (not sm_86 / sm_89
  // at d = 64: 122 KB against 99 KB).
  if (!GridLeavesSmsIdle(p, limits)) return 1;
  // Sequences <= kShortMaxKeys: the short kernel, whose warps each take a quarter of the keys of
  // 16 rows (H200, one 128-token sequence of 12 heads: 6.8 us against two groups' 9.7; faster
  // than both tile variants up to 5 such sequences, kernels/attention/HISTORY.md).
  if (CanRunShort(p) && KeyGroupsFit(p.head_dim, 4, limits)) return 4;
  return LongestSequence(p) > 64 && KeyGroupsFit(p.head_dim, 2, limits) ? 2 : 1;
}

bool CheckConfig(const AttentionProblem& p, const AttentionKernelConfig& config,
                 const Target& target) {
  if (p.dtype == DataType::kFloat32) {
    // The float32 paths (tiles in 1xTF32 or 3xTF32, chosen by allow_tf32, or the SIMT kernel
    // where tiles cannot run: RunsFloat32Tiles) are not chosen by the config: only the
    // heuristic's (the default config) names them.
    return config == Heuristic(p, target);
  }
  if (config.block_m != 64 || config.block_n != 64 || config.warps != 4) return false;
  if (config.windows == AttentionWindows::kComputed && !CanComputeWindows(p)) return false;
  if (config.key_groups < 0) return false;
  if (config.key_groups == 4 && !CanRunShort(p)) return false;
  if (config.mma == AttentionMma::kWarpgroup && config.min_blocks_per_sm == 4 &&
      !ValuesCanShareC2P(p)) {
    return false;
  }
  // Pinned key groups (the two-group and short kernels, computed windows and mma.sync) run
  // whatever register cap the config names.
  return ConfiguredVariant(p.head_dim, config, true, target) != nullptr;
}

std::vector<AttentionKernelConfig> Candidates(const AttentionProblem& p, const Target& target) {
  const AttentionKernelConfig heuristic = Heuristic(p, target);
  std::vector<AttentionKernelConfig> candidates{heuristic};
  if (p.dtype == DataType::kFloat32) return candidates;
  // Every one-group variant a config can name, in the table's order. No pinned key groups: a
  // tuner's workload family spans batch sizes, and the launch's choice (key_groups 0) takes the
  // short kernel or two groups only for grids that leave SMs idle (pinned, the short kernel runs
  // 16k-token batches of L = 128 1.36x slower).
  for (const AttentionVariant& variant : kAttentionVariants) {
    if (variant.kernel != AttentionKernel::kTile || variant.key_groups != 1 ||
        !variant.saturated_tiles || variant.head_dim != p.head_dim) {
      continue;
    }
    AttentionKernelConfig config;
    config.mma = variant.mma;
    config.windows = variant.windows;
    config.min_blocks_per_sm = variant.min_blocks;
    if (config != heuristic && CheckConfig(p, config, target)) candidates.push_back(config);
  }
  return candidates;
}

size_t WorkspaceBytes(const AttentionProblem& p, const Target& target) {
  const bool tables = RunsTileKernel(p, target) && HasPositions(p) &&
                      ConfigFor(p, target).windows == AttentionWindows::kTables;
  return (tables ? TableBytes(p) : 0) + MaskedValueBytes(p, target);
}

size_t MaxWorkspaceBytes(const AttentionProblem& p, const Target& target) {
  size_t bytes = 0;
  for (const AttentionKernelConfig& config : Candidates(p, target)) {
    AttentionProblem with = p;
    with.config = &config;
    bytes = std::max(bytes, WorkspaceBytes(with, target));
  }
  return bytes;
}

bool MakePlan(const AttentionProblem& p, const Target& target, Plan* plan) {
  *plan = Plan{};
  if (!Valid(p)) return false;
  const AttentionKernelConfig chosen = ConfigFor(p, target);
  if (!CheckConfig(p, chosen, target)) return false;
  if (p.dtype == DataType::kFloat32) {
    plan->config = chosen;
    if (!RunsFloat32Tiles(p, target)) return true;  // The SIMT kernel: no tiles, no workspace.
    plan->variant = static_cast<int>(Float32TileVariant(p) - kAttentionVariants);
  } else {
    plan->config = LaunchConfig(p, chosen, target);
    plan->key_groups = KeyGroups(p, plan->config, target.limits);
    // A pinned two-group or short config on a device whose blocks cannot hold its shared memory.
    if (plan->key_groups >= 2 && !KeyGroupsFit(p.head_dim, plan->key_groups, target.limits)) {
      return false;
    }
    // The four-CTA warpgroup kernel without its saturated-tile code where the batch can have no
    // saturated tile (no position terms: none at all).
    int lo = INT32_MIN;
    int hi = INT32_MAX;
    if (HasPositions(p)) SaturationThresholds(p.positions, &lo, &hi);
    AttentionKernelConfig launched = plan->config;
    launched.key_groups = plan->key_groups;
    const AttentionVariant* variant = nullptr;
    if (SaturationFree(lo, hi, (LongestSequence(p) + 63) / 64)) {
      variant = ConfiguredVariant(p.head_dim, launched, false, target);
    }
    if (variant == nullptr) variant = ConfiguredVariant(p.head_dim, launched, true, target);
    if (variant == nullptr) return false;
    plan->variant = static_cast<int>(variant - kAttentionVariants);
    plan->tail_ctas = variant->tail_ctas_per_sm * target.limits.multiprocessors;
  }
  size_t tables = 0;
  if (HasPositions(p)) {
    plan->compute_windows = plan->config.windows == AttentionWindows::kComputed;
    if (!plan->compute_windows) {
      // The C2P table first, then the P2C table (WorkspaceBytes sizes for what is used).
      plan->slots = ActiveSlots(p);
      if (p.pos_key != nullptr) plan->c2p_offset = 0;
      if (p.pos_query != nullptr) plan->p2c_offset = p.pos_key != nullptr ? OneTableBytes(p) : 0;
      tables = TableBytes(p);
    }
  }
  // Padded layout: the kernels read V through a copy whose masked rows are zero, after the tables.
  if (p.key_padding_mask != nullptr) plan->masked_values_offset = tables;
  return true;
}

}  // namespace dflash::kernels::attention_plan
