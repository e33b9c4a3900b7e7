// Tokenizer parity with the fixtures of tests/golden/tokenizer/make_tokenizer_goldens.py: ids,
// token types and offsets of reference (a) (sentencepiece + docs/deberta.md#encoding-a-text in
// Python) for every case, which equal transformers 5.17's ids wherever the case is not flagged
// "hf5_differs"; truncation against transformers' own truncation.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/json_document.h"
#include "common/read_file.h"
#include "gtest/gtest.h"
#include "server/tokenizer/deberta_tokenizer.h"
#include "tests/server/scratch_directory.h"

namespace dflash {
namespace {

const std::filesystem::path kGoldenDir =
    std::filesystem::path(DFLASH_SOURCE_DIR) / "tests/golden/tokenizer";

class TokenizerGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto text = ReadFile(kGoldenDir / "tokenizer_goldens.json");
    ASSERT_TRUE(text.ok()) << text.status();
    auto parsed = ParseJsonDocument(*text, "tokenizer_goldens.json");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    goldens_ = *std::move(parsed);
    for (const nlohmann::json& setting : goldens_["settings"]) {
      const std::string name = setting["name"];
      auto dir = std::make_unique<ScratchDirectory>();
      dir->CopySpmModel();
      for (const auto& [file, contents] : setting["files"].items()) {
        dir->Write(file, contents.dump(2));
      }
      auto tokenizer = DebertaTokenizer::Load(dir->path());
      ASSERT_TRUE(tokenizer.ok()) << name << ": " << tokenizer.status();
      tokenizers_[name] = *std::move(tokenizer);
      dirs_.push_back(std::move(dir));
    }
  }

  nlohmann::json goldens_;
  std::vector<std::unique_ptr<ScratchDirectory>> dirs_;
  std::map<std::string, std::unique_ptr<DebertaTokenizer>> tokenizers_;
};

std::vector<int32_t> IntList(const nlohmann::json& values) {
  return values.get<std::vector<int32_t>>();
}

TEST_F(TokenizerGoldenTest, MatchesReferenceIdsTypesAndOffsets) {
  int cases = 0;
  int flagged = 0;
  for (const nlohmann::json& test : goldens_["cases"]) {
    const std::string a = test["a"];
    const bool has_pair = test.contains("b");
    const std::string b = has_pair ? test["b"].get<std::string>() : "";
    SCOPED_TRACE(testing::Message() << "setting " << test["setting"] << ", a=" << test["a"]
                                    << (has_pair ? ", b=" + test["b"].dump() : ""));
    const DebertaTokenizer& tokenizer = *tokenizers_.at(test["setting"]);
    const auto encoding =
        tokenizer.Encode(a, has_pair ? std::optional<absl::string_view>(b) : std::nullopt, {});
    ASSERT_TRUE(encoding.ok()) << encoding.status();
    const std::vector<int32_t> ids = IntList(test["ids"]);
    EXPECT_EQ(encoding->ids, ids);
    const std::vector<int32_t> types =
        has_pair ? IntList(test["type_ids"]) : std::vector<int32_t>(ids.size(), 0);
    EXPECT_EQ(encoding->token_type_ids, types);
    std::vector<int32_t> offsets;
    for (const ByteSpan& span : encoding->offsets) {
      offsets.push_back(static_cast<int32_t>(span.begin));
      offsets.push_back(static_cast<int32_t>(span.end));
    }
    EXPECT_EQ(offsets, IntList(test["offsets"]));
    // Template tokens, and only those, are special (transformers' special_tokens_mask).
    for (size_t i = 0; i < encoding->ids.size(); ++i) {
      EXPECT_EQ(encoding->special_tokens_mask[i],
                encoding->sources[i] == TokenSource::kTemplate ? 1 : 0);
    }
    if (test.value("hf5_differs", false)) {
      ++flagged;
      EXPECT_NE(encoding->ids, IntList(test["hf_ids"]));
    }
    ++cases;
  }
  EXPECT_GT(cases, 700);
  std::cout << "[ golden   ] " << cases << " tokenization cases, " << flagged
            << " flagged hf5_differs (compared with reference (a) only)\n";
}

TEST_F(TokenizerGoldenTest, MatchesTransformersTruncation) {
  const DebertaTokenizer& tokenizer = *tokenizers_.at("plain");
  const nlohmann::json& inputs = goldens_["truncation_inputs"];
  int cases = 0;
  int errors = 0;
  int flagged = 0;
  for (const nlohmann::json& group : goldens_["truncation_cases"]) {
    const nlohmann::json& input = inputs.at(group["input"].get<size_t>());
    const std::string a = input["a"];
    const bool has_pair = input.contains("b");
    const std::string b = has_pair ? input["b"].get<std::string>() : "";
    const std::vector<int32_t> ids_a = IntList(input["ids_a"]);
    const std::vector<int32_t> ids_b = has_pair ? IntList(input["ids_b"]) : std::vector<int32_t>();
    TruncationOptions options;
    auto strategy = ParseTruncationStrategy(group["strategy"].get<std::string>());
    auto side = ParseTruncationSide(group["side"].get<std::string>());
    ASSERT_TRUE(strategy.ok() && side.ok());
    options.strategy = *strategy;
    options.side = *side;
    flagged += static_cast<int>(group.value("hf_untruncated", nlohmann::json::array()).size());
    for (size_t i = 0; i < group["max_length"].size(); ++i) {
      options.max_length = group["max_length"][i];
      const nlohmann::json& kept = group["kept"][i];
      SCOPED_TRACE(testing::Message() << group["strategy"] << " " << group["side"] << " max_length "
                                      << options.max_length << " input " << group["input"]);
      const auto encoding = tokenizer.Encode(
          a, has_pair ? std::optional<absl::string_view>(b) : std::nullopt, options);
      ++cases;
      if (kept.is_null()) {
        ++errors;
        EXPECT_EQ(encoding.status().code(), absl::StatusCode::kInvalidArgument);
        continue;
      }
      ASSERT_TRUE(encoding.ok()) << encoding.status();
      auto cut = [&](const std::vector<int32_t>& all, size_t keep) {
        return options.side == TruncationSide::kLeft
                   ? std::vector<int32_t>(all.end() - static_cast<ptrdiff_t>(keep), all.end())
                   : std::vector<int32_t>(all.begin(), all.begin() + static_cast<ptrdiff_t>(keep));
      };
      std::vector<int32_t> expected = {tokenizer.cls_id()};
      std::vector<int32_t> kept_a = cut(ids_a, kept[0].get<size_t>());
      expected.insert(expected.end(), kept_a.begin(), kept_a.end());
      expected.push_back(tokenizer.sep_id());
      std::vector<int32_t> types(expected.size(), 0);
      if (has_pair) {
        std::vector<int32_t> kept_b = cut(ids_b, kept[1].get<size_t>());
        expected.insert(expected.end(), kept_b.begin(), kept_b.end());
        expected.push_back(tokenizer.sep_id());
        types.resize(expected.size(), 1);
      }
      EXPECT_EQ(encoding->ids, expected);
      EXPECT_EQ(encoding->token_type_ids, types);
      EXPECT_EQ(encoding->first_tokens_before_truncation, ids_a.size());
      EXPECT_EQ(encoding->second_tokens_before_truncation, ids_b.size());
      EXPECT_EQ(encoding->truncated,
                kept[0].get<size_t>() < ids_a.size() || kept[1].get<size_t>() < ids_b.size());
    }
  }
  EXPECT_GT(cases, 900);
  std::cout << "[ golden   ] " << cases << " truncation cases (" << errors << " expected errors), "
            << flagged << " flagged hf5_differs (max_length below the special tokens)\n";
}

}  // namespace
}  // namespace dflash
