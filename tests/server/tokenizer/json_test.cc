// JsonTokenizer on the components the parity fixtures do not exercise (added-token flags,
// byte fallback, NFD/NFKD/NFKC, String patterns, WhitespaceSplit, prepend_scheme "first",
// add_prefix_space, no post-processor, no unk_id), on the small tokenizer.json files of the fuzz
// seed corpus; expected ids and byte offsets are what the `tokenizers` library (0.23.3) gives for
// the same files. Then the load errors: unsupported components name their JSON path, and the
// bounds on hostile files hold.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "server/tokenizer/tokenizer_json/json_tokenizer.h"
#include "server/tokenizer/tokenizer_loader.h"
#include "tests/server/scratch_directory.h"

namespace dflash {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kSeedDir =
    std::filesystem::path(DFLASH_SOURCE_DIR) / "tests/fuzz/corpus/tokenizer_json_fuzz";

absl::StatusOr<std::unique_ptr<JsonTokenizer>> FromSeed(const std::string& name,
                                                        const TokenizerJsonLimits& limits = {}) {
  absl::StatusOr<std::string> text = ReadFile(kSeedDir / name, size_t{1} << 20);
  if (!text.ok()) return text.status();
  return JsonTokenizer::FromJson(*text, TokenizerConfig(), TokenizerOptions(), limits);
}

struct Expected {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
};

void ExpectEncodings(const std::string& seed, const std::vector<Expected>& cases) {
  absl::StatusOr<std::unique_ptr<JsonTokenizer>> tokenizer = FromSeed(seed);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  for (const Expected& expected : cases) {
    SCOPED_TRACE(absl::StrCat(seed, ": \"", expected.text, "\""));
    absl::StatusOr<Encoding> encoding =
        (*tokenizer)->Encode(expected.text, std::nullopt, TruncationOptions{});
    ASSERT_TRUE(encoding.ok()) << encoding.status();
    EXPECT_EQ(encoding->ids, expected.ids);
    std::vector<std::pair<uint32_t, uint32_t>> offsets;
    for (const ByteSpan& span : encoding->offsets) offsets.emplace_back(span.begin, span.end);
    EXPECT_EQ(offsets, expected.offsets);
  }
}

TEST(TokenizerJsonTest, AddedTokenFlagsPrecompiledAndLegacyMetaspace) {
  // [MASK] has lstrip and rstrip; "hello" is normalized and single_word; [UNK] is normalized.
  ExpectEncodings("hf4_precompiled.json",
                  {{"  hello world  ", {1, 26, 7, 2}, {{0, 0}, {2, 7}, {7, 13}, {0, 0}}},
                   {"say [MASK] now",
                    {1, 10, 11, 13, 3, 25, 10, 3, 14, 3, 2},
                    {{0, 0},
                     {0, 1},
                     {0, 1},
                     {1, 2},
                     {2, 3},
                     {3, 11},
                     {11, 12},
                     {11, 12},
                     {12, 13},
                     {13, 14},
                     {0, 0}}},
                   {"x [MASK]  y",
                    {1, 10, 3, 25, 10, 3, 2},
                    {{0, 0}, {0, 1}, {0, 1}, {1, 10}, {10, 11}, {10, 11}, {0, 0}}},
                   {"ohello hello, hello!",
                    {1, 10, 14, 3, 12, 3, 14, 10, 26, 10, 15, 10, 26, 10, 17, 2},
                    {{0, 0},
                     {0, 1},
                     {0, 1},
                     {1, 2},
                     {2, 3},
                     {3, 5},
                     {5, 6},
                     {6, 7},
                     {7, 12},
                     {12, 13},
                     {12, 13},
                     {13, 14},
                     {14, 19},
                     {19, 20},
                     {19, 20},
                     {0, 0}}},
                   {"\xEF\xAC\x81nance  \xEF\xBC\xA1\xE3\x80\x80"
                    "caf\xC3\xA9",
                    {1, 8, 9, 10, 3, 18, 19, 2},
                    {{0, 0}, {0, 3}, {3, 8}, {9, 10}, {10, 13}, {13, 19}, {19, 21}, {0, 0}}},
                   {"\xE2\x84\xA6 \xE2\x84\xAB",
                    {1, 10, 3, 10, 3, 2},
                    {{0, 0}, {0, 3}, {0, 3}, {3, 4}, {4, 7}, {0, 0}}}});
}

TEST(TokenizerJsonTest, UnicodeFormsStringPatternWhitespaceSplitAndFirstScheme) {
  ExpectEncodings(
      "unicode_forms.json",
      {{"caf\xC3\xA9 cafe\xCC\x81 \xEF\xAC\x81",
        {1, 18, 12, 3, 13, 3, 12, 3, 2},
        {{0, 0}, {0, 3}, {3, 5}, {6, 7}, {7, 8}, {8, 9}, {9, 10}, {13, 16}, {0, 0}}},
       {"hello   world", {1, 6, 3, 14, 3, 2}, {{0, 0}, {0, 5}, {8, 9}, {9, 10}, {10, 13}, {0, 0}}},
       {"\xE2\x84\xAB\xCC\x81x", {1, 10, 3, 2}, {{0, 0}, {0, 3}, {0, 6}, {0, 0}}},
       {"a\xCC\xA3\xCC\x82 \xE1\xB8\x89",
        {1, 10, 3, 3, 2},
        {{0, 0}, {0, 1}, {0, 1}, {6, 9}, {0, 0}}}});
}

TEST(TokenizerJsonTest, ByteFallbackWithoutPostProcessor) {
  ExpectEncodings(
      "byte_fallback.json",
      {{"hello \xE6\xBC\xA2\xE5\xAD\x97 \xE2\x98\x83",
        {6, 10, 20, 21, 10, 251, 177, 156},
        {{0, 5}, {5, 6}, {6, 9}, {9, 12}, {12, 13}, {13, 16}, {13, 16}, {13, 16}}},
       {"\xE1\xBA\x9Ex", {10, 250, 211, 183, 145}, {{0, 3}, {0, 4}, {0, 4}, {0, 4}, {0, 4}}}});
}

TEST(TokenizerJsonTest, LowercaseAndPunctuation) {
  ExpectEncodings(
      "hf5_lower_punct.json",
      {{"Hello, World!",
        {1, 6, 10, 15, 7, 10, 17, 2},
        {{0, 0}, {0, 5}, {5, 6}, {5, 6}, {6, 12}, {12, 13}, {12, 13}, {0, 0}}},
       {"\xC4\xB0stanbul \xCE\xA3\xCE\x91\xCE\xA3",
        {1, 10, 3, 11, 3, 13, 3, 10, 3, 2},
        {{0, 0}, {0, 2}, {0, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 9}, {9, 10}, {10, 16}, {0, 0}}}});
}

TEST(TokenizerJsonTest, UnknownCharacterWithoutUnkIdIsAnError) {
  absl::StatusOr<std::unique_ptr<JsonTokenizer>> tokenizer = FromSeed("no_unk.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const absl::StatusOr<Encoding> encoding =
      (*tokenizer)->Encode("hello world", std::nullopt, TruncationOptions{});
  EXPECT_EQ(encoding.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(encoding.status().message(), HasSubstr("unk_id"));
}

TEST(TokenizerJsonTest, UnsupportedComponentsNameTheirPath) {
  const std::pair<const char*, const char*> cases[] = {
      {"invalid_bpe.json", "model.type"},
      {"invalid_bert_normalizer.json", "normalizer.type"},
      {"invalid_lookahead_regex.json", "normalizer.pattern.Regex"},
      {"invalid_deep_sequence.json", "normalizer.normalizers[0].normalizers[0]"},
  };
  for (const auto& [seed, path] : cases) {
    SCOPED_TRACE(seed);
    const auto tokenizer = FromSeed(seed);
    EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(tokenizer.status().message(), HasSubstr(path));
  }
  const auto syntax = FromSeed("invalid_syntax.json");
  EXPECT_EQ(syntax.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerJsonTest, HostileSizesFailFast) {
  TokenizerJsonLimits limits;
  limits.max_pieces = 10;
  auto too_many_pieces = FromSeed("hf5.json", limits);
  EXPECT_EQ(too_many_pieces.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many_pieces.status().message(), HasSubstr("model.vocab"));

  limits = {};
  limits.max_added_tokens = 2;
  auto too_many_added = FromSeed("hf5.json", limits);
  EXPECT_EQ(too_many_added.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many_added.status().message(), HasSubstr("added_tokens"));

  limits = {};
  limits.max_file_bytes = 100;
  EXPECT_EQ(FromSeed("hf5.json", limits).status().code(), absl::StatusCode::kInvalidArgument);

  // A million added tokens: refused by the count before any of them is read.
  std::string json = R"({"version": "1.0", "added_tokens": [)";
  for (int i = 0; i < 1000000; ++i) {
    absl::StrAppend(&json, i == 0 ? "" : ",", R"({"id": 0, "content": "t)", i, R"("})");
  }
  absl::StrAppend(&json, R"(], "model": {"type": "Unigram", "vocab": [["a", 0.0]]}})");
  auto million = JsonTokenizer::FromJson(json, TokenizerConfig());
  EXPECT_EQ(million.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(million.status().message(), HasSubstr("1000000 added tokens"));

  // Deep nesting stops in the JSON reader.
  std::string deep(100000, '[');
  EXPECT_EQ(JsonTokenizer::FromJson(deep, TokenizerConfig()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerLoaderTest, ChoosesTokenizerJsonUnlessTold) {
  ScratchDirectory dir;
  dir.CopySpmModel();
  absl::StatusOr<std::unique_ptr<Tokenizer>> spm_only = LoadTokenizer(dir.path());
  ASSERT_TRUE(spm_only.ok()) << spm_only.status();
  EXPECT_EQ((*spm_only)->source(), TokenizerSource::kSentencePiece);

  absl::StatusOr<std::string> json = ReadFile(kSeedDir / "hf5.json", size_t{1} << 20);
  ASSERT_TRUE(json.ok());
  dir.Write("tokenizer.json", *json);
  absl::StatusOr<std::unique_ptr<Tokenizer>> both = LoadTokenizer(dir.path());
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ((*both)->source(), TokenizerSource::kTokenizerJson);
  absl::StatusOr<std::unique_ptr<Tokenizer>> told =
      LoadTokenizer(dir.path(), TokenizerChoice::kSentencePiece);
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_EQ((*told)->source(), TokenizerSource::kSentencePiece);

  ScratchDirectory empty;
  const auto none = LoadTokenizer(empty.path());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("tokenizer.json or spm.model"));
  EXPECT_EQ(LoadTokenizer(empty.path(), TokenizerChoice::kTokenizerJson).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(ParseTokenizerChoice("spm").ok());
}

}  // namespace
}  // namespace dflash
