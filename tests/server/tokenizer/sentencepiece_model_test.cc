#include "server/tokenizer/sentencepiece_model.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/scratch_directory.h"

namespace dflash {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<SentencePieceModel> LoadFixture() {
  SentencePieceError error;
  auto model = SentencePieceModel::Load(FixtureSpmModel(), &error);
  EXPECT_NE(model, nullptr) << error.message;
  return model;
}

std::vector<int32_t> Ids(const std::vector<SentencePieceToken>& tokens) {
  std::vector<int32_t> ids;
  for (const auto& token : tokens) ids.push_back(token.id);
  return ids;
}

TEST(TokenizerSentencePieceModelTest, LoadsTheFixtureInDebertaLayout) {
  const auto model = LoadFixture();
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->piece_count(), 4000);
  EXPECT_EQ(model->IdToPiece(0), "[PAD]");
  EXPECT_EQ(model->IdToPiece(1), "[CLS]");
  EXPECT_EQ(model->IdToPiece(2), "[SEP]");
  EXPECT_EQ(model->IdToPiece(3), "[UNK]");
  EXPECT_EQ(model->unk_id(), 3);
  EXPECT_EQ(model->PieceToId("[SEP]"), 2);
  EXPECT_EQ(model->PieceToId("\xE2\x96\x81world"), 144);  // "▁world"
  EXPECT_EQ(model->PieceToId("no-such-piece"), -1);
  EXPECT_EQ(model->PieceToId("[MASK]"), -1);
  EXPECT_EQ(model->IdToPiece(4000), "");
  EXPECT_EQ(model->IdToPiece(-1), "");
}

TEST(TokenizerSentencePieceModelTest, EncodesWithByteOffsets) {
  const auto model = LoadFixture();
  ASSERT_NE(model, nullptr);
  std::vector<SentencePieceToken> tokens;
  SentencePieceError error;
  ASSERT_TRUE(model->Encode("Hello world", &tokens, &error)) << error.message;
  // ▁He ll o ▁world; the space before "world" belongs to its token.
  ASSERT_EQ(Ids(tokens), (std::vector<int32_t>{91, 387, 1729, 144}));
  EXPECT_EQ(tokens[0].byte_begin, 0u);
  EXPECT_EQ(tokens[0].byte_end, 2u);
  EXPECT_EQ(tokens[2].byte_begin, 4u);
  EXPECT_EQ(tokens[2].byte_end, 5u);
  EXPECT_EQ(tokens[3].byte_begin, 5u);
  EXPECT_EQ(tokens[3].byte_end, 11u);

  // Two emoji merge into one [UNK]; the standalone "▁" covers no bytes.
  ASSERT_TRUE(model->Encode(" \xF0\x9F\x98\x80\xF0\x9F\x98\x80 a ", &tokens, &error));
  ASSERT_EQ(Ids(tokens), (std::vector<int32_t>{19, 3, 11}));
  EXPECT_EQ(tokens[0].byte_begin, tokens[0].byte_end);
  EXPECT_EQ(tokens[1].byte_begin, 1u);
  EXPECT_EQ(tokens[1].byte_end, 9u);

  ASSERT_TRUE(model->Encode("", &tokens, &error));
  EXPECT_TRUE(tokens.empty());
  ASSERT_TRUE(model->Encode(" \t\n ", &tokens, &error));
  EXPECT_TRUE(tokens.empty());
}

// Encode reuses its output messages for texts up to 16 KiB and takes a fresh one above: a text
// encoded after longer ones gets exactly its own pieces and offsets, on either path.
TEST(TokenizerSentencePieceModelTest, EncodingAfterLongerTextsGivesOnlyTheTextsOwnPieces) {
  const auto model = LoadFixture();
  ASSERT_NE(model, nullptr);
  SentencePieceError error;
  std::vector<SentencePieceToken> first;
  ASSERT_TRUE(model->Encode("Hello world", &first, &error)) << error.message;
  std::string retained;  // Under 16 KiB.
  std::string own;       // Over 16 KiB.
  while (retained.size() < (10 << 10)) retained += "Hello world ";
  while (own.size() < (40 << 10)) own += "Hello world ";
  std::vector<SentencePieceToken> tokens;
  ASSERT_TRUE(model->Encode(own, &tokens, &error)) << error.message;
  const size_t own_count = tokens.size();
  ASSERT_TRUE(model->Encode(retained, &tokens, &error)) << error.message;
  const size_t retained_count = tokens.size();
  EXPECT_EQ(own_count * first.size() * retained.size(), retained_count * first.size() * own.size());
  EXPECT_EQ(retained_count % first.size(), 0u);
  EXPECT_EQ(tokens.back().byte_end, retained.size() - 1);  // The last space is no token.
  std::vector<SentencePieceToken> again;
  ASSERT_TRUE(model->Encode("Hello world", &again, &error)) << error.message;
  ASSERT_EQ(Ids(again), Ids(first));
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(again[i].byte_begin, first[i].byte_begin);
    EXPECT_EQ(again[i].byte_end, first[i].byte_end);
  }
}

TEST(TokenizerSentencePieceModelTest, MissingFileNamesIt) {
  ScratchDirectory dir;
  SentencePieceError error;
  EXPECT_EQ(SentencePieceModel::Load(dir.path() / "spm.model", &error), nullptr);
  EXPECT_EQ(error.kind, SentencePieceError::Kind::kNotFound);
  EXPECT_THAT(error.message, HasSubstr((dir.path() / "spm.model").string()));
  EXPECT_THAT(error.message, HasSubstr("no such file"));
}

TEST(TokenizerSentencePieceModelTest, CorruptFileIsInvalid) {
  ScratchDirectory dir;
  dir.Write("spm.model", "this is not a protobuf \xFF\xFF\xFF");
  SentencePieceError error;
  EXPECT_EQ(SentencePieceModel::Load(dir.path() / "spm.model", &error), nullptr);
  EXPECT_EQ(error.kind, SentencePieceError::Kind::kInvalidModel);
  EXPECT_THAT(error.message, HasSubstr("spm.model: not a valid sentencepiece model"));
}

TEST(TokenizerSentencePieceModelTest, ConcurrentEncodesMatchSequentialOnes) {
  const auto model = LoadFixture();
  ASSERT_NE(model, nullptr);
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog.",
      "Hello world",
      "\xE6\x97\xA5\xE6\x9C\xAC",
      "A good reranker places the most relevant passage first, even when the query is short.",
      "   spaced    out   ",
      "\xEF\xBC\xA6\xEF\xBD\x95\xEF\xBD\x8C\xEF\xBD\x8C"};
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& text : texts) {
    std::vector<SentencePieceToken> tokens;
    SentencePieceError error;
    ASSERT_TRUE(model->Encode(text, &tokens, &error));
    expected.push_back(Ids(tokens));
  }
  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<SentencePieceToken> tokens;
      SentencePieceError error;
      for (int round = 0; round < 300; ++round) {
        const size_t i = static_cast<size_t>(round + t) % texts.size();
        if (!model->Encode(texts[i], &tokens, &error) || Ids(tokens) != expected[i]) {
          ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace dflash
