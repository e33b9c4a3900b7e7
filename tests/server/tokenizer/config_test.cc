#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tokenizer/tokenizer_config.h"
#include "tests/server/scratch_directory.h"

namespace dflash {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(TokenizerConfigTest, DefaultsWithoutFiles) {
  ScratchDirectory dir;
  const auto config = LoadTokenizerConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->do_lower_case);
  EXPECT_FALSE(config->split_by_punct);
  EXPECT_FALSE(config->model_max_length.has_value());
  EXPECT_EQ(config->truncation_side, TruncationSide::kRight);
  EXPECT_EQ(config->cls_token, "[CLS]");
  EXPECT_EQ(config->sep_token, "[SEP]");
  EXPECT_EQ(config->pad_token, "[PAD]");
  EXPECT_EQ(config->unk_token, "[UNK]");
  EXPECT_EQ(config->mask_token, "[MASK]");
  EXPECT_TRUE(config->additional_special_tokens.empty());
  EXPECT_TRUE(config->explicit_token_ids.empty());
}

TEST(TokenizerConfigTest, ReadsTransformers5Config) {
  ScratchDirectory dir;
  dir.Write("tokenizer_config.json", R"({
    "add_prefix_space": true, "backend": "tokenizers", "bos_token": "[CLS]",
    "cls_token": "[CLS]", "do_lower_case": true, "eos_token": "[SEP]",
    "extra_special_tokens": ["[PAD]", "[CLS]", "[SEP]", "<ent>", "</ent>"],
    "mask_token": "[MASK]", "model_max_length": 1000000000000000019884624838656,
    "pad_token": "[PAD]", "sep_token": "[SEP]", "split_by_punct": true,
    "tokenizer_class": "DebertaV2Tokenizer", "unk_id": 3, "unk_token": "[UNK]",
    "truncation_side": "left"})");
  const auto config = LoadTokenizerConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->do_lower_case);
  EXPECT_TRUE(config->split_by_punct);
  EXPECT_FALSE(config->model_max_length.has_value());
  EXPECT_EQ(config->truncation_side, TruncationSide::kLeft);
  EXPECT_THAT(config->additional_special_tokens, ElementsAre("<ent>", "</ent>"));
}

TEST(TokenizerConfigTest, ReadsAddedTokensDecoderAndObjects) {
  ScratchDirectory dir;
  dir.Write("tokenizer_config.json", R"({
    "added_tokens_decoder": {
      "0": {"content": "[PAD]", "lstrip": false, "normalized": false, "special": true},
      "128000": {"content": "[MASK]", "lstrip": false, "normalized": false, "special": true},
      "128001": {"content": "<e>", "special": true}},
    "mask_token": {"__type": "AddedToken", "content": "[MASK]", "lstrip": false},
    "cls_token": null, "model_max_length": 512,
    "additional_special_tokens": [{"content": "<e>"}]})");
  // Not read: added_tokens_decoder is present (transformers 5 ignores the legacy files then).
  dir.Write("special_tokens_map.json", R"({"mask_token": "<other>"})");
  dir.Write("added_tokens.json", R"({"[MASK]": 5})");
  const auto config = LoadTokenizerConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model_max_length, 512);
  EXPECT_EQ(config->mask_token, "[MASK]");
  EXPECT_EQ(config->cls_token, "[CLS]");  // null keeps the default.
  EXPECT_THAT(config->additional_special_tokens, ElementsAre("<e>"));
  EXPECT_THAT(config->explicit_token_ids,
              ElementsAre(Pair("[PAD]", 0), Pair("[MASK]", 128000), Pair("<e>", 128001)));
}

TEST(TokenizerConfigTest, LegacyFilesOverrideAndAddIds) {
  ScratchDirectory dir;
  dir.Write("tokenizer_config.json", R"({"do_lower_case": false, "vocab_type": "spm",
                                         "sep_token": "[SEP]"})");
  dir.Write("special_tokens_map.json", R"({"sep_token": {"content": "</s>"}, "mask_token": "[M]",
      "additional_special_tokens": ["<x>", "[M]"]})");
  dir.Write("added_tokens.json", R"({"[M]": 128000, "<x>": 128001})");
  const auto config = LoadTokenizerConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->sep_token, "</s>");
  EXPECT_EQ(config->mask_token, "[M]");
  EXPECT_THAT(config->additional_special_tokens, ElementsAre("<x>"));
  EXPECT_THAT(config->explicit_token_ids, ElementsAre(Pair("[M]", 128000), Pair("<x>", 128001)));
}

struct BadFile {
  const char* file;
  const char* contents;
  std::vector<std::string> message_parts;
};

TEST(TokenizerConfigTest, BadFilesNameFileAndField) {
  const BadFile cases[] = {
      {"tokenizer_config.json",
       R"({"do_lower_case": "yes"})",
       {"tokenizer_config.json: field 'do_lower_case' must be true or false"}},
      {"tokenizer_config.json",
       R"({"split_by_punct": 1})",
       {"tokenizer_config.json: field 'split_by_punct'"}},
      {"tokenizer_config.json",
       R"({"do_lower_case": true,})",
       {"tokenizer_config.json:1:", "invalid JSON"}},
      {"tokenizer_config.json", R"([1, 2])", {"tokenizer_config.json: expected a JSON object"}},
      {"tokenizer_config.json",
       R"({"model_max_length": -5})",
       {"field 'model_max_length'", "positive integer"}},
      {"tokenizer_config.json", R"({"model_max_length": "512"})", {"field 'model_max_length'"}},
      {"tokenizer_config.json", R"({"truncation_side": "middle"})", {"field 'truncation_side'"}},
      {"tokenizer_config.json", R"({"mask_token": 7})", {"field 'mask_token'", "token string"}},
      {"tokenizer_config.json", R"({"mask_token": {"lstrip": true}})", {"field 'mask_token'"}},
      {"tokenizer_config.json",
       R"({"extra_special_tokens": "<x>"})",
       {"field 'extra_special_tokens'", "list of tokens"}},
      {"tokenizer_config.json",
       R"({"added_tokens_decoder": {"x": {"content": "[MASK]"}}})",
       {"field 'added_tokens_decoder'", "not an id"}},
      {"tokenizer_config.json",
       R"({"added_tokens_decoder": {"-1": {"content": "[MASK]"}}})",
       {"field 'added_tokens_decoder'", "id -1"}},
      {"tokenizer_config.json",
       R"({"added_tokens_decoder": [1]})",
       {"field 'added_tokens_decoder'"}},
      {"tokenizer_config.json",
       R"({"added_tokens_decoder": {"7": {"content": "a"}, "8": {"content": "a"}}})",
       {"gives token \"a\" two ids"}},
      {"tokenizer_config.json",
       R"({"do_lower_case": true, "do_lower_case": false})",
       {"duplicate key"}},
      {"special_tokens_map.json",
       R"({"cls_token": ["[CLS]"]})",
       {"special_tokens_map.json: field 'cls_token'"}},
      {"added_tokens.json",
       R"({"[MASK]": "128000"})",
       {"added_tokens.json: field '[MASK]' must be an integer"}},
      {"added_tokens.json", R"({"[MASK]": 99999999999})", {"added_tokens.json: field '[MASK]'"}},
      {"added_tokens.json", R"({"[MASK]": 5, "<x>": 5})", {"the same id 5"}},
  };
  for (const BadFile& bad : cases) {
    ScratchDirectory dir;
    dir.Write(bad.file, bad.contents);
    const auto config = LoadTokenizerConfig(dir.path());
    ASSERT_FALSE(config.ok()) << bad.contents;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << bad.contents;
    for (const std::string& part : bad.message_parts) {
      EXPECT_THAT(config.status().message(), HasSubstr(part)) << bad.contents;
    }
  }
}

}  // namespace
}  // namespace dflash
