// Fused disentangled self-attention forward (DeBERTa-v2/v3) for packed variable-length batches.
//
// For every sequence b of the batch (tokens cu_seqlens[b] .. cu_seqlens[b+1]), head h, and local
// query / key positions i, j (delta = i - j):
//   S[i,j] = (Q_i . K_j + [c2p] Q_i . PosK[idx(delta)] + [p2c] K_j . PosQ[idx(delta)]) * scale
//   P[i,:] = softmax_j S[i,:] over the keys of the same sequence,   O_i = sum_j P[i,j] V_j
// with Q, K, V, O: [total_tokens, H, d] strided views (row stride in elements, head stride d);
// PosK, PosQ: [2k, H, d] per-layer projections of the relative embeddings; idx: the clamped
// log-bucket slot table over delta in [-band, band], constant beyond (engine/model/
// relative_position.h builds it). scale = 1 / sqrt(d * (1 + #types)).
//
// The [B, H, L, L] score matrix is never built. The position terms come from per-token tables
//   C2P[h, t, s] = Q_t . PosK[s],  P2C[h, t, s] = K_t . PosQ[s]   ([H, total_tokens, slots])
// made by one batched GEMM each over the slots the longest sequence can reach; inside the kernel,
// key tiles whose deltas all lie beyond the saturation thresholds read one slot per row and one
// per column instead of gathering per element
// (kernels/attention/DESIGN.md#saturation-and-tile-classes). For short sequences (d <= 64, L <=
// 1024 by default, 256 beside the warpgroup kernel; the config's `windows` chooses) the kernel
// computes the windows of these tables that each tile needs from PosK/PosQ itself, with no GEMMs
// and no workspace. On H100 / H200 the table kernel at d = 64 has a warpgroup variant (wgmma, TMA
// window copies; AttentionKernelConfig::mma).
//
// This header needs only the CUDA runtime API: kernels/ builds with the CUDA toolkit alone.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention/attention_kernel_config.h"
#include "kernels/attention/attention_problem.h"

namespace dflash::kernels {

// The built-in choice, what runs when problem.config is null: computed windows for d <= 64 and
// sequences <= 1024 (kComputeWindowsMaxLength: the crossover measured on the H200), tables
// otherwise; 64 x 64 tiles, 4 warps, the default register caps. Where the warpgroup kernels run
// (AttentionWgmmaRuns: an H100 / H200 and a build with sm_90a) half-precision d = 64 problems
// take them instead: computed windows at any length where they apply, else tables (and
// AttentionLaunchConfig adapts them to small grids). The float32 paths (strict, TF32) have a
// single variant: the default-constructed config.
AttentionKernelConfig HeuristicAttentionConfig(const AttentionProblem& problem);

// True when the build has the sm_90a image of the kernels (CUDA architectures include 90a).
bool AttentionWgmmaCompiled();
// True when AttentionMma::kWarpgroup runs on the current device: AttentionWgmmaCompiled() and a
// device of compute capability 9.0.
bool AttentionWgmmaRuns();

// The key groups (AttentionKernelConfig::key_groups) a launch of `config` on `problem` runs with
// on a device with `limits`: 1 for tables and for the warpgroup kernels (key groups are mma.sync
// kernels); the pinned count, or, automatic (0) with mma.sync computed windows, when the grid of
// 64-row blocks x heads x sequences does not fill the SMs: 4 (the short-sequence kernel)
// where it can run the problem (sequences <= kShortMaxKeys) and its shared memory fits a block,
// else 2 when the longest sequence has at least two key tiles and the two groups' shared memory
// fits; 1 otherwise. A pinned 2 or 4 that does not fit makes the forward return
// cudaErrorInvalidValue.
int AttentionKeyGroups(const AttentionProblem& problem, const AttentionKernelConfig& config,
                       const AttentionDeviceLimits& limits);

// The variant a launch of `config` (checked by CheckAttentionConfig) runs on a device with
// `limits`: `config` itself, except that a warpgroup kernel on a grid of 64-row blocks x heads x
// sequences that does not fill the SMs (one short sequence) runs the mma.sync computed-window
// kernels instead when they apply (d = 64, sequences <= 1024), whose key groups cut such a grid's
// latency: no workload family (tuned on full batches) measures that case.
AttentionKernelConfig AttentionLaunchConfig(const AttentionProblem& problem,
                                            const AttentionKernelConfig& config,
                                            const AttentionDeviceLimits& limits);

// True when no 64 x 64 tile of `problem`'s longest sequence is saturated (every delta of the
// tile, rows and keys past the sequence's end included, on the slot of +band or on that of
// -band): the four-CTA warpgroup kernel then runs a variant compiled without its saturated-tile
// code. DeBERTa-v3 positions: sequences of up to 576 tokens (nine 64-row blocks).
bool AttentionTilesSaturationFree(const AttentionProblem& problem);

// cudaSuccess when `config` names a variant this binary has and that can run `problem` (head dim,
// position table, dtype); cudaErrorInvalidValue otherwise. Does not validate the problem itself.
cudaError_t CheckAttentionConfig(const AttentionProblem& problem,
                                 const AttentionKernelConfig& config);

// True when `problem` (float32) runs the float32 tile kernel on the current device (3xTF32, or
// 1xTF32 with allow_tf32); the SIMT float32 kernel runs it otherwise (AttentionProblem::allow_tf32
// says when).
bool AttentionRunsFloat32Tiles(const AttentionProblem& problem);
// True when `problem` (float32, allow_tf32) runs the tile kernel in 1xTF32:
// AttentionRunsFloat32Tiles and allow_tf32.
bool AttentionRunsTf32(const AttentionProblem& problem);

// Every variant that can run `problem` (for the tuner), the heuristic's first. None pins
// key_groups: the launch picks them for the batch's grid (AttentionKeyGroups).
std::vector<AttentionKernelConfig> AttentionCandidateConfigs(const AttentionProblem& problem);

// Device scratch for the C2P/P2C tables: bytes needed for a problem with the variant it will run
// (problem.config, else the heuristic's): 0 when no position term, and when the kernel computes
// the position windows itself (by default: d <= 64 and sequences <= 1024, or <= 256 where the
// warpgroup kernel runs, HeuristicAttentionConfig); float32 tables (4-byte slots) for the float32
// tile kernel, none for the SIMT one. For float32 the answer depends on the current device and on
// the problem's pointers and strides (AttentionRunsFloat32Tiles): size it on the device and with
// the tensors it will run with, or with null pointers and zero strides, which give the upper
// bound. The padded layout adds a copy of V with masked keys' rows zeroed (H * d elements per
// padded row; not for the SIMT float32 kernel, which skips masked keys itself).
size_t AttentionWorkspaceBytes(const AttentionProblem& problem);
// The most any candidate variant of `problem` needs (what an autotuner's workspace must hold).
size_t AttentionMaxWorkspaceBytes(const AttentionProblem& problem);

// Runs the forward on `stream` with problem.config's variant (null: the heuristic's). `workspace`
// must hold AttentionWorkspaceBytes(problem) bytes (with the same config) and be 256-byte
// aligned; Q/K/V/out must be 16-byte aligned in half precision (float32 runs the SIMT kernel
// where the tiles cannot run, AttentionRunsFloat32Tiles); `blas` (bound to `stream` by this call,
// its math mode left at cublasCreate's default) computes the C2P/P2C tables. Returns
// cudaErrorInvalidValue for unsupported shapes, configs or a scale that is not positive and finite,
// and cudaErrorUnknown when cuBLAS fails.
cudaError_t DisentangledAttentionForward(const AttentionProblem& problem, void* workspace,
                                         cublasHandle_t blas, cudaStream_t stream);

}  // namespace dflash::kernels
