// The host plan of one disentangled attention forward: whether the problem is valid, which compiled
// variant (attention_variants.h) runs it with how many key groups, the slots its C2P / P2C tables
// hold, and where the tables and the padded layout's V copy lie in the workspace. Plain host code
// over the problem and a description of the device (AttentionTarget): it needs no GPU, and
// disentangled_attention.cu only fills kernel parameters from it and launches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention/attention_kernel_config.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/attention_variants.h"

namespace dflash::kernels::attention_plan {

// The device a plan is made for.
struct Target {
  AttentionDeviceLimits limits;
  bool wgmma_compiled = false;  // The build has the sm_90a image (AttentionWgmmaCompiled).
  // AttentionMma::kWarpgroup runs: an sm_90a image and a device of compute capability 9.0.
  bool WgmmaRuns() const { return wgmma_compiled && limits.compute_capability == 90; }
};

bool HasPositions(const AttentionProblem& p);
// The longest sequence (the padded length in the padded layout) and the tokens of the batch.
int LongestSequence(const AttentionProblem& p);
int TotalTokens(const AttentionProblem& p);

// Slots [first, first + count) that deltas of the longest sequence can reach (idx is monotone);
// table rows hold them at a stride rounded up to 8 (16-byte aligned window loads).
struct SlotRange {
  int first = 0;
  int count = 0;
  int stride = 0;
};
SlotRange ActiveSlots(const AttentionProblem& p);

// Deltas from which the slot no longer changes: >= hi reads table[+band], <= lo table[-band].
void SaturationThresholds(const RelativePositionTable& table, int* lo, int* hi);
// Whether no key tile of a batch whose longest sequence has `m_blocks` 64-row query blocks is
// saturated, for thresholds lo / hi (AttentionTilesSaturationFree).
bool SaturationFree(int lo, int hi, int64_t m_blocks);
// The widest band [-linear, linear] on which idx(delta) = idx(0) + delta (-1 when idx(1) is not
// idx(0) + 1). A 64 x 64 band tile whose deltas all lie in it skips the table lookup.
int LinearBand(const RelativePositionTable& table);

// Everything DisentangledAttentionForward refuses before looking at the config.
bool Valid(const AttentionProblem& p);
// Whether the kernel can compute the C2P / P2C windows of its band tiles from PosK / PosQ.
bool CanComputeWindows(const AttentionProblem& p);
// Whether the float32 problem `p` runs the float32 tile kernel on `target` (else the SIMT one).
bool RunsFloat32Tiles(const AttentionProblem& p, const Target& target);

// The public API's rules (disentangled_attention.h documents each) for a device `target`.
AttentionKernelConfig Heuristic(const AttentionProblem& p, const Target& target);
AttentionKernelConfig LaunchConfig(const AttentionProblem& p, const AttentionKernelConfig& config,
                                   const Target& target);
int KeyGroups(const AttentionProblem& p, const AttentionKernelConfig& config,
              const AttentionDeviceLimits& limits);
bool CheckConfig(const AttentionProblem& p, const AttentionKernelConfig& config,
                 const Target& target);
std::vector<AttentionKernelConfig> Candidates(const AttentionProblem& p, const Target& target);
size_t WorkspaceBytes(const AttentionProblem& p, const Target& target);
size_t MaxWorkspaceBytes(const AttentionProblem& p, const Target& target);

// One forward as it will run.
struct Plan {
  AttentionKernelConfig config;  // The variant launched (LaunchConfig of the chosen one).
  int key_groups = 1;            // Resolved: 1, 2 or 4.
  // Index into kAttentionVariants; -1: the SIMT float32 kernel (attention_fp32_kernel.cuh).
  int variant = -1;
  int tail_ctas = 0;  // Rank-major CTAs at the end of each launch (attention_block_order.h).
  // Position terms: whether band windows are computed from PosK / PosQ, and otherwise the table
  // slots (tables exist when c2p_offset or p2c_offset is not kNone).
  bool compute_windows = false;
  SlotRange slots;
  // Byte offsets into the workspace (kNone: not used by this launch).
  static constexpr size_t kNone = SIZE_MAX;
  size_t c2p_offset = kNone;
  size_t p2c_offset = kNone;
  size_t masked_values_offset = kNone;
  bool tables() const { return c2p_offset != kNone || p2c_offset != kNone; }
};

// The plan of `p` on `target`; false when the forward refuses it (cudaErrorInvalidValue): an
// invalid problem, a config that does not apply, or pinned key groups whose shared memory does
// not fit a block of the device.
bool MakePlan(const AttentionProblem& p, const Target& target, Plan* plan);

}  // namespace dflash::kernels::attention_plan
