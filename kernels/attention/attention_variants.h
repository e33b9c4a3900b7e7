// The compiled kernel variants of the disentangled attention forward: one table, from which the
// host plan (attention_plan.h) derives the heuristic's choices, the tuner's candidates, the config
// checks and the shared-memory checks, and from which one compile unit per variant instantiates
// its kernels (attention_variant_launch.h) and disentangled_attention.cu launches them. A variant
// added here is built, checked and offered as a candidate; there is no second list to keep in
// step, only the count of units in attention_variants.cmake, which the build checks.
//
// Host code only (constants): nvcc compiles kernels/ as C++17, so the table is a constexpr array
// of plain structs that the launch indexes at compile time.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>

#include "kernels/attention/attention_kernel_config.h"
#include "kernels/attention/attention_traits.h"

namespace dflash::kernels {

// The kernel a variant instantiates.
enum class AttentionKernel : uint8_t {
  // DisentangledAttentionKernel (attention_fwd_kernel.cuh) on half-precision 64 x 64 tiles.
  kTile,
  // ShortDisentangledAttentionKernel (attention_short_kernel.cuh): sequences <= kShortMaxKeys.
  kShort,
  // DisentangledAttentionKernel on float32 tiles (tables; 1xTF32 or 3xTF32). Chosen by the
  // problem's dtype and allow_tf32, never by a config.
  kFloat32Tile,
};

struct AttentionVariant {
  AttentionKernel kernel = AttentionKernel::kTile;
  AttentionMma mma = AttentionMma::kSync;
  AttentionWindows windows = AttentionWindows::kTables;
  int head_dim = 0;
  // __launch_bounds__' CTAs per SM: the config's min_blocks_per_sm for one key group; the
  // two-group and short kernels (one CTA per SM by design) run whatever cap a config names.
  int min_blocks = 0;
  int key_groups = 1;  // 1; 2 (two groups of 4 warps); 4 (the short kernel)
  // False: built without the saturated-tile code, for launches that have no saturated tile
  // (AttentionTilesSaturationFree); the launch picks it, no config names it.
  bool saturated_tiles = true;
  bool split_tf32 = false;  // kFloat32Tile: 3xTF32 (strict float32) rather than 1xTF32.
  // CTAs at the end of each launch that run rank-major, per SM (attention_block_order.h).
  int tail_ctas_per_sm = 0;
  int threads = 0;
  int shared_bytes = 0;  // Dynamic shared memory of one CTA.
};

namespace attention_variant_detail {

template <int kHeadDim>
using HalfTraits = AttentionTraits<kHeadDim, __half>;

constexpr int TileSharedBytes(int head_dim, int key_groups) {
  return head_dim == 32   ? HalfTraits<32>::SharedBytes(key_groups)
         : head_dim == 64 ? HalfTraits<64>::SharedBytes(key_groups)
                          : HalfTraits<128>::SharedBytes(key_groups);
}

// The 64 x 64 half-precision tile kernel with one key group.
constexpr AttentionVariant Tile(AttentionMma mma, AttentionWindows windows, int head_dim,
                                int min_blocks) {
  AttentionVariant variant;
  variant.mma = mma;
  variant.windows = windows;
  variant.head_dim = head_dim;
  variant.min_blocks = min_blocks;
  variant.threads = HalfTraits<64>::kThreads;
  variant.shared_bytes = TileSharedBytes(head_dim, 1);
  return variant;
}

// The warpgroup computed-window kernel at four CTAs per SM: V in the C2P region.
constexpr AttentionVariant WarpgroupFourCtas(bool saturated_tiles) {
  AttentionVariant variant = Tile(AttentionMma::kWarpgroup, AttentionWindows::kComputed, 64, 4);
  variant.saturated_tiles = saturated_tiles;
  // Saturated tiles make the query blocks differ in cost: the launch's last CTAs take the
  // heaviest blocks first. Three quarters of a wave of resident CTAs (0.75 x 4) measured best of
  // 0.5 to 3 waves (HISTORY.md v9.8: -2.0% at L = 1024, -1.6% at 2048 against linear order in the
  // same call). Without saturated tiles the blocks cost about the same, and the order gained
  // nothing at L = 512.
  variant.tail_ctas_per_sm = saturated_tiles ? 3 : 0;
  using Traits = AttentionTraits<64, __half, true>;
  variant.shared_bytes = Traits::kValuesInC2PSharedBytes;
  return variant;
}

// Two groups of 4 warps splitting a CTA's key tiles (computed windows, mma.sync), uncapped.
constexpr AttentionVariant TwoKeyGroups(int head_dim) {
  AttentionVariant variant = Tile(AttentionMma::kSync, AttentionWindows::kComputed, head_dim, 1);
  variant.key_groups = 2;
  variant.threads = 2 * HalfTraits<64>::kThreads;
  variant.shared_bytes = TileSharedBytes(head_dim, 2);
  return variant;
}

constexpr AttentionVariant Short(int head_dim) {
  AttentionVariant variant;
  variant.kernel = AttentionKernel::kShort;
  variant.windows = AttentionWindows::kComputed;
  variant.head_dim = head_dim;
  variant.min_blocks = 1;
  variant.key_groups = 4;
  variant.threads = ShortAttentionTraits<64, __half>::kThreads;
  variant.shared_bytes = head_dim == 32 ? ShortAttentionTraits<32, __half>::kSharedBytes
                                        : ShortAttentionTraits<64, __half>::kSharedBytes;
  return variant;
}

constexpr AttentionVariant Float32Tile(int head_dim, bool split_tf32) {
  AttentionVariant variant;
  variant.kernel = AttentionKernel::kFloat32Tile;
  variant.head_dim = head_dim;
  variant.min_blocks = AttentionTraits<64, float>::kMinBlocksPerSmTf32;
  variant.split_tf32 = split_tf32;
  variant.threads = AttentionTraits<64, float>::kThreads;
  // 1xTF32 and 3xTF32 share one layout: 102 / 127 / 176 KB at d = 32 / 64 / 128.
  variant.shared_bytes = head_dim == 32   ? AttentionTraits<32, float>::kSharedBytes
                         : head_dim == 64 ? AttentionTraits<64, float>::kSharedBytes
                                          : AttentionTraits<128, float>::kSharedBytes;
  return variant;
}

}  // namespace attention_variant_detail

// Every compiled variant; half-precision ones are built for fp16 and bf16 each (minutes of nvcc
// time apiece). Within one head dim the order is the tuner's candidate order.
inline constexpr AttentionVariant kAttentionVariants[] = {
    // mma.sync: tables at every head dim (registers capped for 2 CTAs per SM), computed windows
    // at d <= 64 for 3; d = 64, every public DeBERTa checkpoint, also uncapped (2).
    attention_variant_detail::Tile(AttentionMma::kSync, AttentionWindows::kTables, 32, 2),
    attention_variant_detail::Tile(AttentionMma::kSync, AttentionWindows::kTables, 64, 2),
    attention_variant_detail::Tile(AttentionMma::kSync, AttentionWindows::kTables, 128, 2),
    attention_variant_detail::Tile(AttentionMma::kSync, AttentionWindows::kComputed, 32, 3),
    attention_variant_detail::Tile(AttentionMma::kSync, AttentionWindows::kComputed, 64, 3),
    attention_variant_detail::Tile(AttentionMma::kSync, AttentionWindows::kComputed, 64, 2),
    attention_variant_detail::TwoKeyGroups(32),
    attention_variant_detail::TwoKeyGroups(64),
    attention_variant_detail::Short(32),
    attention_variant_detail::Short(64),
    // wgmma (sm_90a), d = 64: tables, computed windows at 3 CTAs per SM and at 4, the latter
    // also without saturated-tile code.
    attention_variant_detail::Tile(AttentionMma::kWarpgroup, AttentionWindows::kTables, 64, 2),
    attention_variant_detail::Tile(AttentionMma::kWarpgroup, AttentionWindows::kComputed, 64, 3),
    attention_variant_detail::WarpgroupFourCtas(true),
    attention_variant_detail::WarpgroupFourCtas(false),
    // float32 tiles: 3xTF32 (strict) and 1xTF32 at every head dim.
    attention_variant_detail::Float32Tile(32, true),
    attention_variant_detail::Float32Tile(32, false),
    attention_variant_detail::Float32Tile(64, true),
    attention_variant_detail::Float32Tile(64, false),
    attention_variant_detail::Float32Tile(128, true),
    attention_variant_detail::Float32Tile(128, false),
};

inline constexpr int kAttentionVariantCount =
    static_cast<int>(sizeof(kAttentionVariants) / sizeof(kAttentionVariants[0]));

}  // namespace dflash::kernels
