#include "server/service/label_ranking.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace dflash::serving {
namespace {

using ::testing::ElementsAre;

TEST(LabelRankingTest, HighestFirstTiesByLowerIndex) {
  const std::vector<float> scores = {0.2f, 0.5f, 0.2f, 0.1f, 0.5f};
  EXPECT_THAT(RankByScore(scores, 0), ElementsAre(1, 4, 0, 2, 3));
}

TEST(LabelRankingTest, KeepsTopK) {
  const std::vector<float> scores = {0.2f, 0.5f, 0.3f};
  EXPECT_THAT(RankByScore(scores, 2), ElementsAre(1, 2));
  EXPECT_THAT(RankByScore(scores, 3), ElementsAre(1, 2, 0));
  EXPECT_THAT(RankByScore(scores, 10), ElementsAre(1, 2, 0));
}

TEST(LabelRankingTest, NanDoesNotBreakTheOrder) {
  const std::vector<float> scores = {NAN, 0.5f, 0.7f};
  const std::vector<int> order = RankByScore(scores, 0);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_THAT(std::vector<int>(order), ::testing::UnorderedElementsAre(0, 1, 2));
}

TEST(LabelRankingTest, Empty) { EXPECT_TRUE(RankByScore({}, 0).empty()); }

}  // namespace
}  // namespace dflash::serving
