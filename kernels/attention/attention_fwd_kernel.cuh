// Tensor-core (mma.sync m16n8k16; m16n8k8 TF32 for float32 inputs, as 1xTF32 or, strict, 3xTF32)
// forward of the disentangled attention, FlashAttention-2 style:
// one CTA of 4 warps owns 64 query rows of one (sequence, head) and streams 64-key tiles through
// shared memory, keeping the online-softmax state (row max m, row sum l, output O) in registers.
//
// Per key tile the position bias is added to S = Q K^T before the softmax. The tile's delta range
// classifies it (kernels/attention/DESIGN.md#saturation-and-tile-classes):
//   saturated (every delta >= hi_threshold, or every delta <= lo_threshold): one slot s for the
//     whole tile, bias[i,j] = c_i + p_j with c_i = C2P[h, i, s] and p_j = P2C[h, j, s] staged in
//     shared memory; p_j is the initial value of the Q K^T accumulators and c_i joins the
//     exponent's per-row offset, so the element loop is FlashAttention-2's;
//   band (otherwise): the C2P rows of the tile's queries and the P2C rows of its keys, restricted
//     to the window of slots the tile's deltas reach (<= 127 of them), are copied into shared
//     memory next to K and V, and bias[i,j] = C2P_win[i, idx(i-j)] + P2C_win[j, idx(i-j)]. In
//     the linear region of idx (v3: |delta| <= 128) the window column is i - j + constant, read
//     at compile-time offsets without the slot table.
// With kComputeWindows (d <= 64) there are no tables: band tiles compute their windows from PosK /
// PosQ [2k, H, d] with MMAs (C2P_win = Q_blk . PosK_win^T, P2C_win = K_blk . PosQ_win^T, [64,
// <= 128] each), which replaces the two table GEMMs and their DRAM round trip. The mma.sync
// kernels run saturated tiles as band tiles too; the warpgroup one runs them as above, with c_i =
// Q_i . PosK[s] computed once per CTA and p_j folded into Q: (Q_i + PosQ[s]) . K_j = Q_i . K_j +
// p_j, one shifted Q tile per saturated side.
// No bias value is gathered from global memory element by element. K (with the tile's bias
// operands) and V are loaded one step ahead (FlashAttention-2's order: two barriers per tile in
// the mma.sync kernels; the warpgroup ones below).
// With Traits::kWgmma (sm_90a, d = 64) the CTA's 4 warps issue Q K^T and P V as one warpgroup
// (wgmma, attention_wgmma_tiles.cuh), and the Q, K, V tiles and band tiles' windows (tables) or
// PosK / PosQ rows (computed windows, then C2P_win / P2C_win by wgmma too) arrive by TMA
// (tma_sm90.h) instead of per-thread copies; V has two buffers, so V(n + 1) is requested with
// K(n + 1) and each thread waits for V(n) only before its P V.
// Shapes: Q/K/V tiles [64, D] in shared memory (rows padded by one 16-byte chunk so that ldmatrix
// rows fall on distinct banks; dense and 128-byte swizzled for wgmma); C2P/P2C windows [64,
// kSlotWindow]; S [16, 64] and O [16, D] per warp in registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "kernels/attention/attention_block_order.h"
#include "kernels/attention/attention_computed_windows.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/attention_softmax.cuh"
#include "kernels/attention/attention_sync_mainloop.cuh"
#include "kernels/attention/attention_tile_classes.cuh"
#include "kernels/attention/attention_traits.h"
#include "kernels/attention/attention_warp_tiles.cuh"
#include "kernels/attention/attention_wgmma_mainloop.cuh"
#include "kernels/attention/attention_wgmma_tiles.cuh"
#include "kernels/attention/mma_sm80.h"
#include "kernels/attention/tma_sm90.h"
#include "kernels/common/element_conversion.cuh"

namespace dflash::kernels {

// The online softmax's lazy rescale (the computed-window warpgroup kernels with saturated-tile
// code, four or three CTAs per SM): a warp's running row maxima move only when some row's tile
// maximum exceeds its own by more than this (exp2 domain), and then P <= 2^kLazyRescaleLog2. 0
// keeps the eager form's arithmetic to the bit (a warp only skips multiplications by 1, and l * c
// + sum is one FMA in both forms: every error of the record equal to v9.9's, HISTORY.md v9.12). 8,
// FlashAttention-4's choice, measured 1-4% faster but raised the BF16 error 2-4% above the peers'
// (a stale maximum leaves the largest P rounded where the eager form gives it exactly 1; HISTORY.md
// v9.10).
inline constexpr float kLazyRescaleLog2 = 0.0f;

// kComputeWindows: no C2P/P2C tables; band tiles (every tile in the mma.sync kernels) compute
// their windows from PosK / PosQ (params.pos_key / pos_query) with MMAs: C2P_win [64, span] =
// Q_blk [64, d] . PosK[w0 .. w0 + span - 1]^T and P2C_win [64, span] = K_blk [64, d] . PosQ[w0
// ..]^T, span <= kComputedWindow.
// kMinBlocks: the resident CTAs per SM the register budget is capped for (AttentionKernelConfig::
// min_blocks_per_sm; the Traits' kMinBlocksPerSm* are the defaults the heuristic picks).
// kKeyGroups: groups of kWarps warps that split the key tiles of the CTA's 64 query rows
// (group g takes tiles g, g + kKeyGroups, ...; each its own shared buffers and named barrier)
// and merge their softmax states at the end, as split-KV decoding does across CTAs: for batches
// too small to fill the GPU (one short sequence), where a CTA's latency is the kernel's.
// kSaturatedPossible: false compiles out the saturated-tile code, for batches whose longest
// sequence keeps every tile inside the band (the host checks: AttentionTilesSaturationFree; v3
// positions, L <= 576), where that code never runs but shapes the loop around it (A/B on the
// H200: 0.9% at L = 512).
template <typename Traits, bool kComputeWindows, int kMinBlocks, int kKeyGroups,
          bool kSaturatedPossible = true>
__global__ void __launch_bounds__(Traits::kThreads* kKeyGroups, kMinBlocks)
    DisentangledAttentionKernel(const AttentionParams<typename Traits::Element> params,
                                const __grid_constant__ AttentionTensorMaps maps) {
  static_assert(kKeyGroups == 1 || kKeyGroups == 2, "one or two key groups");
  static_assert(!kComputeWindows || Traits::kCanComputeWindows, "bias region too small");
  static_assert(!Traits::kWgmma || kKeyGroups == 1, "wgmma: one warpgroup per CTA");
  using Element = typename Traits::Element;
  constexpr int D = Traits::kHeadDim;
  constexpr int kN = Traits::kBlockN;
  constexpr int kNTiles = kN / 8;  // 8-column MMA tiles of S.
  constexpr int kDTiles = D / 8;   // 8-column MMA tiles of O.
  constexpr int kKSteps = D / 16;  // k-steps of Q K^T.

  // (Only the kernel with saturated-tile code orders its tail: its launches are the ones whose
  // query blocks differ in cost. Compiled out of the others, whose code stays as measured.)
  const LaunchBlock block = OrderLaunchBlock(
      static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z),
      static_cast<int>(gridDim.x), static_cast<int>(gridDim.y), static_cast<int>(gridDim.z),
      kSaturatedPossible ? params.tail_groups : 0);
  int m_block = block.m_block;
  const int head = block.head;
  const int sequence = params.sequence_offset + block.sequence;
  int seq_start;
  int seqlen;
  SequenceBounds(params, sequence, &seq_start, &seqlen);
  if (block.rank >= 0) {
    const int blocks = (seqlen + Traits::kBlockM - 1) / Traits::kBlockM;
    if (block.rank >= blocks) return;
    m_block = CenterOutBlock(block.rank, blocks);
  }
  const int m0 = m_block * Traits::kBlockM;
  if (m0 >= seqlen) return;

  // This thread's key group (its index in it: ThreadInGroup).
  const int key_group = kKeyGroups == 1 ? 0 : static_cast<int>(threadIdx.x / Traits::kThreads);
  // 1024-byte alignment: the wgmma tiles' swizzle follows address bits 7-9.
  extern __shared__ __align__(1024) unsigned char shared_bytes[];
  Element* sQ = reinterpret_cast<Element*>(shared_bytes);
  unsigned char* group_bytes = shared_bytes + Traits::kQBytes + key_group * Traits::kGroupBytes;
  // kValuesInC2P (the warpgroup computed-window kernel capped for four CTAs per SM): V has no
  // buffer of its own; V(n) is copied into the C2P region after tile n's bias has been read, and
  // tile n + 1's PosK rows after P V(n). The shared memory then fits four CTAs per SM.
  constexpr bool kValuesInC2P = Traits::ValuesInC2P(kComputeWindows, kMinBlocks);
  Element* sK = reinterpret_cast<Element*>(group_bytes);
  Element* sC2P = sK + (1 + (kValuesInC2P ? 0 : Traits::kValueBuffers)) * Traits::kTileElements;
  Element* sV = kValuesInC2P ? sC2P : sK + Traits::kTileElements;  // kValueBuffers tiles.
  Element* sP2C = sC2P + Traits::kBiasRegionElements;
  float* sPSaturated = reinterpret_cast<float*>(sP2C + Traits::kBiasRegionElements);
  unsigned char* common_bytes =
      kValuesInC2P ? reinterpret_cast<unsigned char*>(sPSaturated + Traits::kBlockN)
                   : shared_bytes + Traits::kQBytes + kKeyGroups * Traits::kGroupBytes;
  // The warpgroup kernels' TMA copies complete on: key_barrier (K and the tile's bias operands;
  // phase parity = tile index % 2), value_barriers[b] (V buffer b; tile n uses b = n % 2, parity
  // n / 2 % 2; kValuesInC2P: value_barriers[0] for V(n) (WarpgroupMainloop), and value_barriers[1]
  // for the PosK rows, issue_pos_key_rows, below), query_barrier (Q, once).
  uint64_t* key_barrier = reinterpret_cast<uint64_t*>(common_bytes);
  uint64_t* value_barriers = key_barrier + 1;
  uint64_t* query_barrier = key_barrier + 3;
  // [2][kBlockM]: hi, then lo.
  float* sCSaturated = reinterpret_cast<float*>(common_bytes + Traits::kBarrierBytes);
  // [4][D]: PosK at slot_hi, slot_lo, then PosQ (kSaturatedComputed only).
  Element* sSaturatedPositions = reinterpret_cast<Element*>(sCSaturated + 2 * Traits::kBlockM);
  // idx(delta) at sLut[delta + band] for |delta| <= band + kLutPad, in elements, or in bytes
  // (idx * sizeof(Element), kLutShift 1) for the warpgroup computed-window kernel (below).
  int16_t* sLut = reinterpret_cast<int16_t*>(reinterpret_cast<unsigned char*>(sSaturatedPositions) +
                                             Traits::kSaturatedPositionBytes) +
                  Traits::kLutPad;
  // The warpgroup kernels' wgmma operand tiles by their matrix descriptors (the low words,
  // TileDescriptor, wgmma_sm90.h): the dynamic shared memory's plus the tile's offset, one add
  // where each wgmma group built its descriptors from the tiles' addresses.
  [[maybe_unused]] const TileDescriptor shared_descriptor =
      SwizzledTileDescriptor(SharedAddress(shared_bytes));
  auto descriptor_of = [&](const Element* tile) {
    return AdvanceDescriptor(
        shared_descriptor,
        static_cast<uint32_t>(reinterpret_cast<const unsigned char*>(tile) - shared_bytes));
  };
  [[maybe_unused]] const TileDescriptor q_descriptor = descriptor_of(sQ);
  [[maybe_unused]] const TileDescriptor k_descriptor = descriptor_of(sK);
  [[maybe_unused]] const TileDescriptor c2p_descriptor = descriptor_of(sC2P);
  [[maybe_unused]] const TileDescriptor p2c_descriptor = descriptor_of(sP2C);
  [[maybe_unused]] const TileDescriptor v_descriptor = descriptor_of(sV);
  // The group's barrier inside the key loop (barrier 0, __syncthreads, spans the CTA).
  auto group_sync = [&]() {
    if constexpr (kKeyGroups == 1) {
      __syncthreads();
    } else {
      asm volatile("bar.sync %0, %1;" ::"r"(1 + key_group), "r"(Traits::kThreads) : "memory");
    }
  };
  const int warp =
      static_cast<int>(kKeyGroups == 1 ? threadIdx.x / 32 : threadIdx.x / 32 % Traits::kWarps);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int group = lane / 4;
  const int quad = lane % 4;

  // The warpgroup kernels copy Q, K and V tiles, band tiles' windows (tables) or PosK / PosQ rows
  // (computed windows) with TMA: one thread issues, every thread waits on the copy's mbarrier.
  // Rows past the sequence arrive as whatever follows it (the next sequence, or zeros past the
  // tensor): keys there are masked (their scores set to -inf) and V rows past the sequence are
  // zeroed before P V (0 x inf would be NaN).
  constexpr bool kTmaTiles = Traits::kWgmma;
  const Element* q_base = HeadRows(params.q, params.q_row_stride, seq_start, head, D);
  const Element* k_base = HeadRows(params.k, params.k_row_stride, seq_start, head, D);
  const Element* v_base = HeadRows(params.v, params.v_row_stride, seq_start, head, D);
  // The warpgroup kernels' TMA copies (attention_wgmma_mainloop.cuh).
  const WarpgroupCopies<Traits> copies{
      sK, sV, sC2P, sP2C, maps, key_barrier, value_barriers, value_barriers + 1, head, seq_start};
  // The family's schedule of copies and barriers around each key tile.
  const auto mainloop = [&] {
    if constexpr (kTmaTiles) {
      return WarpgroupMainloop<Traits, kComputeWindows, kValuesInC2P>{
          copies,       sQ,           query_barrier,
          q_descriptor, k_descriptor, kValuesInC2P ? c2p_descriptor : v_descriptor,
          seqlen};
    } else {
      return SyncMainloop<Traits, kKeyGroups, kComputeWindows>{sQ,     sK,     sV,    q_base,
                                                               v_base, params, seqlen};
    }
  }();
  mainloop.IssueQuery(m0);

  // The slot table in shared memory when it is small (v3: band 512, 1025 entries), at [delta +
  // band]; only the entries this CTA's tiles can reach: deltas m0 - 64 * n_blocks + 1 .. m0 + 63
  // (clamped to the band and its kLutPad-entry margins), 191 of them at L = 128.
  const bool lut_in_shared = kComputeWindows || params.band <= kSharedLutBand;
  const bool has_c2p = kComputeWindows ? params.pos_key != nullptr : params.c2p != nullptr;
  const bool has_p2c = kComputeWindows ? params.pos_query != nullptr : params.p2c != nullptr;
  const bool has_positions = has_c2p || has_p2c;
  // The warpgroup computed-window kernel runs saturated tiles as the table kernels do (no window),
  // with the row and column terms computed instead of read from tables: c_i = Q_i . PosK[s] once
  // per CTA, and p_j = K_j . PosQ[s] inside the tile's Q K^T, whose A is Q' = Q + PosQ[s]
  // (StoreQueriesWithColumnTerm) in the P2C region, which saturated tiles leave unused: tiles go
  // from slot_hi's side through the band to slot_lo's, so Q'^hi is stored once before the first
  // tile and Q'^lo once at the first slot_lo tile, after the band tiles' P2C windows are read. The
  // mma.sync one runs them as band tiles.
  constexpr bool kSaturatedComputed = kComputeWindows && Traits::kWgmma;
  // The warpgroup computed-window kernel's shared slot table holds byte offsets (idx *
  // sizeof(Element)): a table-path gather addresses its window element with one add (row base +
  // offset) where an element index took an add and a shift-add (SASS of the four-CTA kernel: 53
  // -> 18 LEA). Alone it measured no faster on the H200 (same-call A/B, HISTORY.md v9.4: the band
  // tile's chain of waits bounds it, not its instruction count); it ships with the barrier
  // change at the end of the tile loop, measured together.
  constexpr int kLutShift = kSaturatedComputed ? 1 : 0;
  static_assert(!kSaturatedComputed || sizeof(Element) == 2, "byte offsets of 16-bit windows");
  constexpr bool kSaturatedTiles = !kComputeWindows || kSaturatedComputed;
  // Whether any key tile of this CTA is saturated: the first tile's smallest delta or the last
  // one's largest is past a threshold (short sequences have none: no row terms to compute).
  const int last_n0 = (seqlen - 1) / kN * kN;
  const bool has_saturated_tiles = kSaturatedPossible && has_positions &&
                                   (m0 - (kN - 1) >= params.hi_threshold ||
                                    m0 + Traits::kBlockM - 1 - last_n0 <= params.lo_threshold);
  // This thread's two rows (local), as query positions in the sequence.
  const int row_local[2] = {warp * 16 + group, warp * 16 + group + 8};
  const int query[2] = {m0 + row_local[0], m0 + row_local[1]};
  const int64_t table_base = static_cast<int64_t>(head) * params.total_tokens + seq_start;

  // Class of the key tile at n0 (attention_tile_classes.cuh). lut_global: read the slot table in
  // global memory (the first tile's copies are issued before the shared copy exists).
  // (The mma.sync computed-window kernels run saturated tiles as band tiles.)
  constexpr bool kClassifySaturated = kSaturatedTiles && kSaturatedPossible;
  auto classify = [&](int n0, bool lut_global = false) {
    return ClassifyTile<Traits, kComputeWindows, kClassifySaturated, kLutShift>(
        params, m0, n0, has_positions, lut_in_shared && !lut_global, sLut);
  };

  // Asynchronous copies of key tile n0's K rows and bias operands (C2P/P2C windows of a band
  // tile, or PosK / PosQ rows), and, by TMA, of its V rows (the mma.sync kernels copy V at the
  // top of the tile). The saturated column term p_j = P2C[h, j, s] (unscaled) is read
  // into a register here and stored to shared memory by store_p_saturated once the current tile is
  // done with it.
  // Held in the input type and converted at the store: converted at the load, the conversion
  // waited there for the global read (ncu, L = 8192: 7% of the warpgroup kernel's stall samples).
  Element p_saturated_next = Element();
  // The TMA copies of key tile n0 (thread 0 only; every thread is done with the previous K,
  // windows and the V buffer this tile's V goes to: the barrier before the call, or none yet).
  // Classified by the copying thread alone: only `tile.saturated` (thresholds) is used past
  // issue_k_and_bias's copies, so the other warps skip the slot-table load of window0, which they
  // waited for at every tile (ncu, L = 1024: 1.5% of the samples). The copying thread keeps
  // window0 for the same tile's PosK rows (kValuesInC2P: issued later, after P V).
  int copied_window0 = 0;
  auto issue_tma_copies = [&](int n0, bool lut_global) {
    const TileClass copied = classify(n0, lut_global);
    copied_window0 = copied.window0;
    copies.template IssueTile<kComputeWindows, kValuesInC2P>(n0, copied, has_positions, has_c2p,
                                                             has_p2c, table_base, m0);
  };
  // tma_copies false: the prologue issued tile 0's TMA copies already (issue_tma_copies).
  auto issue_k_and_bias = [&](int n0, bool tma_copies = true) {
    const TileClass tile = classify(n0);
    if constexpr (kTmaTiles) {
      if (tma_copies && threadIdx.x == 0) issue_tma_copies(n0, false);
    } else {
      LoadTile<Traits, kKeyGroups, false, !kComputeWindows>(sK, k_base, params.k_row_stride, n0,
                                                            seqlen);
    }
    if constexpr (kComputeWindows && !kTmaTiles) {
      LoadPositionRows<Traits, kKeyGroups>(sC2P, sP2C, params, head, tile.window0, tile.span,
                                           has_c2p, has_p2c);
    } else if (!kTmaTiles && has_positions && !tile.saturated) {
      LoadTableWindows<Traits, kKeyGroups>(sC2P, sP2C, params, table_base, m0, n0, seqlen,
                                           tile.window0);
    } else if (has_positions && tile.saturated && ThreadInGroup<Traits, kKeyGroups>() < kN &&
               params.p2c != nullptr) {
      const int key = min(n0 + ThreadInGroup<Traits, kKeyGroups>(), seqlen - 1);
      const int slot = tile.high ? params.slot_hi : params.slot_lo;
      p_saturated_next =
          params.p2c[(table_base + key) * params.slot_stride + slot - params.slot_base];
    }
  };
  // kValuesInC2P: thread 0 issues tile n + 1's PosK rows after P V(n) if it is a band tile
  // (pos_key_barrier, parity: the band tiles before it, pos_key_tiles, % 2; V(n)'s copy:
  // WarpgroupMainloop).
  uint64_t* pos_key_barrier = value_barriers + 1;
  int pos_key_tiles = 0;
  auto issue_pos_key_rows = [&](int window0) { copies.IssuePosKeyRows(window0); };
  // The first tile's (the prologue's table load is still under way: lut_global).
  auto issue_first_pos_key = [&]() {
    const TileClass tile = classify(0, true);
    if (has_c2p && !tile.saturated) issue_pos_key_rows(tile.window0);
  };
  auto store_p_saturated = [&]() {
    const int thread = ThreadInGroup<Traits, kKeyGroups>();
    if (!kComputeWindows && thread < kN) sPSaturated[thread] = ToFloat(p_saturated_next);
  };

  // The first tile's copies (K, PosK / PosQ rows or windows, V) go out before the slot table
  // is staged, their window from the table in global memory: they then arrive while the CTA
  // copies the table, instead of after it and the barrier that publishes it.
  if constexpr (kTmaTiles) {
    if (threadIdx.x == 0) {
      issue_tma_copies(0, true);
      if constexpr (kValuesInC2P) issue_first_pos_key();
    }
  }
  if constexpr (kSaturatedComputed) {
    // PosK / PosQ rows [4][D] of the two saturated slots, one 16-byte chunk per thread.
    if (has_saturated_tiles && threadIdx.x < 4 * Traits::kChunksPerRow) {
      const int row = static_cast<int>(threadIdx.x) / Traits::kChunksPerRow;
      const int column =
          static_cast<int>(threadIdx.x) % Traits::kChunksPerRow * Traits::kChunkElements;
      const Element* table = row < 2 ? params.pos_key : params.pos_query;
      const int slot = row % 2 == 0 ? params.slot_hi : params.slot_lo;
      uint4 chunk = make_uint4(0, 0, 0, 0);
      if (table != nullptr) {
        chunk = *reinterpret_cast<const uint4*>(table + slot * params.pos_row_stride +
                                                static_cast<int64_t>(head) * D + column);
      }
      *reinterpret_cast<uint4*>(sSaturatedPositions + row * D + column) = chunk;
    }
  }
  if (lut_in_shared && has_positions) {
    const int reach = (seqlen + kN - 1) / kN * kN;
    const int first = max(-Traits::kLutPad, m0 - reach + 1 + params.band);
    const int last = min(2 * params.band + Traits::kLutPad, m0 + Traits::kBlockM - 1 + params.band);
    for (int i = first + static_cast<int>(threadIdx.x); i <= last;
         i += Traits::kThreads * kKeyGroups) {
      sLut[i] = static_cast<int16_t>(params.lut[max(0, min(2 * params.band, i))] << kLutShift);
    }
  }
  // kBothWindows (the table kernels and the warpgroup computed-window one): with one position
  // term, the other's window holds zeros, never written, and band tiles add both windows without
  // testing which terms exist per element (each test a predicate on every element's shared
  // load). The register-capped mma.sync computed-window kernels keep the tests: without them
  // ptxas spilled at d = 64.
  constexpr bool kBothWindows = !kComputeWindows || Traits::kWgmma;
  // Band tiles' bias from their windows (attention_tile_classes.cuh).
  const BandBias<Traits, kBothWindows> band_bias{sC2P,      sP2C, sLut,    query,
                                                 row_local, quad, has_c2p, has_p2c};
  if (kBothWindows && has_positions && !(has_c2p && has_p2c)) {
    Element* absent = has_c2p ? sP2C : sC2P;
    for (int i = ThreadInGroup<Traits, kKeyGroups>(); i < Traits::kBiasRegionElements;
         i += Traits::kThreads) {
      absent[i] = Element();
    }
  }
  // The slot table copy is read by every thread when it classifies tiles (and the mbarriers are
  // initialised before anyone waits on them).
  __syncthreads();

  // The row terms of saturated tiles, c_i = C2P[h, i, s] * scale_log2 for s = slot_hi, slot_lo,
  // in shared memory (registers are scarce; published by the prologue's barrier).
  if (!kComputeWindows && threadIdx.x < Traits::kBlockM) {
    float c_hi = 0.0f;
    float c_lo = 0.0f;
    if (params.c2p != nullptr) {
      // A saturated slot outside the batch's slot range belongs to no tile of this batch.
      const Element* row =
          params.c2p +
          (table_base + min(m0 + static_cast<int>(threadIdx.x), seqlen - 1)) * params.slot_stride;
      const int hi = params.slot_hi - params.slot_base;
      const int lo = params.slot_lo - params.slot_base;
      if (hi >= 0 && hi < params.slots) c_hi = ToFloat(row[hi]) * params.scale_log2;
      if (lo >= 0 && lo < params.slots) c_lo = ToFloat(row[lo]) * params.scale_log2;
    }
    sCSaturated[threadIdx.x] = c_hi;
    sCSaturated[Traits::kBlockM + threadIdx.x] = c_lo;
  }

  // Software pipeline over key tiles, two barriers per tile (FlashAttention-2's order):
  //   KB(n), the K rows and bias operands of tile n, load during tile n-1's softmax and P V;
  //   V(n) loads during tile n's Q K^T and bias (TMA tiles: V(n + 1) is issued with KB(n + 1)
  //   into the other V buffer, and tile n waits for V(n) only before its P V; the computed-window
  //   kernel then needs no barrier at the top of the tile).
  // Prologue: KB of the group's first tile follows Q (issued above; TMA tiles: its copies too,
  // before the slot table); only Q is waited for here. (A group without tiles commits an empty
  // copy group: the counts stay the same.)
  if (kKeyGroups == 1 || key_group * kN < seqlen) {
    issue_k_and_bias(key_group * kN, false);
    store_p_saturated();
  }
  mainloop.WaitQuery();

  // Q fragments of this warp's 16 rows, for every k-step (sQ is never overwritten: with
  // computed windows they are reloaded per tile rather than held across the window MMAs).
  uint32_t q_fragments[kKSteps][4];
  auto load_q_fragments = [&]() { LoadRowFragments<Traits>(q_fragments, sQ, warp * 16, lane); };
  if constexpr (!Traits::kWgmma && !Traits::kTf32) load_q_fragments();
  if constexpr (kSaturatedComputed) {
    static_assert(Traits::kThreads == 2 * Traits::kBlockM, "a thread per row and slot");
    // The row terms c_i = Q_i . PosK[s] * scale_log2 (s = slot_hi, slot_lo) from the landed Q
    // tile (swizzled: chunk c of row r at c ^ (r % 8)); the loop's first barrier publishes them.
    const int row = static_cast<int>(threadIdx.x) % Traits::kBlockM;
    const int which = static_cast<int>(threadIdx.x) / Traits::kBlockM;  // 0: hi, 1: lo.
    float c = 0.0f;
    if (has_saturated_tiles && has_c2p) {
      const Element* pos = sSaturatedPositions + which * D;
#pragma unroll
      for (int chunk = 0; chunk < Traits::kChunksPerRow; ++chunk) {
        // One 16-byte load of each operand per chunk.
        const uint4 q_chunk = *reinterpret_cast<const uint4*>(
            sQ + row * Traits::kRowStride + ((chunk ^ (row % 8)) * Traits::kChunkElements));
        const uint4 pos_chunk =
            *reinterpret_cast<const uint4*>(pos + chunk * Traits::kChunkElements);
        const Element* q_elements = reinterpret_cast<const Element*>(&q_chunk);
        const Element* pos_elements = reinterpret_cast<const Element*>(&pos_chunk);
#pragma unroll
        for (int e = 0; e < Traits::kChunkElements; ++e) {
          c = fmaf(ToFloat(q_elements[e]), ToFloat(pos_elements[e]), c);
        }
      }
    }
    if (has_saturated_tiles) {
      sCSaturated[which * Traits::kBlockM + row] = c * params.scale_log2;
      // Q'^hi for the slot_hi tiles, which come first (tile 0's copies wrote nothing to the P2C
      // region: it is saturated).
      if (has_p2c && m0 - (kN - 1) >= params.hi_threshold) {
        StoreQueriesWithColumnTerm<Traits>(sP2C, sQ, sSaturatedPositions + 2 * D);
        FenceSharedForAsyncProxy();
      }
      // Published here: with TMA tiles the loop has no barrier before the first tile's use.
      __syncthreads();
    }
  }

  float o[kDTiles][4];
#pragma unroll
  for (int t = 0; t < kDTiles; ++t) {
    o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  }
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};

  const int n_blocks = (seqlen + kN - 1) / kN;
  for (int n_block = key_group; n_block < n_blocks; n_block += kKeyGroups) {
    const int n0 = n_block * kN;
    const bool has_next = n_block + kKeyGroups < n_blocks;
    // KB(n) has landed (the mma.sync kernels: V(n) goes out).
    mainloop.BeginTile(n_block, n0, group_sync);
    const TileClass tile = classify(n0);

    if constexpr (kComputeWindows && Traits::kWgmma) {
      if (has_positions && !tile.saturated) {
        // As below, by warpgroup MMAs (attention_wgmma_mainloop.cuh).
        const WarpgroupWindowTiles<Traits> wgmma_windows{
            sC2P, sP2C, q_descriptor, k_descriptor, c2p_descriptor, p2c_descriptor, pos_key_barrier,
            warp, lane};
        ComputeBandWindowsWgmma<Traits, kValuesInC2P, kSaturatedPossible>(
            wgmma_windows, tile.span, has_c2p, has_p2c, pos_key_tiles, group_sync);
      }
    } else if constexpr (kComputeWindows) {
      if (has_positions) {
        // The bias regions hold PosK / PosQ rows w0 .. w0 + 16 pairs - 1; replace them by the C2P /
        // P2C windows of this warp's 16 query rows and 16 keys (each read whole PosK / PosQ rows,
        // so a barrier separates the reads from the in-place stores).
        ComputeTileWindows<Traits>(q_fragments, sQ, sK, sC2P, sP2C, tile.span, has_c2p, has_p2c,
                                   warp, lane, group_sync);
        group_sync();
        load_q_fragments();
      }
    }

    // S = Q K^T: [16, 64] per warp, plus p_j on saturated tiles: the accumulators start at the
    // column term (exact, in float32), so the bias costs no per-element instruction there.
    // (The warpgroup computed-window kernel's first wgmma k-step overwrites s on saturated and
    // plain tiles: no zeroing; its band tiles start s at their bias. The table kernel keeps the
    // zeroing: with two forms of its Q K^T it ran 3% slower at L = 8192.)
    float s[kNTiles][4];
    const bool column_terms_first = !kSaturatedComputed && has_positions && tile.saturated;
    if (column_terms_first) {
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) {
        const float2 p = *reinterpret_cast<const float2*>(sPSaturated + t * 8 + quad * 2);
        s[t][0] = s[t][2] = p.x;
        s[t][1] = s[t][3] = p.y;
      }
    } else if constexpr (!kSaturatedComputed) {
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
    }
    // C2P_win + P2C_win per score of a band tile from the linear slots or the shared table.
    auto window_bias = [&](float(&acc)[kNTiles][4], bool assign) {
      band_bias.template AddWindows<kLutShift>(acc, params, tile, n0, assign);
    };
    if constexpr (kSaturatedComputed) {
      const WarpgroupWindowTiles<Traits> wgmma_tiles{
          sC2P, sP2C, q_descriptor, k_descriptor, c2p_descriptor, p2c_descriptor, pos_key_barrier,
          warp, lane};
      WarpgroupComputedScores<Traits>(s, wgmma_tiles, tile, sQ, sSaturatedPositions, params, m0, n0,
                                      has_positions, has_p2c, window_bias, group_sync);
    } else {
      mainloop.Scores(s, q_fragments, warp, lane);
    }

    // Scores to the exp2 domain: exp2 argument = s * score_scale + row_offset. Every tile keeps
    // s unscaled and folds the scale (and, saturated, the row term c_i) into the exponent's FFMA,
    // as FlashAttention-2 does; band tiles add C2P_win + P2C_win per element here (a table lookup
    // and two LDS, or two LDS at compile-time offsets on linear tiles), except in the warpgroup
    // computed-window kernel, where they start Q K^T's accumulators. The tile class is uniform
    // across the CTA: no divergence.
    const float score_scale = params.scale_log2;
    float row_offset[2] = {0.0f, 0.0f};
    if (!has_positions) {
      // Plain attention: no bias.
    } else if (tile.saturated) {
      const float* c_saturated = sCSaturated + (tile.high ? 0 : Traits::kBlockM);
      row_offset[0] = c_saturated[row_local[0]];
      row_offset[1] = c_saturated[row_local[1]];
    } else if (kSaturatedComputed) {
      // Band tile: the bias was added with Q K^T.
    } else if (tile.linear || (kSaturatedTiles && lut_in_shared)) {
      window_bias(s, false);
    } else {
      // Tiles of any delta (the mma.sync computed-window kernels run saturated tiles here too), or
      // the table in global memory: deltas clamped to the band.
      if (lut_in_shared) {
        band_bias.AddClamped(s, params, tile, n0,
                             [&](int entry) { return static_cast<int>(sLut[entry]) >> kLutShift; });
      } else {
        band_bias.AddClamped(s, params, tile, n0,
                             [&](int entry) { return __ldg(params.lut + entry); });
      }
    }
    // Keys past the sequence end or masked by the padding mask: only tiles that have any.
    if (n0 + kN > seqlen || params.key_padding_mask != nullptr) {
      MaskInvalidKeys(s, params, seq_start, seqlen, n0, quad);
    }

    // Every warp is done with sK and the bias operands of this tile (and with the V buffer of
    // tile n - 1): start the next tile's. (Band tiles' computed windows are the only stores to
    // shared memory a TMA copy then overwrites.)
    mainloop.ReleaseKeyTile(n0, has_next, kComputeWindows && has_positions && !tile.saturated,
                            issue_k_and_bias, group_sync);

    // Online softmax (exp2 domain). Row r's tile maximum, scaled to the exp2 domain (score_scale >
    // 0, so the maximum commutes with the affine map, and -inf stays -inf).
    auto scaled_tile_max = [&](int r) {
      return fmaf(QuadRowMax(s, r), score_scale, row_offset[r]);
    };
    // Row r's P and l against `reference` (attention_softmax.cuh).
    auto exponentiate_row = [&](int r, float reference, float sum_scale) {
      ExponentiateRow(s, row_sum[r], r, score_scale, row_offset[r] - reference, sum_scale);
    };
    // The warpgroup computed-window kernels with saturated-tile code (four CTAs per SM past
    // L = 576, or three) skip the rescale where no row's maximum rises; the others rescale every
    // tile. Same-call A/B on the H200 against the eager form (HISTORY.md v9.11): -0.5% at L = 2048,
    // -2.1% at 8192, 0 at 512 and 1024. The branch made plain attention (the warpgroup table
    // kernel) 2-3% slower at L <= 2048 in the same call, and the mma.sync kernels' rows 2-8%
    // slower in a full table (HISTORY.md v9.10): there row maxima rise on most tiles.
    if constexpr (Traits::kWgmma && kComputeWindows && kSaturatedPossible) {
      // Lazily (FlashAttention-4's rule): a warp moves its rows' running maxima m only when some
      // row's tile maximum x exceeds its m by more than kLazyRescaleLog2; otherwise m stays, and
      // the tile's P = 2^(s - m) <= 2^kLazyRescaleLog2. Exact in real arithmetic: l and O use the
      // same m, and the result O / l does not depend on which m that is. A warp that skips saves 32
      // FMUL and 2 MUFU.
      float tile_max[2];
      bool raise = false;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = scaled_tile_max(r);
        // (m = -inf: raised by any valid key.)
        raise |= tile_max[r] > row_max[r] + kLazyRescaleLog2;
      }
      // l's factor: 1 (l + sum, exact) unless the rows' maxima move.
      float sum_scale[2] = {1.0f, 1.0f};
      // (Marked unlikely: without the hint ptxas serialised every wgmma of the four-CTA kernel with
      // saturated tiles, C7511, in each of five other forms of this branch.)
      if (__builtin_expect(__any_sync(0xffffffffu, raise), 0)) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          sum_scale[r] = MoveRowMax(o, row_max, r, fmaxf(row_max[r], tile_max[r])).correction;
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) exponentiate_row(r, SoftmaxReference(row_max[r]), sum_scale[r]);
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const MovedMax moved = MoveRowMax(o, row_max, r, fmaxf(row_max[r], scaled_tile_max(r)));
        exponentiate_row(r, moved.reference, moved.correction);
      }
    }

    // O += P V, P taken straight from the S accumulators.
    mainloop.Values(o, s, n_block, n0, lane, group_sync);

    // The next saturated column term (read since the barrier above, where every warp was done
    // with this tile's) goes to shared memory; the next iteration's first barrier publishes it.
    if (has_next) store_p_saturated();
    if constexpr (kValuesInC2P) {
      // Every warp is done with V(n): the next band tile's PosK rows may overwrite it. Before a
      // saturated tile (no PosK rows; its V goes out after its mid-tile barrier, which every warp
      // reaches past this P V), or without a C2P term, nothing is copied here: no barrier (with
      // the byte-offset slot table, same-call A/B on the H200: -0.4% at L = 2048, -0.8% at 4096,
      // -1.0% at 8192).
      const int next_n0 = n0 + kN;
      // (TileClass::saturated's test, written out: classify here put 8 more instructions into the
      // measured four-CTA kernel.)
      const bool next_saturated =
          kSaturatedPossible && (m0 - (next_n0 + kN - 1) >= params.hi_threshold ||
                                 m0 + Traits::kBlockM - 1 - next_n0 <= params.lo_threshold);
      if (has_next && has_c2p && !next_saturated) {
        group_sync();
        // (Tile n + 1's window0, from its K / PosQ copies at this tile's mid-tile barrier.)
        if (threadIdx.x == 0) issue_pos_key_rows(copied_window0);
      }
    }
  }

  if constexpr (kKeyGroups == 2) {
    // Merge group 1's state into group 0's: the two threads at the same index in their groups
    // own the same rows and output columns. m = max(m0, m1); O = O0 2^(m0 - m) + O1 2^(m1 - m),
    // l likewise (exp2 domain; a group that saw no valid key has m = -inf and weight 0). The
    // state passes through group 1's buffers, value-major ([value][thread]: no bank conflicts).
    constexpr int kValues = kDTiles * 4 + 4;
    static_assert(kValues * Traits::kThreads * sizeof(float) <= Traits::kGroupBytes,
                  "merge state fits group 1's buffers");
    float* exchange =
        reinterpret_cast<float*>(shared_bytes + Traits::kQBytes + Traits::kGroupBytes);
    const int thread = ThreadInGroup<Traits, kKeyGroups>();
    __syncthreads();  // Every group is done with its buffers.
    if (key_group == 1) {
#pragma unroll
      for (int t = 0; t < kDTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) exchange[(t * 4 + e) * Traits::kThreads + thread] = o[t][e];
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        exchange[(kDTiles * 4 + r) * Traits::kThreads + thread] = row_max[r];
        exchange[(kDTiles * 4 + 2 + r) * Traits::kThreads + thread] = row_sum[r];
      }
    }
    __syncthreads();
    if (key_group == 1) return;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float other_max = exchange[(kDTiles * 4 + r) * Traits::kThreads + thread];
      const float other_sum = exchange[(kDTiles * 4 + 2 + r) * Traits::kThreads + thread];
      const float merged = fmaxf(row_max[r], other_max);
      const float reference = SoftmaxReference(merged);
      const float mine = FastExp2(row_max[r] - reference);
      const float theirs = FastExp2(other_max - reference);
      row_max[r] = merged;
      row_sum[r] = row_sum[r] * mine + other_sum * theirs;
#pragma unroll
      for (int t = 0; t < kDTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float other = exchange[(t * 4 + 2 * r + e) * Traits::kThreads + thread];
          o[t][2 * r + e] = o[t][2 * r + e] * mine + other * theirs;
        }
      }
    }
  }

  // Normalise and store the two rows of this thread.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = QuadRowSum(row_sum[r]);
    if (query[r] >= seqlen) continue;
    const float inverse = InverseRowSum(sum);
    Element* out_row =
        params.out + static_cast<int64_t>(seq_start + query[r]) * params.out_row_stride + head * D;
#pragma unroll
    for (int t = 0; t < kDTiles; ++t) {
      StorePair(out_row + t * 8 + quad * 2, o[t][2 * r] * inverse, o[t][2 * r + 1] * inverse);
    }
    if (params.lse != nullptr && quad == 0) {
      params.lse[static_cast<int64_t>(head) * params.total_tokens + seq_start + query[r]] =
          RowLogSumExp(row_max[r], sum);
    }
  }
}

}  // namespace dflash::kernels
