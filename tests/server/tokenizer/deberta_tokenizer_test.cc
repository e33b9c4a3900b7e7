#include "server/tokenizer/deberta_tokenizer.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/scratch_directory.h"

namespace dflash {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// Fixture ids (tests/golden/tokenizer/spm.model): "Hello world" = ▁He ll o ▁world.
constexpr int32_t kHe = 91;
constexpr int32_t kLl = 387;
constexpr int32_t kO = 1729;
constexpr int32_t kWorld = 144;
constexpr int32_t kCls = 1;
constexpr int32_t kSep = 2;
constexpr int32_t kMask = 4000;

class DebertaTokenizerTest : public ::testing::Test {
 protected:
  std::unique_ptr<DebertaTokenizer> Load(absl::string_view tokenizer_config = "",
                                         TokenizerOptions options = {}) {
    dir_.CopySpmModel();
    if (!tokenizer_config.empty()) dir_.Write("tokenizer_config.json", tokenizer_config);
    auto tokenizer = DebertaTokenizer::Load(dir_.path(), options);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
  }

  ScratchDirectory dir_;
};

TEST_F(DebertaTokenizerTest, SpecialIdsAndVocabulary) {
  const auto tokenizer = Load();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->pad_id(), 0);
  EXPECT_EQ(tokenizer->cls_id(), 1);
  EXPECT_EQ(tokenizer->sep_id(), 2);
  EXPECT_EQ(tokenizer->unk_id(), 3);
  EXPECT_EQ(tokenizer->mask_id(), kMask);
  EXPECT_EQ(tokenizer->piece_count(), 4000);
  EXPECT_EQ(tokenizer->vocab_size(), 4001);
  EXPECT_EQ(tokenizer->TokenText(kMask), "[MASK]");
  EXPECT_EQ(tokenizer->TokenText(kWorld), "\xE2\x96\x81world");
  EXPECT_EQ(tokenizer->TokenText(kCls), "[CLS]");
  EXPECT_EQ(tokenizer->TokenText(4001), "");
  EXPECT_EQ(tokenizer->DefaultTruncation().strategy, TruncationStrategy::kDoNotTruncate);
}

TEST_F(DebertaTokenizerTest, EncodesSingleText) {
  const auto tokenizer = Load();
  ASSERT_NE(tokenizer, nullptr);
  const auto encoding = tokenizer->Encode("Hello world", std::nullopt, {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  EXPECT_THAT(encoding->ids, ElementsAre(kCls, kHe, kLl, kO, kWorld, kSep));
  EXPECT_THAT(encoding->token_type_ids, ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_THAT(encoding->special_tokens_mask, ElementsAre(1, 0, 0, 0, 0, 1));
  EXPECT_THAT(encoding->sources,
              ElementsAre(TokenSource::kTemplate, TokenSource::kFirst, TokenSource::kFirst,
                          TokenSource::kFirst, TokenSource::kFirst, TokenSource::kTemplate));
  EXPECT_THAT(encoding->offsets, ElementsAre(ByteSpan{0, 0}, ByteSpan{0, 2}, ByteSpan{2, 4},
                                             ByteSpan{4, 5}, ByteSpan{5, 11}, ByteSpan{0, 0}));
  EXPECT_EQ(encoding->first_tokens_before_truncation, 4u);
  EXPECT_FALSE(encoding->truncated);
}

TEST_F(DebertaTokenizerTest, EncodesPairWithTokenTypes) {
  const auto tokenizer = Load();
  ASSERT_NE(tokenizer, nullptr);
  const auto encoding = tokenizer->Encode("Hello", "world", {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  EXPECT_THAT(encoding->ids, ElementsAre(kCls, kHe, kLl, kO, kSep, kWorld, kSep));
  EXPECT_THAT(encoding->token_type_ids, ElementsAre(0, 0, 0, 0, 0, 1, 1));
  EXPECT_THAT(encoding->special_tokens_mask, ElementsAre(1, 0, 0, 0, 1, 0, 1));
  EXPECT_EQ(encoding->sources[5], TokenSource::kSecond);
  EXPECT_EQ(encoding->offsets[5], (ByteSpan{0, 5}));  // Into the second text.
  EXPECT_EQ(encoding->second_tokens_before_truncation, 1u);
}

TEST_F(DebertaTokenizerTest, EmptyAndWhitespaceTexts) {
  const auto tokenizer = Load();
  ASSERT_NE(tokenizer, nullptr);
  for (const char* text : {"", " ", "\t\n  \r\n", "\xC2\xA0"}) {
    const auto encoding = tokenizer->Encode(text, std::nullopt, {});
    ASSERT_TRUE(encoding.ok()) << encoding.status();
    EXPECT_THAT(encoding->ids, ElementsAre(kCls, kSep)) << '"' << text << '"';
  }
  const auto pair = tokenizer->Encode("", "", {});
  ASSERT_TRUE(pair.ok());
  EXPECT_THAT(pair->ids, ElementsAre(kCls, kSep, kSep));
  EXPECT_THAT(pair->token_type_ids, ElementsAre(0, 0, 1));
}

TEST_F(DebertaTokenizerTest, SpecialTokensInsideUserTextAreSplitOut) {
  const auto tokenizer = Load();
  ASSERT_NE(tokenizer, nullptr);
  const auto encoding = tokenizer->Encode("Hello [SEP] world[MASK]", std::nullopt, {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  EXPECT_THAT(encoding->ids, ElementsAre(kCls, kHe, kLl, kO, kSep, kWorld, kMask, kSep));
  // The in-text [SEP] is A's token: type 0, not a template token, offsets of "[SEP]".
  EXPECT_EQ(encoding->sources[4], TokenSource::kFirst);
  EXPECT_EQ(encoding->special_tokens_mask[4], 0);
  EXPECT_EQ(encoding->offsets[4], (ByteSpan{6, 11}));
  EXPECT_EQ(encoding->offsets[6], (ByteSpan{17, 23}));
  // Case-sensitive: "[sep]" is ordinary text.
  const auto lower = tokenizer->Encode("[sep]", std::nullopt, {});
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(std::count(lower->ids.begin(), lower->ids.end(), kSep), 1);
  EXPECT_GT(lower->ids.size(), 3u);
}

TEST_F(DebertaTokenizerTest, AddedTokensUseLongestMatchAndFollowMask) {
  const auto tokenizer = Load(R"({"additional_special_tokens": ["<e>", "[MASK]x"]})");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->mask_id(), kMask);
  EXPECT_EQ(tokenizer->vocab_size(), 4003);
  const auto encoding = tokenizer->Encode("[MASK]x<e>[MASK]", std::nullopt, {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  EXPECT_THAT(encoding->ids, ElementsAre(kCls, 4002, 4001, kMask, kSep));
  EXPECT_EQ(tokenizer->TokenText(4002), "[MASK]x");
}

TEST_F(DebertaTokenizerTest, ExplicitMaskIdFromAddedTokensJson) {
  dir_.Write("added_tokens.json", R"({"[MASK]": 4100})");
  const auto tokenizer = Load();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->mask_id(), 4100);
  EXPECT_EQ(tokenizer->vocab_size(), 4101);
}

TEST_F(DebertaTokenizerTest, LowerCaseAndPunctuationSettings) {
  const auto tokenizer = Load(R"({"do_lower_case": true, "split_by_punct": true})");
  ASSERT_NE(tokenizer, nullptr);
  const auto encoding = tokenizer->Encode("HELLO,World", std::nullopt, {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  std::vector<std::string> pieces;
  for (int32_t id : encoding->ids) pieces.emplace_back(tokenizer->TokenText(id));
  // Each piece gets its own "▁": "hello" "," "world".
  EXPECT_THAT(pieces, ElementsAre("[CLS]", "\xE2\x96\x81hell", "o", "\xE2\x96\x81", ",",
                                  "\xE2\x96\x81world", "[SEP]"));
  EXPECT_THAT(encoding->offsets,
              ElementsAre(ByteSpan{0, 0}, ByteSpan{0, 4}, ByteSpan{4, 5}, ByteSpan{5, 5},
                          ByteSpan{5, 6}, ByteSpan{6, 11}, ByteSpan{0, 0}));
}

TEST_F(DebertaTokenizerTest, TruncatesWithTheRustRules) {
  const auto tokenizer = Load();
  ASSERT_NE(tokenizer, nullptr);
  TruncationOptions truncation;
  truncation.strategy = TruncationStrategy::kLongestFirst;
  truncation.max_length = 7;
  // A = 4 tokens, B = 4 tokens, budget 4: A 2, B 2.
  const auto encoding = tokenizer->Encode("Hello world", "Hello world", truncation);
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  EXPECT_THAT(encoding->ids, ElementsAre(kCls, kHe, kLl, kSep, kHe, kLl, kSep));
  EXPECT_TRUE(encoding->truncated);
  EXPECT_EQ(encoding->first_tokens_before_truncation, 4u);
  EXPECT_EQ(encoding->second_tokens_before_truncation, 4u);

  truncation.side = TruncationSide::kLeft;
  const auto left = tokenizer->Encode("Hello world", "Hello world", truncation);
  ASSERT_TRUE(left.ok());
  EXPECT_THAT(left->ids, ElementsAre(kCls, kO, kWorld, kSep, kO, kWorld, kSep));

  truncation.strategy = TruncationStrategy::kOnlySecond;
  truncation.max_length = 6;
  const auto error = tokenizer->Encode("Hello world", "Hello world", truncation);
  EXPECT_EQ(error.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(error.status().message(), HasSubstr("only_second"));
}

TEST_F(DebertaTokenizerTest, AssembleOfEncodedTextsEqualsEncode) {
  const auto tokenizer = Load();
  ASSERT_NE(tokenizer, nullptr);
  const auto query = tokenizer->EncodeText("what is the capital of france");
  ASSERT_TRUE(query.ok());
  TruncationOptions truncation{TruncationStrategy::kLongestFirst, TruncationSide::kRight, 16};
  for (const char* passage : {"Paris is the capital of France.", "", "Berlin [SEP] Germany"}) {
    const auto tokens = tokenizer->EncodeText(passage);
    ASSERT_TRUE(tokens.ok());
    const auto assembled = tokenizer->Assemble(*query, &*tokens, truncation);
    const auto direct = tokenizer->Encode("what is the capital of france", passage, truncation);
    ASSERT_TRUE(assembled.ok() && direct.ok());
    EXPECT_EQ(assembled->ids, direct->ids);
    EXPECT_EQ(assembled->token_type_ids, direct->token_type_ids);
    EXPECT_EQ(assembled->offsets, direct->offsets);
  }
}

TEST_F(DebertaTokenizerTest, RejectsOversizedInputBeforeAnyWork) {
  TokenizerOptions options;
  options.max_input_bytes = 16;
  const auto tokenizer = Load("", options);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_TRUE(tokenizer->Encode(std::string(16, 'a'), std::nullopt, {}).ok());
  // Oversized and invalid UTF-8: the size is reported.
  const auto too_long = tokenizer->Encode(std::string(17, '\xFF'), std::nullopt, {});
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(too_long.status().message(),
            "text: 17 bytes, more than the limit of 16 bytes per text");
  const auto pair = tokenizer->Encode("fine", std::string(20, 'b'), {});
  EXPECT_THAT(pair.status().message(), HasSubstr("second text: 20 bytes"));
  EXPECT_EQ(tokenizer->EncodeText(std::string(17, 'a')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DebertaTokenizerTest, CheckTextNamesTheTextAndEncodeTextChecksWithIt) {
  TokenizerOptions options;
  options.max_input_bytes = 16;
  const auto tokenizer = Load("", options);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_TRUE(tokenizer->CheckText(std::string(16, 'a'), "inputs[0].text").ok());
  EXPECT_TRUE(tokenizer->CheckText("caf\xC3\xA9", "inputs[0].text").ok());
  // The size first: an oversized text is not scanned.
  const absl::Status too_long = tokenizer->CheckText(std::string(17, '\xFF'), "inputs[0].text");
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(too_long.message(),
            "inputs[0].text: 17 bytes, more than the limit of 16 bytes per text");
  const absl::Status invalid = tokenizer->CheckText("bad \xFF", "inputs[0].text_pair");
  EXPECT_EQ(invalid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(invalid.message(),
              HasSubstr("inputs[0].text_pair is not valid UTF-8: bad byte sequence at byte "
                        "offset 4"));
  // EncodeText reports the same errors under the name it is given.
  EXPECT_EQ(tokenizer->EncodeText(std::string(17, 'a'), "query").status().message(),
            "query: 17 bytes, more than the limit of 16 bytes per text");
  EXPECT_THAT(tokenizer->EncodeText("bad \xFF", "documents[2]").status().message(),
              HasSubstr("documents[2] is not valid UTF-8"));
  EXPECT_TRUE(tokenizer->EncodeText("fine", "query").ok());
}

TEST_F(DebertaTokenizerTest, RejectsInvalidUtf8) {
  const auto tokenizer = Load();
  ASSERT_NE(tokenizer, nullptr);
  for (const std::string text :
       {"ab\x80", "\xC0\x80", "\xED\xA0\x80", "caf\xC3", "\xF4\x90\x80\x80"}) {
    const auto encoding = tokenizer->Encode(text, std::nullopt, {});
    EXPECT_EQ(encoding.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(encoding.status().message(), HasSubstr("text is not valid UTF-8"));
  }
  const auto pair = tokenizer->Encode("fine", "bad \xFF", {});
  EXPECT_THAT(pair.status().message(), HasSubstr("second text is not valid UTF-8: bad byte "
                                                 "sequence at byte offset 4"));
}

TEST_F(DebertaTokenizerTest, InvalidOptions) {
  dir_.CopySpmModel();
  TokenizerOptions options;
  options.max_input_bytes = 0;
  EXPECT_EQ(DebertaTokenizer::Load(dir_.path(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DebertaTokenizerTest, MissingSpmModelNamesTheFile) {
  dir_.Write("tokenizer_config.json", "{}");
  const auto tokenizer = DebertaTokenizer::Load(dir_.path());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tokenizer.status().message(), HasSubstr((dir_.path() / "spm.model").string()));
}

TEST_F(DebertaTokenizerTest, BadTokenizerConfigNamesFileAndField) {
  dir_.CopySpmModel();
  dir_.Write("tokenizer_config.json", R"({"do_lower_case": 1})");
  const auto tokenizer = DebertaTokenizer::Load(dir_.path());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tokenizer.status().message(),
              HasSubstr("tokenizer_config.json: field 'do_lower_case' must be true or false"));
}

TEST_F(DebertaTokenizerTest, ConcurrentEncodesAgree) {
  const auto tokenizer = Load(R"({"do_lower_case": true, "split_by_punct": true})");
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"Hello, World!", "\xC4\xB0stanbul"},
      {"The quick brown fox.", "[MASK] jumps"},
      {"\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80"}};
  const TruncationOptions truncation{TruncationStrategy::kLongestFirst, TruncationSide::kRight, 9};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& [a, b] : inputs) expected.push_back(tokenizer->Encode(a, b, truncation)->ids);
  std::vector<int> mismatches(6, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        const size_t i = static_cast<size_t>(round + t) % inputs.size();
        const auto encoding = tokenizer->Encode(inputs[i].first, inputs[i].second, truncation);
        if (!encoding.ok() || encoding->ids != expected[i]) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAreArray(std::vector<int>(6, 0)));
}

TEST(DebertaTokenizerDemoModelTest, LoadsTheBundledDemoCheckpoint) {
  const auto tokenizer = DebertaTokenizer::Load(DFLASH_DEMO_MODEL_DIR);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->piece_count(), 4000);
  EXPECT_EQ((*tokenizer)->mask_id(), 4000);
  const TruncationOptions truncation = (*tokenizer)->DefaultTruncation();
  EXPECT_EQ(truncation.strategy, TruncationStrategy::kLongestFirst);
  EXPECT_EQ(truncation.max_length, 512);
  const auto encoding = (*tokenizer)->Encode("Hello world", std::nullopt, truncation);
  ASSERT_TRUE(encoding.ok());
  EXPECT_EQ(encoding->ids.front(), kCls);
  EXPECT_EQ(encoding->ids.back(), kSep);
}

}  // namespace
}  // namespace dflash
