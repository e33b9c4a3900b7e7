// Which compiled variant of the disentangled-attention forward runs a problem: the tuning profiles
// (engine/tuning) and dflash-tune name these, DisentangledAttentionForward honours them
// (AttentionProblem::config), and HeuristicAttentionConfig is what runs when none is given.
//
// Plain data with the CUDA toolkit alone: kernels/ depends on nothing of engine/.
#pragma once

#include <cstdint>

namespace dflash::kernels {

// Where band tiles take their C2P/P2C windows from (kernels/attention/attention_fwd_kernel.cuh).
enum class AttentionWindows : uint8_t {
  // Tables [H, T, slots] made by two cuBLAS GEMMs before the kernel; saturated tiles read one
  // slot per row and column. Any head dim; needs AttentionWorkspaceBytes of scratch.
  kTables = 0,
  // Band tiles compute their windows from PosK/PosQ with MMAs: no GEMMs, no workspace. The
  // mma.sync kernels run saturated tiles as band tiles (window MMAs on every tile); the warpgroup
  // one runs them as the table kernels do, its row and column terms computed. Head dims 32 and 64
  // only (warpgroup: 64).
  kComputed = 1,
};

// The tensor-core instructions of the tile kernel's Q K^T and P V.
enum class AttentionMma : uint8_t {
  // mma.sync m16n8k16 per warp (sm_80 and later): every variant.
  kSync = 0,
  // wgmma per warpgroup (sm_90a: H100 / H200): the table and computed-window kernels at d = 64,
  // where B operands are read from shared memory once per 64 rows instead of once per warp's 16
  // (attention_wgmma_tiles.cuh), and windows or PosK / PosQ rows arrive by TMA. Needs a device
  // of compute capability 9.0 and a build whose CUDA architectures include 90a
  // (AttentionWgmmaRuns).
  kWarpgroup = 1,
};

// One kernel variant. The tile shape is fixed today (64 query rows x 64 keys, 4 warps): the
// fields exist so that profiles name it and refuse a shape this binary does not have.
struct AttentionKernelConfig {
  int block_m = 64;
  int block_n = 64;
  int warps = 4;
  AttentionWindows windows = AttentionWindows::kTables;
  // Resident CTAs per SM the register budget is capped for (__launch_bounds__): tables 2 (the
  // d = 64 kernel then takes 168 registers and three CTAs fit anyway; a cap of 3 spills);
  // computed windows 3 (168 registers, no spills) or, at d = 64, 2 (uncapped, ~210 registers,
  // fewer reloads, one CTA per SM less). The warpgroup kernels: tables 2, computed windows 3
  // (142 registers) or 4 (128; V shares the C2P region so that four CTAs' shared memory fits:
  // the built-in choice on an H100 / H200 when there is a C2P term). The float32 paths ignore it
  // (the TF32 kernel runs uncapped, one CTA per SM: AttentionTraits::kMinBlocksPerSmTf32).
  int min_blocks_per_sm = 2;
  // Groups of `warps` warps splitting a CTA's key tiles (computed windows only; the groups
  // merge their softmax states at the end). 4 is the short-sequence kernel (sequences <=
  // kShortMaxKeys, attention_short_kernel.cuh): CTAs of 32 query rows whose 8 warps are 2 row
  // warps x 4 key warps of 32 keys. 0 chooses at launch when the grid would leave SMs idle
  // (fewer 64-row blocks x heads than SMs: one short sequence): 4 where the short kernel runs the
  // problem, else 2 when there are two key tiles; otherwise 1. 1, 2 or 4 pins it.
  int key_groups = 0;
  AttentionMma mma = AttentionMma::kSync;
};

// nvcc compiles kernels/ as C++17: no defaulted comparison.
inline bool operator==(const AttentionKernelConfig& a, const AttentionKernelConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.warps == b.warps &&
         a.windows == b.windows && a.min_blocks_per_sm == b.min_blocks_per_sm &&
         a.key_groups == b.key_groups && a.mma == b.mma;
}
inline bool operator!=(const AttentionKernelConfig& a, const AttentionKernelConfig& b) {
  return !(a == b);
}

// Short stable names used in profiles and logs: "tables", "computed".
const char* AttentionWindowsName(AttentionWindows windows);
// "sync", "wgmma".
const char* AttentionMmaName(AttentionMma mma);

}  // namespace dflash::kernels
