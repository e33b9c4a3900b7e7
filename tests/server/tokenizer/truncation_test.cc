#include "server/tokenizer/truncation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash {
namespace {

using ::testing::HasSubstr;

TruncationOptions Options(TruncationStrategy strategy, int64_t max_length) {
  TruncationOptions options;
  options.strategy = strategy;
  options.max_length = max_length;
  return options;
}

struct Row {
  size_t first;
  size_t second;
  int64_t max_length;
  size_t kept_first;
  size_t kept_second;
};

void ExpectRows(TruncationStrategy strategy, const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    const auto kept = ComputeTruncation(row.first, row.second, Options(strategy, row.max_length));
    ASSERT_TRUE(kept.ok()) << kept.status() << " for " << row.first << "," << row.second << " @"
                           << row.max_length;
    EXPECT_EQ(kept->first, row.kept_first)
        << row.first << "," << row.second << " @" << row.max_length;
    EXPECT_EQ(kept->second, row.kept_second)
        << row.first << "," << row.second << " @" << row.max_length;
  }
}

TEST(TokenizerTruncationTest, LongestFirstFollowsTheRustRule) {
  ExpectRows(TruncationStrategy::kLongestFirst,
             {
                 {10, 32, 12, 4, 5},  // docs/deberta.md#truncation: b=9 -> A 4 / B 5.
                 {10, 32, 16, 6, 7},  // b=13 -> A 6 / B 7.
                 {32, 10, 12, 5, 4},  // Mirror image: the long one gets ceil(b/2).
                 {32, 10, 16, 7, 6},
                 {4, 4, 8, 2, 3},  // Tie: the first text counts as the shorter one.
                 {5, 5, 10, 3, 4},
                 {3, 40, 16, 3, 10},  // Short fits in floor(b/2): kept whole.
                 {6, 40, 16, 6, 7},   // Short = floor(13/2) = 6: still whole.
                 {7, 40, 16, 6, 7},   // Short = 7 > 6: split.
                 {40, 3, 16, 10, 3},
                 {10, 32, 45, 10, 32},  // Fits exactly.
                 {10, 32, 3, 0, 0},     // Budget 0 empties both.
                 {10, 32, 4, 0, 1},     // b=1.
                 {10, 32, 5, 1, 1},     // b=2.
                 {0, 32, 10, 0, 7},
                 {0, 0, 3, 0, 0},
             });
}

TEST(TokenizerTruncationTest, OnlyFirstAndOnlySecond) {
  ExpectRows(TruncationStrategy::kOnlySecond,
             {{11, 78, 16, 11, 2}, {5, 5, 13, 5, 5}, {11, 78, 3, 0, 0}});
  ExpectRows(TruncationStrategy::kOnlyFirst, {{78, 11, 16, 2, 11}, {78, 0, 4, 1, 0}});
}

TEST(TokenizerTruncationTest, OnlySecondErrorsWhenTheFirstFillsTheBudget) {
  // b = 13 and A has 13 tokens: nothing would be left of B; tokenizers raises, and so do we.
  const auto kept = ComputeTruncation(13, 20, Options(TruncationStrategy::kOnlySecond, 16));
  EXPECT_EQ(kept.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kept.status().message(), HasSubstr("only_second"));
  EXPECT_THAT(kept.status().message(), HasSubstr("first text alone has 13 tokens"));
  const auto first = ComputeTruncation(20, 13, Options(TruncationStrategy::kOnlyFirst, 16));
  EXPECT_EQ(first.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(first.status().message(), HasSubstr("second text alone has 13 tokens"));
}

TEST(TokenizerTruncationTest, SingleText) {
  const auto kept =
      ComputeTruncation(100, std::nullopt, Options(TruncationStrategy::kLongestFirst, 10));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->first, 8u);
  EXPECT_EQ(kept->second, 0u);
  EXPECT_EQ(ComputeTruncation(100, std::nullopt, Options(TruncationStrategy::kOnlyFirst, 2))->first,
            0u);
  EXPECT_EQ(ComputeTruncation(5, std::nullopt, Options(TruncationStrategy::kOnlyFirst, 512))->first,
            5u);
  // only_second without a pair: an error once truncation is needed, as in tokenizers.
  EXPECT_EQ(ComputeTruncation(100, std::nullopt, Options(TruncationStrategy::kOnlySecond, 10))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      ComputeTruncation(5, std::nullopt, Options(TruncationStrategy::kOnlySecond, 10)).ok());
}

TEST(TokenizerTruncationTest, MaxLengthBelowTheSpecialTokensIsAnError) {
  for (int64_t max_length : {-1, 0, 1, 2}) {
    const auto pair =
        ComputeTruncation(5, 5, Options(TruncationStrategy::kLongestFirst, max_length));
    EXPECT_EQ(pair.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(pair.status().message(), HasSubstr("special tokens of a text pair"));
  }
  EXPECT_EQ(ComputeTruncation(5, std::nullopt, Options(TruncationStrategy::kLongestFirst, 1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      ComputeTruncation(5, std::nullopt, Options(TruncationStrategy::kLongestFirst, 2)).ok());
}

TEST(TokenizerTruncationTest, DoNotTruncateIgnoresMaxLength) {
  const auto kept = ComputeTruncation(100, 200, Options(TruncationStrategy::kDoNotTruncate, 0));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->first, 100u);
  EXPECT_EQ(kept->second, 200u);
}

TEST(TokenizerTruncationTest, ParsesNames) {
  EXPECT_EQ(*ParseTruncationStrategy("longest_first"), TruncationStrategy::kLongestFirst);
  EXPECT_EQ(*ParseTruncationStrategy("only_first"), TruncationStrategy::kOnlyFirst);
  EXPECT_EQ(*ParseTruncationStrategy("only_second"), TruncationStrategy::kOnlySecond);
  EXPECT_EQ(*ParseTruncationStrategy("do_not_truncate"), TruncationStrategy::kDoNotTruncate);
  EXPECT_EQ(ParseTruncationStrategy("true").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseTruncationSide("left"), TruncationSide::kLeft);
  EXPECT_EQ(*ParseTruncationSide("right"), TruncationSide::kRight);
  EXPECT_EQ(ParseTruncationSide("middle").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TruncationStrategyName(TruncationStrategy::kOnlySecond), "only_second");
}

}  // namespace
}  // namespace dflash
