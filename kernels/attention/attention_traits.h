// Compile-time shapes of the attention kernels: tile sizes, shared-memory layouts and register
// caps of the 64 x 64 tile kernels (attention_fwd_kernel.cuh) and of the short-sequence kernel
// (attention_short_kernel.cuh). Plain constants with no device code: the host plan
// (attention_plan.h) sizes launches from the same values the kernels are built with.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/attention/attention_params.h"

namespace dflash::kernels {

// kWgmma_: Q K^T and P V by sm_90a warpgroup MMAs (wgmma_sm90.h) over 128-byte-swizzled dense Q,
// K, V tiles, in place of mma.sync over padded ones; d = 64 only (tables or computed windows).
// Element_ float: the float32 table kernel, mma.sync m16n8k8 (attention_warp_tiles.cuh's *Tf32),
// float tiles, windows and tables: 1xTF32 with AttentionProblem::allow_tf32, else (kSplitTf32_,
// strict float32) 3xTF32, each operand split into two TF32 parts and three MMAs per product.
template <int kHeadDim_, typename Element_, bool kWgmma_ = false, bool kSplitTf32_ = false>
struct AttentionTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kWgmma = kWgmma_;
  static constexpr bool kTf32 = std::is_same_v<Element, float>;
  static constexpr bool kSplitTf32 = kSplitTf32_;
  static_assert(!kSplitTf32 || kTf32, "3xTF32 splits float32 operands");
  // Elements per 16-byte chunk (cp.async, ldmatrix row).
  static constexpr int kChunkElements = 16 / static_cast<int>(sizeof(Element));
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = 64;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  // Resident CTAs per SM the register budget is capped for. Shared memory allows three at
  // d <= 64, which needs <= 168 registers: the table kernel gets there uncapped (168 at d = 64
  // with CUDA 13.0, the warpgroup one 153; capping it at 168 made ptxas spill), the
  // computed-window kernels (mma.sync ~210 uncapped; warpgroup 142) are capped, without spills.
  // The warpgroup computed-window kernel is also built for four CTAs per SM (kMinBlocks 4: 128
  // registers with its window halves issued one after the other, kValuesInC2P's layout).
  static constexpr int kMinBlocksPerSm = 2;
  static constexpr int kMinBlocksPerSmComputed = kHeadDim <= 64 ? 3 : 2;
  // TF32: float tiles and windows take 127 KB at d = 64, one CTA per SM; registers uncapped.
  static constexpr int kMinBlocksPerSmTf32 = 1;
  // Elements per shared-memory row of Q, K, V: padded by one chunk for ldmatrix (rows 16 bytes
  // apart in bank terms), dense and swizzled for wgmma.
  static constexpr int kRowStride = kWgmma ? kHeadDim : kHeadDim + kChunkElements;
  static constexpr int kTileElements = kBlockM * kRowStride;
  static constexpr int kWindowElements = kBlockM * kSlotWindow;
  // The computed-window mode (d <= 64) stages PosK / PosQ rows [kComputedWindow, d] where the
  // C2P / P2C windows later go: each bias region holds either.
  static constexpr bool kCanComputeWindows = kHeadDim <= 64 && !kTf32;
  static constexpr int kPositionWindowElements = kComputedWindow * kRowStride;
  static constexpr int kBiasRegionElements =
      kCanComputeWindows && kPositionWindowElements > kWindowElements ? kPositionWindowElements
                                                                      : kWindowElements;
  // Q, K, V tiles; the C2P and P2C windows; the saturated column terms and the two row terms per
  // query row (float); the slot table. The mma.sync kernels' K and V are not double-buffered:
  // measured on the H200, the extra 36 KB cost a resident CTA per SM and ran 1.35x slower at
  // L = 8192 than waiting for each tile with three CTAs per SM.
  // With key groups (below), each group of kWarps warps has its own K, V, bias regions and
  // column terms; Q, the row terms and the slot table are shared.
  // The warpgroup kernels load Q, K and V by TMA and keep two V buffers: V(n + 1) is requested
  // with K(n + 1), while tile n still reads V(n) (8.5 KB more with the slot table's margins:
  // 73.5 KB, still three CTAs per SM).
  static constexpr int kValueBuffers = kWgmma ? 2 : 1;
  static constexpr int kQBytes = kTileElements * static_cast<int>(sizeof(Element));
  static constexpr int kGroupBytes =
      ((1 + kValueBuffers) * kTileElements + 2 * kBiasRegionElements) *
          static_cast<int>(sizeof(Element)) +
      kBlockN * static_cast<int>(sizeof(float));
  // The warpgroup kernels' mbarriers (first: 8-byte aligned): Q, K with the tile's windows or
  // PosK / PosQ rows, and one per V buffer; the two row terms per query row, the saturated slots'
  // PosK / PosQ rows of the warpgroup computed-window kernel (PosK[slot_hi], PosK[slot_lo],
  // PosQ[slot_hi], PosQ[slot_lo]), the slot table.
  static constexpr int kBarrierBytes = 32;
  static constexpr int kSaturatedPositionBytes =
      kWgmma ? 4 * kHeadDim * static_cast<int>(sizeof(Element)) : 0;
  // The shared slot table's entries past each end of [-band, band] (repeating the end slots): a
  // band tile's deltas lie within band + kBlockM + kBlockN - 2 of the diagonal (it is not
  // saturated, so its nearest delta is inside the band), and its per-element lookups then need
  // no clamp.
  static constexpr int kLutPad = kBlockM + kBlockN;
  static constexpr int kCommonBytes =
      kBarrierBytes + 2 * kBlockM * static_cast<int>(sizeof(float)) + kSaturatedPositionBytes +
      (2 * kSharedLutBand + 1 + 2 * kLutPad) * static_cast<int>(sizeof(int16_t));
  static constexpr int SharedBytes(int key_groups) {
    return kQBytes + key_groups * kGroupBytes + kCommonBytes;
  }
  static constexpr int kSharedBytes = SharedBytes(1);
  // The warpgroup computed-window kernel at four CTAs per SM (kMinBlocks 4): no V buffers of its
  // own, V(n) goes to the C2P region once tile n's bias is read (57,122 bytes at d = 64: four CTAs
  // and their 1 KB reservations fit the H100 / H200's 228 KB).
  static constexpr bool ValuesInC2P(bool compute_windows, int min_blocks) {
    return kWgmma && compute_windows && min_blocks == 4;
  }
  static constexpr int kValuesInC2PSharedBytes =
      kSharedBytes - kValueBuffers * kTileElements * static_cast<int>(sizeof(Element));
  static constexpr int kChunksPerRow = kHeadDim / kChunkElements;
  static_assert(kBlockM == kBlockN, "tile loaders assume square tiles");
  static_assert(kQBytes % 16 == 0 && kGroupBytes % 16 == 0,
                "each group's tiles start 16-byte aligned (cp.async), column terms 8 (float2)");
  static_assert(kHeadDim % 16 == 0, "head dim must be a multiple of 16");
  static_assert(!kWgmma || (kHeadDim == 64 && !kTf32),
                "wgmma tiles are 64 x 64 half-precision (one 128-byte swizzle row)");
  static_assert(!kWgmma || kQBytes % 1024 == 0, "swizzled tiles start 1024-byte aligned");
  static_assert(!kWgmma || (kQBytes % 128 == 0 && kTileElements * sizeof(Element) % 128 == 0 &&
                            kBiasRegionElements * sizeof(Element) % 128 == 0),
                "TMA windows start 128-byte aligned");
  static_assert(!kWgmma || (kTileElements * sizeof(Element) % 1024 == 0 &&
                            kBiasRegionElements * sizeof(Element) % 1024 == 0),
                "staged PosK / PosQ rows (swizzled wgmma operands) start 1024-byte aligned");
};

// The short-sequence kernel (attention_short_kernel.cuh): 32 query rows x all keys per CTA.
template <int kHeadDim_, typename Element_>
struct ShortAttentionTraits {
  using Element = Element_;
  // Row stride, copy chunking and the window MMAs of the tile kernel's traits.
  using Tile = AttentionTraits<kHeadDim_, Element_>;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kRowStride = Tile::kRowStride;
  static constexpr int kRowWarps = 2;
  static constexpr int kKeyWarps = 4;
  static constexpr int kWarps = kRowWarps * kKeyWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockM = 16 * kRowWarps;             // Query rows per CTA.
  static constexpr int kKeysPerWarp = 32;                    // Keys per key warp.
  static constexpr int kMaxKeys = kKeysPerWarp * kKeyWarps;  // == kShortMaxKeys.
  static constexpr int kWindow = 48;  // Slots per warp window: 47 deltas, three 16-slot pairs.
  static constexpr int kWindowPairs = kWindow / 16;
  // Deltas m0 - (kMaxKeys - 1) .. m0 + kBlockM - 1 and one slot past the last for the windows'
  // 48th column.
  static constexpr int kPositionRows = kMaxKeys + kBlockM;
  static constexpr int kDeltas = kMaxKeys + kBlockM - 1;
  static constexpr int kQElements = kBlockM * kRowStride;
  static constexpr int kKeyElements = kMaxKeys * kRowStride;
  static constexpr int kPositionElements = kPositionRows * kRowStride;
  static constexpr int kC2PElements = kWarps * 16 * kWindow;
  static constexpr int kP2CElements = kMaxKeys * kWindow;
  // Q, K, V, PosK / PosQ windows, C2P / P2C windows (elements), then the slot table (int16).
  static constexpr int kElements =
      kQElements + 2 * kKeyElements + 2 * kPositionElements + kC2PElements + kP2CElements;
  static constexpr int kSharedBytes = kElements * static_cast<int>(sizeof(Element)) +
                                      (kDeltas + 1) * static_cast<int>(sizeof(int16_t));
  // The merge's exchange (per thread: O [d / 8 tiles][4], m [2], l [2]) reuses the PosK / PosQ
  // windows, free once every warp has its C2P / P2C.
  static constexpr int kMergeValues = kHeadDim / 8 * 4 + 4;
  static_assert(kMergeValues * kThreads * sizeof(float) <= 2 * kPositionElements * sizeof(Element),
                "the merge exchange fits the position windows");
  static_assert(kMaxKeys == kShortMaxKeys, "one bound for the host and the kernel");
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 64, "d / 4 output columns per key warp, d <= 64");
  static_assert((kQElements + 2 * kKeyElements + 2 * kPositionElements) *
                        static_cast<int>(sizeof(Element)) % 16 ==
                    0,
                "the windows start 16-byte aligned");
};

}  // namespace dflash::kernels
