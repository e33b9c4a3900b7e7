// Parity of Tokenizer::Decode with the reference libraries on tests/golden/tokenizer_json/
// decode_cases.json (make_decode_fixtures.py): JsonTokenizer against the `tokenizers` library's
// decode for every fixture's tokenizer.json, DebertaTokenizer against the sentencepiece module's
// decode for v3_hf4/spm.model; with and without skip_special_tokens.
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/tokenizer/deberta_tokenizer.h"
#include "server/tokenizer/tokenizer_json/json_tokenizer.h"

namespace dflash {
namespace {

const std::filesystem::path kFixtureDir =
    std::filesystem::path(DFLASH_SOURCE_DIR) / "tests/golden/tokenizer_json";

nlohmann::json ReadCases() {
  std::ifstream file(kFixtureDir / "decode_cases.json");
  std::stringstream text;
  text << file.rdbuf();
  return nlohmann::json::parse(text.str());
}

// Decodes every case with `tokenizer`; adds the number of cases to *count.
void ExpectCasesMatch(const Tokenizer& tokenizer, const nlohmann::json& cases,
                      const std::string& name, int* count_out) {
  int& count = *count_out;
  for (const nlohmann::json& item : cases) {
    const std::vector<int32_t> ids = item["ids"].get<std::vector<int32_t>>();
    const bool skip = item["skip_special_tokens"].get<bool>();
    const absl::StatusOr<std::string> text = tokenizer.Decode(ids, skip);
    ASSERT_TRUE(text.ok()) << name << " case " << count << ": " << text.status();
    EXPECT_EQ(*text, item["text"].get<std::string>())
        << name << " case " << count << " skip_special_tokens=" << skip
        << " ids=" << item["ids"].dump();
    ++count;
  }
}

TEST(DecodeParityTest, JsonTokenizerMatchesTokenizers) {
  const nlohmann::json cases = ReadCases();
  ASSERT_TRUE(cases.contains("fixtures"));
  int total = 0;
  for (const auto& [name, fixture_cases] : cases["fixtures"].items()) {
    auto tokenizer = JsonTokenizer::Load(kFixtureDir / name);
    ASSERT_TRUE(tokenizer.ok()) << name << ": " << tokenizer.status();
    ExpectCasesMatch(**tokenizer, fixture_cases, name, &total);
  }
  EXPECT_EQ(total, 4 * 72);
}

TEST(DecodeParityTest, DebertaTokenizerMatchesSentencePiece) {
  const nlohmann::json cases = ReadCases();
  auto tokenizer = DebertaTokenizer::Load(kFixtureDir / "v3_hf4");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  int total = 0;
  ExpectCasesMatch(**tokenizer, cases["spm_v3_hf4"], "spm_v3_hf4", &total);
  EXPECT_EQ(total, 72);
}

}  // namespace
}  // namespace dflash
