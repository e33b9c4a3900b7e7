// Parity of JsonTokenizer with the `tokenizers` library on the fixtures of
// tests/golden/tokenizer_json (README.md there describes them and cases.jsonl.gz): ids, token
// types, special-token masks and byte offsets of every case, single texts and pairs, every
// truncation strategy and side, with and without special tokens; error cases must be errors.
// The one documented deviation (json_tokenizer.h): a max_length below the special-token count is
// INVALID_ARGUMENT here, where tokenizers leaves the input untruncated; those cases must fail
// here and match untruncated.
#include <zlib.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "server/tokenizer/tokenizer_json/json_tokenizer.h"
#include "server/tokenizer/tokenizer_loader.h"

namespace dflash {
namespace {

const std::filesystem::path kFixtureDir =
    std::filesystem::path(DFLASH_SOURCE_DIR) / "tests/golden/tokenizer_json";

std::optional<std::string> ReadGzip(const std::filesystem::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return std::nullopt;
  std::string out;
  char buffer[1 << 16];
  int read = 0;
  while ((read = gzread(file, buffer, sizeof(buffer))) > 0) out.append(buffer, read);
  const bool ok = read == 0;
  gzclose(file);
  if (!ok) return std::nullopt;
  return out;
}

struct Counts {
  int cases = 0;
  int pairs = 0;
  int truncated = 0;
  int errors = 0;
  int deviations = 0;  // max_length below the special tokens.
  int mismatches = 0;
  int transformers_agrees = 0;
};

// What the case's encoding looks like here, in the fixture's terms.
struct Observed {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
  std::vector<int32_t> special_mask;
  std::vector<std::vector<uint32_t>> offsets;
};

Observed Observe(const Encoding& encoding, bool add_special_tokens) {
  Observed observed;
  for (size_t i = 0; i < encoding.ids.size(); ++i) {
    const bool special = encoding.sources[i] == TokenSource::kTemplate;
    if (special && !add_special_tokens) continue;
    observed.ids.push_back(encoding.ids[i]);
    observed.type_ids.push_back(encoding.token_type_ids[i]);
    observed.special_mask.push_back(special ? 1 : 0);
    observed.offsets.push_back({encoding.offsets[i].begin, encoding.offsets[i].end});
  }
  return observed;
}

std::string Describe(const nlohmann::json& record, const Observed& observed) {
  nlohmann::json ours;
  ours["input_ids"] = observed.ids;
  ours["token_type_ids"] = observed.type_ids;
  ours["special_tokens_mask"] = observed.special_mask;
  ours["byte_offsets"] = observed.offsets;
  return absl::StrCat("case ", record.dump(-1, ' ', true).substr(0, 1500),
                      "\n  here: ", ours.dump(-1, ' ', true).substr(0, 1500));
}

class TokenizerJsonParityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerJsonParityTest, MatchesTokenizersOnEveryCase) {
  const std::filesystem::path dir = kFixtureDir / GetParam();
  // The directory as a user has it: the loader picks tokenizer.json under "auto".
  absl::StatusOr<std::unique_ptr<Tokenizer>> loaded = LoadTokenizer(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Tokenizer& tokenizer = **loaded;
  ASSERT_EQ(tokenizer.source(), TokenizerSource::kTokenizerJson);

  const std::optional<std::string> lines = ReadGzip(dir / "cases.jsonl.gz");
  ASSERT_TRUE(lines.has_value()) << dir / "cases.jsonl.gz";
  Counts counts;
  for (const absl::string_view line : absl::StrSplit(*lines, '\n', absl::SkipEmpty())) {
    const nlohmann::json record = nlohmann::json::parse(line);
    ++counts.cases;
    counts.transformers_agrees += record.value("transformers_agrees", false) ? 1 : 0;
    const std::string text = record["text"];
    std::optional<std::string> pair;
    if (record.contains("pair")) {
      pair = record["pair"].get<std::string>();
      ++counts.pairs;
    }
    const bool add_special_tokens = record.value("add_special_tokens", true);
    TruncationOptions truncation;
    if (record.contains("truncation")) {
      ++counts.truncated;
      const nlohmann::json& t = record["truncation"];
      truncation.strategy = *ParseTruncationStrategy(t["strategy"].get<std::string>());
      truncation.side = *ParseTruncationSide(t["side"].get<std::string>());
      truncation.max_length = t["max_length"];
    }
    // Without special tokens tokenizers' budget has no room to reserve; the fixtures have no
    // truncation in those cases.
    ASSERT_TRUE(add_special_tokens || truncation.strategy == TruncationStrategy::kDoNotTruncate);
    const std::optional<absl::string_view> pair_view =
        pair.has_value() ? std::optional<absl::string_view>(*pair) : std::nullopt;
    absl::StatusOr<Encoding> encoding = tokenizer.Encode(text, pair_view, truncation);

    if (record.contains("error")) {
      ++counts.errors;
      if (encoding.ok()) {
        ++counts.mismatches;
        ADD_FAILURE() << "expected an error: " << Describe(record, Observe(*encoding, true));
      }
      continue;
    }
    const int64_t specials = pair.has_value() ? 3 : 2;
    if (truncation.strategy != TruncationStrategy::kDoNotTruncate &&
        truncation.max_length < specials) {
      ++counts.deviations;
      if (encoding.ok() || encoding.status().code() != absl::StatusCode::kInvalidArgument) {
        ++counts.mismatches;
        ADD_FAILURE() << "expected INVALID_ARGUMENT for max_length below the special tokens: "
                      << record.dump();
        continue;
      }
      encoding = tokenizer.Encode(text, pair_view, TruncationOptions{});
    }
    if (!encoding.ok()) {
      ++counts.mismatches;
      ADD_FAILURE() << "unexpected error " << encoding.status() << ": " << record.dump();
      continue;
    }
    const Observed observed = Observe(*encoding, add_special_tokens);
    const nlohmann::json& offsets =
        record.contains("byte_offsets") ? record["byte_offsets"] : record["offsets"];
    const bool same =
        observed.ids == record["input_ids"].get<std::vector<int32_t>>() &&
        observed.type_ids == record["token_type_ids"].get<std::vector<int32_t>>() &&
        observed.special_mask == record["special_tokens_mask"].get<std::vector<int32_t>>() &&
        observed.offsets == offsets.get<std::vector<std::vector<uint32_t>>>();
    if (!same) {
      ++counts.mismatches;
      if (counts.mismatches <= 10) ADD_FAILURE() << Describe(record, observed);
    }
  }
  std::cout << GetParam() << ": " << counts.cases << " cases (" << counts.pairs << " pairs, "
            << counts.truncated << " with truncation, " << counts.errors << " errors, "
            << counts.deviations << " with max_length below the special tokens), "
            << counts.mismatches << " mismatches; transformers 5.17 agrees with tokenizers on "
            << counts.transformers_agrees << "\n";
  EXPECT_EQ(counts.mismatches, 0);
  EXPECT_GE(counts.cases, 2500);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerJsonParityTest,
                         ::testing::Values("v3_hf5", "v3_hf5_lower_punct", "v3_hf4", "mdeberta"));

}  // namespace
}  // namespace dflash
