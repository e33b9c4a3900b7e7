// The attention forward's host plan (kernels/attention/attention_plan.h) on described devices: the
// variant each problem runs, the candidates and checks derived from the one table of compiled
// variants, and the workspace layout. No GPU: every device is a Target.
#include "kernels/attention/attention_plan.h"

#include <set>
#include <tuple>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/relative_position.h"
#include "gtest/gtest.h"
#include "kernels/attention/attention_variants.h"

namespace dflash {
namespace {

using kernels::AttentionKernel;
using kernels::AttentionKernelConfig;
using kernels::AttentionMma;
using kernels::AttentionProblem;
using kernels::AttentionVariant;
using kernels::AttentionWindows;
using kernels::DataType;
using kernels::kAttentionVariants;
namespace plan = kernels::attention_plan;

// H200 and an sm_89 part (99 KB per block), with and without the sm_90a image.
constexpr kernels::AttentionDeviceLimits kH200{132, 232448, 90};
constexpr kernels::AttentionDeviceLimits kAda{142, 101376, 89};
const plan::Target kH200Wgmma{kH200, true};
const plan::Target kH200SyncOnly{kH200, false};
const plan::Target kAdaTarget{kAda, true};

ModelConfig V3Positions() {
  ModelConfig config;
  config.relative_attention = true;
  config.position_buckets = 256;
  config.max_position_embeddings = 512;
  return config;
}

// A packed bf16 problem of 12 heads x 64 with v3 positions; pointers stand in for device tensors
// (16-byte aligned as they are).
AttentionProblem Problem(const RelativePositionIndex& index, int max_seqlen, int total_tokens,
                         int num_sequences = 1) {
  alignas(16) static int dummy = 0;
  AttentionProblem problem;
  problem.dtype = DataType::kBFloat16;
  problem.num_heads = 12;
  problem.head_dim = 64;
  problem.q = problem.k = problem.v = problem.out = &dummy;
  problem.q_row_stride = problem.k_row_stride = problem.v_row_stride = problem.out_row_stride =
      12 * 64;
  problem.cu_seqlens = reinterpret_cast<const int32_t*>(&dummy);
  problem.num_sequences = num_sequences;
  problem.max_seqlen = max_seqlen;
  problem.total_tokens = total_tokens;
  problem.scale = 0.07f;
  problem.pos_key = &dummy;
  problem.pos_query = &dummy;
  problem.positions = {index.table().data(), index.table().data(), index.band(), index.span()};
  return problem;
}

const AttentionVariant& VariantOf(const plan::Plan& plan) {
  EXPECT_GE(plan.variant, 0);
  EXPECT_LT(plan.variant, kernels::kAttentionVariantCount);
  return kAttentionVariants[plan.variant];
}

TEST(AttentionVariantsTest, EachVariantIsListedOnce) {
  std::set<std::tuple<int, int, int, int, int, int, bool, bool>> seen;
  for (const AttentionVariant& v : kAttentionVariants) {
    EXPECT_TRUE(seen.insert({static_cast<int>(v.kernel), static_cast<int>(v.mma),
                             static_cast<int>(v.windows), v.head_dim, v.min_blocks, v.key_groups,
                             v.saturated_tiles, v.split_tf32})
                    .second);
    EXPECT_GT(v.threads, 0);
    EXPECT_GT(v.shared_bytes, 0);
  }
}

TEST(AttentionPlanTest, WarpgroupFourCtasOnAnH200WithTheImage) {
  const RelativePositionIndex index(V3Positions());
  // 16k tokens of L = 1024: the SMs are full; saturated tiles exist (L > 576).
  const AttentionProblem problem = Problem(index, 1024, 16384, 16);
  plan::Plan made;
  ASSERT_TRUE(plan::MakePlan(problem, kH200Wgmma, &made));
  const AttentionVariant& variant = VariantOf(made);
  EXPECT_EQ(variant.mma, AttentionMma::kWarpgroup);
  EXPECT_EQ(variant.windows, AttentionWindows::kComputed);
  EXPECT_EQ(variant.min_blocks, 4);
  EXPECT_TRUE(variant.saturated_tiles);
  EXPECT_EQ(made.tail_ctas, 3 * kH200.multiprocessors);
  EXPECT_TRUE(made.compute_windows);
  EXPECT_FALSE(made.tables());
  EXPECT_EQ(plan::WorkspaceBytes(problem, kH200Wgmma), 0u);

  // L = 512: no saturated tile, the build without saturated-tile code, in linear order.
  ASSERT_TRUE(plan::MakePlan(Problem(index, 512, 16384, 32), kH200Wgmma, &made));
  EXPECT_FALSE(VariantOf(made).saturated_tiles);
  EXPECT_EQ(made.tail_ctas, 0);

  // Without the image the same problem runs mma.sync computed windows at 3 CTAs per SM.
  ASSERT_TRUE(plan::MakePlan(problem, kH200SyncOnly, &made));
  EXPECT_EQ(VariantOf(made).mma, AttentionMma::kSync);
  EXPECT_EQ(VariantOf(made).min_blocks, 3);
}

TEST(AttentionPlanTest, SmallGridsTakeTheShortKernelOrTwoKeyGroups) {
  const RelativePositionIndex index(V3Positions());
  plan::Plan made;
  // One 128-token sequence of 12 heads: 12 CTAs on 132 SMs, the short kernel even beside the
  // warpgroup kernels (AttentionLaunchConfig).
  ASSERT_TRUE(plan::MakePlan(Problem(index, 128, 128), kH200Wgmma, &made));
  EXPECT_EQ(made.key_groups, 4);
  EXPECT_EQ(VariantOf(made).kernel, AttentionKernel::kShort);
  EXPECT_EQ(VariantOf(made).head_dim, 64);
  // 512 tokens: two key groups.
  ASSERT_TRUE(plan::MakePlan(Problem(index, 512, 512), kH200Wgmma, &made));
  EXPECT_EQ(made.key_groups, 2);
  EXPECT_EQ(VariantOf(made).key_groups, 2);
  EXPECT_EQ(VariantOf(made).mma, AttentionMma::kSync);
  // On sm_89 neither fits a block at d = 64: one group.
  ASSERT_TRUE(plan::MakePlan(Problem(index, 128, 128), kAdaTarget, &made));
  EXPECT_EQ(made.key_groups, 1);
  // A pinned short kernel that does not fit is refused.
  AttentionKernelConfig pinned;
  pinned.windows = AttentionWindows::kComputed;
  pinned.min_blocks_per_sm = 3;
  pinned.key_groups = 4;
  AttentionProblem problem = Problem(index, 128, 128);
  problem.config = &pinned;
  EXPECT_TRUE(plan::MakePlan(problem, kH200SyncOnly, &made));
  EXPECT_FALSE(plan::MakePlan(problem, kAdaTarget, &made));
}

TEST(AttentionPlanTest, TablesLieInTheWorkspaceBeforeTheMaskedValues) {
  const RelativePositionIndex index(V3Positions());
  AttentionProblem problem = Problem(index, 2048, 16384, 8);
  const AttentionKernelConfig tables;  // mma.sync tables, 2 CTAs per SM.
  problem.config = &tables;
  plan::Plan made;
  ASSERT_TRUE(plan::MakePlan(problem, kH200SyncOnly, &made));
  ASSERT_TRUE(made.tables());
  // L = 2048 reaches every slot: 512, each table [12, 16384, 512] bf16 plus the window slack.
  EXPECT_EQ(made.slots.count, 512);
  EXPECT_EQ(made.slots.stride, 512);
  const size_t table = ((12u * 16384 * 512 + kernels::kTableSlack) * 2 + 255) / 256 * 256;
  EXPECT_EQ(made.c2p_offset, 0u);
  EXPECT_EQ(made.p2c_offset, table);
  EXPECT_EQ(made.masked_values_offset, plan::Plan::kNone);
  EXPECT_EQ(plan::WorkspaceBytes(problem, kH200SyncOnly), 2 * table);
  // P2C alone starts at 0.
  problem.pos_key = nullptr;
  ASSERT_TRUE(plan::MakePlan(problem, kH200SyncOnly, &made));
  EXPECT_EQ(made.c2p_offset, plan::Plan::kNone);
  EXPECT_EQ(made.p2c_offset, 0u);
  // Padded layout: the V copy after the tables; as much as the workspace holds.
  alignas(16) static uint8_t mask = 1;
  problem.key_padding_mask = &mask;
  problem.padded_length = 2048;
  problem.num_sequences = 8;
  ASSERT_TRUE(plan::MakePlan(problem, kH200SyncOnly, &made));
  EXPECT_EQ(made.masked_values_offset, table);
  EXPECT_EQ(plan::WorkspaceBytes(problem, kH200SyncOnly),
            table + 12u * 16384 * 64 * 2);  // Already a multiple of 256.
}

TEST(AttentionPlanTest, CandidatesAreTheTablesOneGroupVariantsInOrder) {
  const RelativePositionIndex index(V3Positions());
  const AttentionProblem problem = Problem(index, 1025, 16384, 16);
  const std::vector<AttentionKernelConfig> candidates = plan::Candidates(problem, kH200Wgmma);
  // The heuristic's (warpgroup computed windows at 4 CTAs per SM), then every other d = 64
  // one-group variant: mma.sync tables 2, computed 3 and 2, warpgroup tables 2 and computed 3.
  ASSERT_EQ(candidates.size(), 6u);
  EXPECT_EQ(candidates[0], plan::Heuristic(problem, kH200Wgmma));
  EXPECT_EQ(candidates[0].mma, AttentionMma::kWarpgroup);
  EXPECT_EQ(candidates[0].min_blocks_per_sm, 4);
  const std::vector<std::tuple<AttentionMma, AttentionWindows, int>> rest = {
      {AttentionMma::kSync, AttentionWindows::kTables, 2},
      {AttentionMma::kSync, AttentionWindows::kComputed, 3},
      {AttentionMma::kSync, AttentionWindows::kComputed, 2},
      {AttentionMma::kWarpgroup, AttentionWindows::kTables, 2},
      {AttentionMma::kWarpgroup, AttentionWindows::kComputed, 3}};
  for (size_t i = 0; i < rest.size(); ++i) {
    EXPECT_EQ(candidates[i + 1].mma, std::get<0>(rest[i])) << i;
    EXPECT_EQ(candidates[i + 1].windows, std::get<1>(rest[i])) << i;
    EXPECT_EQ(candidates[i + 1].min_blocks_per_sm, std::get<2>(rest[i])) << i;
  }
  for (const AttentionKernelConfig& config : candidates) {
    EXPECT_TRUE(plan::CheckConfig(problem, config, kH200Wgmma));
    EXPECT_FALSE(plan::CheckConfig(problem, config, kH200SyncOnly) &&
                 config.mma == AttentionMma::kWarpgroup);
  }
  // The workspace an autotuner needs: the largest candidate's (the table kernels').
  AttentionProblem with_tables = problem;
  const AttentionKernelConfig tables;
  with_tables.config = &tables;
  EXPECT_EQ(plan::MaxWorkspaceBytes(problem, kH200Wgmma),
            plan::WorkspaceBytes(with_tables, kH200Wgmma));
}

// Every (dtype, head dim, length, positions) the forward accepts plans onto a compiled variant of
// its own precision, head dim and config, on each described device.
TEST(AttentionPlanTest, EveryValidProblemPlansOntoAMatchingVariant) {
  const RelativePositionIndex index(V3Positions());
  for (const plan::Target& target : {kH200Wgmma, kH200SyncOnly, kAdaTarget}) {
    for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32}) {
      for (int head_dim : {32, 64, 128}) {
        for (int length : {1, 64, 128, 1024, 1025, 8192}) {
          for (bool positions : {true, false}) {
            AttentionProblem problem = Problem(index, length, 4 * length, 4);
            problem.dtype = dtype;
            problem.head_dim = head_dim;
            problem.q_row_stride = problem.k_row_stride = problem.v_row_stride =
                problem.out_row_stride = 12 * head_dim;
            if (!positions) problem.pos_key = problem.pos_query = nullptr;
            plan::Plan made;
            ASSERT_TRUE(plan::MakePlan(problem, target, &made));
            if (made.variant < 0) {  // The SIMT float32 kernel: float32 tiles do not fit.
              EXPECT_EQ(dtype, DataType::kFloat32);
              EXPECT_FALSE(plan::RunsFloat32Tiles(problem, target));
              continue;
            }
            const AttentionVariant& variant = VariantOf(made);
            EXPECT_EQ(variant.head_dim, head_dim);
            EXPECT_EQ(variant.kernel == AttentionKernel::kFloat32Tile, dtype == DataType::kFloat32);
            EXPECT_LE(static_cast<size_t>(variant.shared_bytes),
                      target.limits.max_shared_bytes_per_block);
            if (variant.kernel == AttentionKernel::kFloat32Tile) {
              EXPECT_TRUE(variant.split_tf32);  // allow_tf32 is off.
              continue;
            }
            EXPECT_EQ(variant.key_groups, made.key_groups);
            EXPECT_EQ(variant.windows, made.config.windows);
            if (variant.kernel == AttentionKernel::kTile) {
              EXPECT_EQ(variant.mma, made.config.mma);
            }
            if (variant.key_groups == 1) {
              EXPECT_EQ(variant.min_blocks, made.config.min_blocks_per_sm);
            }
            EXPECT_EQ(made.tables(), positions && !made.compute_windows);
          }
        }
      }
    }
  }
}

TEST(AttentionPlanTest, InvalidProblemsAndConfigsAreRefused) {
  const RelativePositionIndex index(V3Positions());
  AttentionProblem problem = Problem(index, 1024, 1024);
  plan::Plan made;
  problem.head_dim = 48;
  EXPECT_FALSE(plan::MakePlan(problem, kH200Wgmma, &made));
  problem.head_dim = 64;
  problem.scale = 0.0f;
  EXPECT_FALSE(plan::MakePlan(problem, kH200Wgmma, &made));
  problem.scale = 0.07f;
  // The warpgroup kernels only where they run.
  AttentionKernelConfig warpgroup;
  warpgroup.mma = AttentionMma::kWarpgroup;
  problem.config = &warpgroup;
  EXPECT_TRUE(plan::MakePlan(problem, kH200Wgmma, &made));
  EXPECT_FALSE(plan::MakePlan(problem, kH200SyncOnly, &made));
  // Four CTAs keep V in the C2P region: not with P2C alone.
  warpgroup.windows = AttentionWindows::kComputed;
  warpgroup.min_blocks_per_sm = 4;
  EXPECT_TRUE(plan::MakePlan(problem, kH200Wgmma, &made));
  problem.pos_key = nullptr;
  EXPECT_FALSE(plan::MakePlan(problem, kH200Wgmma, &made));
}

}  // namespace
}  // namespace dflash
