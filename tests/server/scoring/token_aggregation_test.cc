// Token classification results: labels per token, word boundaries, B-/I- grouping, the word
// strategies and ignore_labels, on hand-made probabilities.
#include "server/scoring/token_aggregation.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dflash {
namespace {

const std::vector<std::string> kLabels = {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"};
const std::vector<std::string> kIgnoreO = {"O"};

// Probabilities with `label` at `top` and the rest spread evenly.
std::vector<float> Peak(int label, float top) {
  std::vector<float> p(kLabels.size(), (1.0f - top) / static_cast<float>(kLabels.size() - 1));
  p[static_cast<size_t>(label)] = top;
  return p;
}

ScoredToken Token(int index, std::string piece, uint32_t begin, uint32_t end, int label,
                  float top) {
  return ScoredToken{index, std::move(piece), false, begin, end, Peak(label, top)};
}

// "Ada Lovelace in Paris": ▁Ada | ▁Love | lace | ▁in | ▁Par | is, spans as the tokenizer gives
// them (the space before a word belongs to its first piece).
constexpr absl::string_view kText = "Ada Lovelace in Paris";

std::vector<ScoredToken> Tokens(std::vector<std::pair<int, float>> labels) {
  const std::vector<std::tuple<std::string, uint32_t, uint32_t>> pieces = {
      {"\u2581Ada", 0, 3},  {"\u2581Love", 3, 8},  {"lace", 8, 12},
      {"\u2581in", 12, 15}, {"\u2581Par", 15, 19}, {"is", 19, 21}};
  std::vector<ScoredToken> tokens;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& [piece, begin, end] = pieces[i];
    tokens.push_back(
        Token(static_cast<int>(i) + 1, piece, begin, end, labels[i].first, labels[i].second));
  }
  return tokens;
}

TEST(TokenAggregationTest, WordContinuationFollowsThePipelineHeuristic) {
  EXPECT_FALSE(ContinuesWord(kText, 0));   // The text's start.
  EXPECT_TRUE(ContinuesWord(kText, 8));    // "lace" after "Love".
  EXPECT_FALSE(ContinuesWord(kText, 3));   // Starts with the space.
  EXPECT_FALSE(ContinuesWord(kText, 4));   // After the space.
  EXPECT_FALSE(ContinuesWord(kText, 99));  // Outside the text.
  EXPECT_TRUE(ContinuesWord("a\tb", 2));   // Only the ASCII space separates words.
  EXPECT_TRUE(ContinuesWord("ab", 2));     // An empty span at the end, after a letter.
}

TEST(TokenAggregationTest, PiecesJoinLikeAMetaspaceDecoder) {
  using Pieces = std::vector<std::string>;
  EXPECT_EQ(JoinPieces(Pieces{"\u2581He", "ll", "o"}), "Hello");
  EXPECT_EQ(JoinPieces(Pieces{"\u2581I", "\u2581met"}), "I met");
  EXPECT_EQ(JoinPieces(Pieces{"\u2581", "\u2581x"}), " x");
  EXPECT_EQ(JoinPieces(Pieces{"\u2581\u2581x"}), "x");  // Every "▁" of the first piece goes.
  EXPECT_EQ(JoinPieces(Pieces{" x"}), " x");            // A real space stays.
  EXPECT_EQ(JoinPieces(Pieces{"I", "met"}), "Imet");    // Joined words have lost their "▁".
  EXPECT_EQ(JoinPieces(Pieces{}), "");
}

TEST(TokenAggregationTest, NoneLabelsEveryTokenAndDropsIgnoredOnes) {
  const std::vector<ScoredToken> tokens =
      Tokens({{1, 0.9f}, {1, 0.8f}, {2, 0.7f}, {0, 0.6f}, {3, 0.5f}, {4, 0.4f}});
  const std::vector<TokenEntity> entities =
      AggregateTokens(kText, tokens, kLabels, AggregationStrategy::kNone, kIgnoreO);
  ASSERT_EQ(entities.size(), 5u);
  EXPECT_EQ(entities[0].label, "B-PER");
  EXPECT_EQ(entities[0].label_id, 1);
  EXPECT_FLOAT_EQ(entities[0].score, 0.9f);
  EXPECT_EQ(entities[0].word, "\u2581Ada");
  EXPECT_EQ(entities[0].token_index, 1);
  EXPECT_EQ(entities[2].label, "I-PER");
  EXPECT_EQ(entities[2].word, "lace");
  EXPECT_EQ(entities[2].begin, 8u);
  EXPECT_EQ(entities[2].end, 12u);
  EXPECT_EQ(entities[3].label, "B-LOC");  // "▁in" (O) is gone.
  EXPECT_EQ(entities[3].token_index, 5);

  // Nothing ignored: all six.
  EXPECT_EQ(AggregateTokens(kText, tokens, kLabels, AggregationStrategy::kNone, {}).size(), 6u);
}

TEST(TokenAggregationTest, SimpleGroupsAdjacentTagsAndStartsAGroupAtEveryB) {
  const std::vector<ScoredToken> tokens =
      Tokens({{1, 0.9f}, {1, 0.8f}, {2, 0.7f}, {0, 0.6f}, {3, 0.5f}, {4, 0.4f}});
  const std::vector<TokenEntity> groups =
      AggregateTokens(kText, tokens, kLabels, AggregationStrategy::kSimple, kIgnoreO);
  ASSERT_EQ(groups.size(), 3u);
  // "▁Ada" is a group of its own: the next token begins (B-) another.
  EXPECT_EQ(groups[0].label, "PER");
  EXPECT_EQ(groups[0].word, "Ada");
  EXPECT_FLOAT_EQ(groups[0].score, 0.9f);
  EXPECT_EQ(groups[0].label_id, -1);
  EXPECT_EQ(groups[0].token_index, -1);
  EXPECT_EQ(groups[1].label, "PER");
  EXPECT_EQ(groups[1].word, "Lovelace");
  EXPECT_FLOAT_EQ(groups[1].score, 0.75f);
  EXPECT_EQ(groups[1].begin, 3u);  // The space before "Lovelace", as the token's span has it.
  EXPECT_EQ(groups[1].end, 12u);
  EXPECT_EQ(groups[2].label, "LOC");
  EXPECT_EQ(groups[2].word, "Paris");
  EXPECT_EQ(groups[2].begin, 15u);
  EXPECT_EQ(groups[2].end, 21u);
}

TEST(TokenAggregationTest, InsideWithoutBeginStartsAGroupNamedByItsTag) {
  // I-LOC after O, then I-PER: each its own group, named after the tag.
  const std::vector<ScoredToken> tokens =
      Tokens({{0, 0.9f}, {4, 0.8f}, {4, 0.6f}, {2, 0.7f}, {0, 0.6f}, {0, 0.6f}});
  const std::vector<TokenEntity> groups =
      AggregateTokens(kText, tokens, kLabels, AggregationStrategy::kSimple, kIgnoreO);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].label, "LOC");
  EXPECT_EQ(groups[0].word, "Lovelace");
  EXPECT_FLOAT_EQ(groups[0].score, 0.7f);
  EXPECT_EQ(groups[1].label, "PER");
  EXPECT_EQ(groups[1].word, "in");  // A one-token entity.
}

TEST(TokenAggregationTest, WordStrategiesAgreeOnWholeWords) {
  // "▁Love" says B-PER weakly, "lace" says B-LOC strongly, then I-LOC moderately.
  std::vector<ScoredToken> tokens =
      Tokens({{0, 0.9f}, {1, 0.4f}, {3, 0.9f}, {0, 0.9f}, {3, 0.6f}, {4, 0.6f}});
  tokens[2].probabilities = {0.02f, 0.35f, 0.01f, 0.6f, 0.02f};
  tokens[1].probabilities = {0.05f, 0.5f, 0.05f, 0.35f, 0.05f};

  const std::vector<TokenEntity> first =
      AggregateTokens(kText, tokens, kLabels, AggregationStrategy::kFirst, kIgnoreO);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].label, "PER");  // Word "Lovelace" takes "▁Love"'s B-PER.
  EXPECT_EQ(first[0].word, "Lovelace");
  EXPECT_FLOAT_EQ(first[0].score, 0.5f);
  EXPECT_EQ(first[1].label, "LOC");  // "Paris" takes "▁Par"'s B-LOC.
  EXPECT_EQ(first[1].word, "Paris");
  EXPECT_FLOAT_EQ(first[1].score, 0.6f);

  const std::vector<TokenEntity> max =
      AggregateTokens(kText, tokens, kLabels, AggregationStrategy::kMax, kIgnoreO);
  ASSERT_EQ(max.size(), 2u);
  EXPECT_EQ(max[0].label, "LOC");  // "lace"'s 0.6 is the word's most confident label.
  EXPECT_FLOAT_EQ(max[0].score, 0.6f);
  EXPECT_EQ(max[0].begin, 3u);
  EXPECT_EQ(max[0].end, 12u);

  const std::vector<TokenEntity> average =
      AggregateTokens(kText, tokens, kLabels, AggregationStrategy::kAverage, kIgnoreO);
  ASSERT_EQ(average.size(), 2u);
  EXPECT_EQ(average[0].label, "LOC");  // Means: B-PER 0.425, B-LOC 0.475.
  EXPECT_FLOAT_EQ(average[0].score, 0.475f);
  EXPECT_EQ(average[1].label, "LOC");
  EXPECT_EQ(average[1].word, "Paris");
}

TEST(TokenAggregationTest, GroupsOfWordsJoinTheirWordsWithoutSpaces) {
  // B-PER I-PER over two words: one group whose word is the words joined as pieces.
  const std::vector<ScoredToken> tokens =
      Tokens({{1, 0.9f}, {2, 0.8f}, {2, 0.8f}, {0, 0.9f}, {0, 0.9f}, {0, 0.9f}});
  const std::vector<TokenEntity> groups =
      AggregateTokens(kText, tokens, kLabels, AggregationStrategy::kFirst, kIgnoreO);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].word, "AdaLovelace");
  EXPECT_EQ(groups[0].begin, 0u);
  EXPECT_EQ(groups[0].end, 12u);
  EXPECT_FLOAT_EQ(groups[0].score, 0.85f);
}

TEST(TokenAggregationTest, UnknownTokensShowTheirTextAndStartAWord) {
  constexpr absl::string_view text = "x\xC3\xBCy";  // "xüy": x | [UNK] | y.
  std::vector<ScoredToken> tokens = {
      ScoredToken{1, "\u2581x", false, 0, 1, Peak(3, 0.9f)},
      ScoredToken{2, "[UNK]", true, 1, 3, Peak(4, 0.9f)},
      ScoredToken{3, "y", false, 3, 4, Peak(1, 0.9f)},
  };
  const std::vector<TokenEntity> none =
      AggregateTokens(text, tokens, kLabels, AggregationStrategy::kNone, kIgnoreO);
  ASSERT_EQ(none.size(), 3u);
  EXPECT_EQ(none[1].word, "\xC3\xBC");
  // The unknown token starts a word; "y" continues it.
  const std::vector<TokenEntity> first =
      AggregateTokens(text, tokens, kLabels, AggregationStrategy::kFirst, kIgnoreO);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].label, "LOC");
  EXPECT_EQ(first[0].word, "x\xC3\xBCy");  // x (B-LOC) + üy (I-LOC, from the unknown token).
  EXPECT_EQ(first[0].end, 4u);
}

TEST(TokenAggregationTest, EmptyAndAllIgnored) {
  for (AggregationStrategy strategy :
       {AggregationStrategy::kNone, AggregationStrategy::kSimple, AggregationStrategy::kFirst,
        AggregationStrategy::kAverage, AggregationStrategy::kMax}) {
    SCOPED_TRACE(AggregationStrategyName(strategy));
    EXPECT_TRUE(AggregateTokens("", {}, kLabels, strategy, kIgnoreO).empty());
    const std::vector<ScoredToken> outside =
        Tokens({{0, 0.9f}, {0, 0.8f}, {0, 0.7f}, {0, 0.6f}, {0, 0.5f}, {0, 0.4f}});
    EXPECT_TRUE(AggregateTokens(kText, outside, kLabels, strategy, kIgnoreO).empty());
    // Not ignored, "O" is an entity like any other (one group: its tag never begins).
    const std::vector<TokenEntity> kept = AggregateTokens(kText, outside, kLabels, strategy, {});
    ASSERT_FALSE(kept.empty());
    EXPECT_EQ(kept[0].label, "O");
  }
}

TEST(TokenAggregationTest, LabelsOutsideTheBioSchemeAreTheirOwnTags) {
  const std::vector<std::string> labels = {"O", "MISC", "X-Y"};
  const std::vector<std::string> kIgnoreY = {"Y"};
  std::vector<ScoredToken> tokens = Tokens({{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}});
  const std::vector<std::vector<float>> probabilities = {{0.1f, 0.8f, 0.1f}, {0.1f, 0.8f, 0.1f},
                                                         {0.1f, 0.1f, 0.8f}, {0.1f, 0.1f, 0.8f},
                                                         {0.8f, 0.1f, 0.1f}, {0.1f, 0.8f, 0.1f}};
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i].probabilities = probabilities[i];
  const std::vector<TokenEntity> groups =
      AggregateTokens(kText, tokens, labels, AggregationStrategy::kSimple, kIgnoreY);
  // MISC MISC | X-Y X-Y | O | MISC: "X-Y" groups are reported as "Y" and ignored as such.
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].label, "MISC");
  EXPECT_EQ(groups[0].word, "Ada Love");
  EXPECT_EQ(groups[1].label, "O");
  EXPECT_EQ(groups[1].word, "Par");
  EXPECT_EQ(groups[2].label, "MISC");
  EXPECT_EQ(groups[2].word, "is");
  EXPECT_EQ(AggregateTokens(kText, tokens, labels, AggregationStrategy::kSimple, {}).size(), 4u);
}

}  // namespace
}  // namespace dflash
