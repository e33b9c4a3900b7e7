// engine/cuda/staged_batch.{h,cc}: graph buckets and the staged inputs of a padded batch, on the
// host (no GPU needed).
#include "engine/cuda/staged_batch.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

ModelConfig RelativeConfig() {
  ModelConfig config;
  config.position_biased_input = false;
  config.max_position_embeddings = 512;
  config.pad_token_id = 0;
  return config;
}

PackedBatch Batch(const std::vector<std::vector<int32_t>>& sequences, bool with_types) {
  PackedBatch batch;
  for (const std::vector<int32_t>& ids : sequences) {
    std::vector<int32_t> types;
    if (with_types) types.assign(ids.size(), 1);
    batch.Append(ids, types);
  }
  return batch;
}

std::vector<int32_t> Slice(const std::vector<int32_t>& staged, int64_t at, int64_t count) {
  return std::vector<int32_t>(staged.begin() + at, staged.begin() + at + count);
}

TEST(GraphBucketTest, RoundsTokensSequencesAndLongest) {
  // 3 sequences of 5 + 70 + 1 = 76 tokens: 128 tokens, 4 sequences (3 + one for the padding),
  // longest 128 (bit_ceil of 70), and 52 padding tokens fit one sequence of at most 128.
  const PackedBatch batch = Batch({std::vector<int32_t>(5, 7), std::vector<int32_t>(70, 7), {7}},
                                  /*with_types=*/false);
  EXPECT_EQ(GraphBucketOf(batch, RelativeConfig()), (RunShape{128, 4, 128}));
  EXPECT_EQ(ShapeOf(batch), (RunShape{76, 3, 70}));
}

TEST(GraphBucketTest, FullBucketAddsNoSequence) {
  const PackedBatch batch = Batch({std::vector<int32_t>(64, 3)}, false);
  EXPECT_EQ(GraphBucketOf(batch, RelativeConfig()), (RunShape{64, 1, 64}));
}

TEST(GraphBucketTest, PaddingLongerThanOneSequenceGrowsTheLongestOrTheCount) {
  // 1 token: 63 padding tokens in one extra sequence; longest stays 64 (the minimum).
  const PackedBatch one = Batch({{5}}, false);
  EXPECT_EQ(GraphBucketOf(one, RelativeConfig()), (RunShape{64, 2, 64}));

  // Absolute positions cap a padding sequence at max_position_embeddings (here 16): the 63
  // padding tokens need 4 sequences of <= 16, so the count doubles from 2 to 8 (7 of padding).
  ModelConfig absolute = RelativeConfig();
  absolute.position_biased_input = true;
  absolute.max_position_embeddings = 16;
  EXPECT_EQ(GraphBucketOf(one, absolute), (RunShape{64, 8, 64}));
}

TEST(StageBatchTest, UnpaddedBatchIsStagedAsIs) {
  const PackedBatch batch = Batch({{1, 5, 2}, {1, 7, 8, 2}}, /*with_types=*/true);
  const RunShape shape = ShapeOf(batch);
  const StagingRules rules{.token_types = true, .positions = true, .pad_token_id = 0};
  std::vector<int32_t> staged(StagedCount(shape, rules), -7);
  const StagedLayout layout = StageBatch(batch, shape, rules, staged.data());
  EXPECT_EQ(layout.count, StagedCount(shape, rules));
  EXPECT_THAT(Slice(staged, layout.token_ids, 7), ElementsAre(1, 5, 2, 1, 7, 8, 2));
  EXPECT_THAT(Slice(staged, layout.token_types, 7), ElementsAre(1, 1, 1, 1, 1, 1, 1));
  EXPECT_THAT(Slice(staged, layout.positions, 7), ElementsAre(0, 1, 2, 0, 1, 2, 3));
  EXPECT_THAT(Slice(staged, layout.cu_seqlens, 3), ElementsAre(0, 3, 7));
}

TEST(StageBatchTest, PaddingSequencesFollowTheBatchInEveryInput) {
  // 2 real sequences (7 tokens) padded to 12 tokens and 5 sequences: 5 padding tokens over 3
  // sequences, spread evenly (2, 2, 1).
  const PackedBatch batch = Batch({{1, 5, 2}, {1, 7, 8, 2}}, /*with_types=*/true);
  const RunShape shape{12, 5, 64};
  const StagingRules rules{.token_types = true, .positions = true, .pad_token_id = 9};
  std::vector<int32_t> staged(StagedCount(shape, rules), -7);
  const StagedLayout layout = StageBatch(batch, shape, rules, staged.data());
  EXPECT_EQ(layout.count, static_cast<int64_t>(staged.size()));
  EXPECT_THAT(Slice(staged, layout.token_ids, 12), ElementsAre(1, 5, 2, 1, 7, 8, 2, 9, 9, 9, 9, 9));
  EXPECT_THAT(Slice(staged, layout.token_types, 12),
              ElementsAre(1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0));
  EXPECT_THAT(Slice(staged, layout.cu_seqlens, 6), ElementsAre(0, 3, 7, 9, 11, 12));
  EXPECT_THAT(Slice(staged, layout.positions, 12), ElementsAre(0, 1, 2, 0, 1, 2, 3, 0, 1, 0, 1, 0));
}

TEST(StageBatchTest, AbsentInputsAreNotStagedAndMissingTypesAreZeros) {
  const PackedBatch batch = Batch({{4, 4}, {6}}, /*with_types=*/false);
  const RunShape shape{4, 4, 64};  // One empty padding sequence among two.
  {
    const StagingRules rules{.token_types = false, .positions = false, .pad_token_id = 0};
    std::vector<int32_t> staged(StagedCount(shape, rules), -7);
    const StagedLayout layout = StageBatch(batch, shape, rules, staged.data());
    EXPECT_EQ(layout.token_types, -1);
    EXPECT_EQ(layout.positions, -1);
    EXPECT_EQ(layout.count, 4 + 5);
    EXPECT_THAT(staged, ElementsAreArray({4, 4, 6, 0, 0, 2, 3, 4, 4}));
  }
  const StagingRules rules{.token_types = true, .positions = false, .pad_token_id = 0};
  std::vector<int32_t> staged(StagedCount(shape, rules), -7);
  const StagedLayout layout = StageBatch(batch, shape, rules, staged.data());
  EXPECT_THAT(Slice(staged, layout.token_types, 4), ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace dflash::cuda
