// Token-id input (Tokenizer::EncodeIds) and Decode's refusals, for both tokenizer sources on the
// v3_hf4 fixture (tests/golden/tokenizer_json), which has spm.model and tokenizer.json.
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tokenizer/deberta_tokenizer.h"
#include "server/tokenizer/tokenizer_json/json_tokenizer.h"

namespace dflash {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::filesystem::path kFixture =
    std::filesystem::path(DFLASH_SOURCE_DIR) / "tests/golden/tokenizer_json/v3_hf4";

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

class TokenIdsTest : public ::testing::TestWithParam<TokenizerSource> {
 protected:
  void SetUp() override {
    if (GetParam() == TokenizerSource::kSentencePiece) {
      auto loaded = DebertaTokenizer::Load(kFixture);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      tokenizer_ = *std::move(loaded);
    } else {
      auto loaded = JsonTokenizer::Load(kFixture);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      tokenizer_ = *std::move(loaded);
    }
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(TokenIdsTest, IdsAreTheSequenceAsGiven) {
  // No [CLS]/[SEP] added; types 0; the ids count as content, not as template tokens.
  const absl::StatusOr<Encoding> encoding = tokenizer_->EncodeIds({7, 5, 6000}, {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  EXPECT_THAT(encoding->ids, ElementsAre(7, 5, 6000));
  EXPECT_THAT(encoding->token_type_ids, ElementsAre(0, 0, 0));
  EXPECT_THAT(encoding->special_tokens_mask, ElementsAre(0, 0, 0));
  EXPECT_EQ(encoding->first_tokens_before_truncation, 3u);
  EXPECT_FALSE(encoding->truncated);

  // The ids of an encoded text, [CLS]/[SEP] included, give that text's model input back.
  const absl::StatusOr<Encoding> text = tokenizer_->Encode("Hello world", std::nullopt, {});
  ASSERT_TRUE(text.ok()) << text.status();
  const absl::StatusOr<Encoding> again = tokenizer_->EncodeIds(text->ids, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ids, text->ids);
}

TEST_P(TokenIdsTest, TruncatesTheWholeSequence) {
  TruncationOptions truncation;
  truncation.strategy = TruncationStrategy::kLongestFirst;
  truncation.max_length = 2;
  const absl::StatusOr<Encoding> right = tokenizer_->EncodeIds({1, 7, 5, 2}, truncation);
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_THAT(right->ids, ElementsAre(1, 7));
  EXPECT_TRUE(right->truncated);
  EXPECT_EQ(right->first_tokens_before_truncation, 4u);
  truncation.side = TruncationSide::kLeft;
  const absl::StatusOr<Encoding> left = tokenizer_->EncodeIds({1, 7, 5, 2}, truncation);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_THAT(left->ids, ElementsAre(5, 2));
}

TEST_P(TokenIdsTest, RefusesIdsOutsideTheVocabularyByIndex) {
  const int32_t size = tokenizer_->vocab_size();
  EXPECT_EQ(size, 6001);
  for (const std::vector<int32_t>& ids : {std::vector<int32_t>{5, size}, {5, -1}}) {
    const absl::StatusOr<Encoding> encoding = tokenizer_->EncodeIds(ids, {});
    EXPECT_EQ(encoding.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(encoding.status().message(), HasSubstr("token id [1]"));
    const absl::StatusOr<std::string> text = tokenizer_->Decode(ids, true);
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(text.status().message(), HasSubstr("token id [1]"));
  }
  EXPECT_EQ(tokenizer_->EncodeIds({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  // An empty list decodes to the empty text, as TEI's tokenizers does.
  const absl::StatusOr<std::string> empty = tokenizer_->Decode({}, true);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, "");
}

TEST_P(TokenIdsTest, DecodeSkipsSpecialTokensOnRequest) {
  const absl::StatusOr<Encoding> text = tokenizer_->Encode("Hello world", std::nullopt, {});
  ASSERT_TRUE(text.ok()) << text.status();
  const absl::StatusOr<std::string> skipped = tokenizer_->Decode(text->ids, true);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(*skipped, "Hello world");
  const absl::StatusOr<std::string> kept = tokenizer_->Decode(text->ids, false);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, "[CLS] Hello world[SEP]");
}

INSTANTIATE_TEST_SUITE_P(BothSources, TokenIdsTest,
                         ::testing::Values(TokenizerSource::kSentencePiece,
                                           TokenizerSource::kTokenizerJson),
                         [](const auto& param) {
                           return std::string(TokenizerSourceName(param.param));
                         });

// A file whose decoder is not implemented still loads and encodes; Decode names the JSON path.
TEST(JsonDecoderTest, UnsupportedDecoderIsFailedPrecondition) {
  nlohmann::json file = nlohmann::json::parse(ReadText(kFixture / "tokenizer.json"));
  file["decoder"] = {{"type", "ByteLevel"}};
  auto tokenizer = JsonTokenizer::FromJson(file.dump(), TokenizerConfig{});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_TRUE((*tokenizer)->Encode("Hello", std::nullopt, {}).ok());
  const absl::StatusOr<std::string> text = (*tokenizer)->Decode({7}, true);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(text.status().message(), HasSubstr("decoder.type"));
  EXPECT_THAT(text.status().message(), HasSubstr("ByteLevel"));

  file["decoder"] = nullptr;
  tokenizer = JsonTokenizer::FromJson(file.dump(), TokenizerConfig{});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->Decode({7}, true).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JsonDecoderTest, MetaspaceNeverKeepsTheFirstSpace) {
  nlohmann::json file = nlohmann::json::parse(ReadText(kFixture / "tokenizer.json"));
  file["decoder"]["prepend_scheme"] = "never";
  auto tokenizer = JsonTokenizer::FromJson(file.dump(), TokenizerConfig{});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const absl::StatusOr<Encoding> encoding = (*tokenizer)->Encode("Hello world", std::nullopt, {});
  ASSERT_TRUE(encoding.ok());
  const absl::StatusOr<std::string> text = (*tokenizer)->Decode(encoding->ids, true);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, " Hello world");

  file["decoder"]["replacement"] = "ab";
  EXPECT_EQ(JsonTokenizer::FromJson(file.dump(), TokenizerConfig{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dflash
