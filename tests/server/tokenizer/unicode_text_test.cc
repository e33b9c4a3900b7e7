#include "server/tokenizer/unicode_text.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Utf8(std::u32string_view text) {
  std::string out;
  for (char32_t c : text) AppendUtf8(c, &out);
  return out;
}

TEST(TokenizerUnicodeTextTest, AcceptsValidUtf8) {
  EXPECT_TRUE(ValidateUtf8("", "text").ok());
  EXPECT_TRUE(ValidateUtf8("plain ascii\n\t", "text").ok());
  EXPECT_TRUE(ValidateUtf8("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80", "text").ok());
  EXPECT_TRUE(ValidateUtf8(std::string("a\0b", 3), "text").ok());
  EXPECT_TRUE(ValidateUtf8("\xF4\x8F\xBF\xBF", "text").ok());  // U+10FFFF.
  EXPECT_TRUE(ValidateUtf8("\xEE\x80\x80", "text").ok());      // U+E000, just past surrogates.
}

TEST(TokenizerUnicodeTextTest, RejectsInvalidUtf8WithOffset) {
  struct Case {
    std::string text;
    size_t offset;
  };
  const Case cases[] = {
      {"ab\x80", 2},            // Lone continuation byte.
      {"\xC3", 0},              // Truncated two-byte sequence.
      {"x\xE6\x97", 1},         // Truncated three-byte sequence.
      {"ok \xC0\x80", 3},       // Overlong NUL.
      {"\xC1\xBF", 0},          // Overlong two-byte form.
      {"\xE0\x80\xAF", 0},      // Overlong three-byte form.
      {"\xF0\x80\x80\xAF", 0},  // Overlong four-byte form.
      {"a\xED\xA0\x80", 1},     // UTF-16 surrogate U+D800.
      {"\xED\xBF\xBF", 0},      // Surrogate U+DFFF.
      {"\xF4\x90\x80\x80", 0},  // U+110000, beyond Unicode.
      {"\xF5\x80\x80\x80", 0},  // Lead byte that never occurs.
      {"\xFF", 0},
      {"\xC3\xA9\xC3(", 2},  // Bad continuation after a good character.
  };
  for (const Case& test : cases) {
    const absl::Status status = ValidateUtf8(test.text, "second text");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << test.offset;
    EXPECT_THAT(status.message(), HasSubstr("second text is not valid UTF-8"));
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("byte offset ", test.offset, " ")));
  }
}

TEST(TokenizerUnicodeTextTest, DecodesCharacters) {
  const std::string text = "a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x98\x80";
  EXPECT_EQ(DecodeUtf8At(text, 0).code_point, U'a');
  EXPECT_EQ(DecodeUtf8At(text, 1).code_point, U'\u00E9');
  EXPECT_EQ(DecodeUtf8At(text, 1).length, 2u);
  EXPECT_EQ(DecodeUtf8At(text, 3).code_point, U'\u65E5');
  EXPECT_EQ(DecodeUtf8At(text, 3).length, 3u);
  EXPECT_EQ(DecodeUtf8At(text, 6).code_point, U'\U0001F600');
  EXPECT_EQ(DecodeUtf8At(text, 6).length, 4u);
}

TEST(TokenizerUnicodeTextTest, LowercasesWithIdentityMapForSameLengthText) {
  const LowercasedText lowered = LowercaseLikePython("HeLLo \xC3\x89T\xC3\x89");  // "HeLLo ÉTÉ"
  EXPECT_EQ(lowered.text, "hello \xC3\xA9t\xC3\xA9");
  EXPECT_THAT(lowered.source_begin, ElementsAre(0, 1, 2, 3, 4, 5, 6, 6, 8, 9, 9, 11));
  EXPECT_EQ(lowered.SourceBegin(6), 6u);
  EXPECT_EQ(lowered.SourceEnd(8), 8u);
  EXPECT_EQ(lowered.SourceEnd(11), 11u);
}

TEST(TokenizerUnicodeTextTest, LowercasesCapitalIWithDotToTwoCharacters) {
  // "Aİb": İ (2 bytes) becomes "i" + U+0307 (3 bytes).
  const LowercasedText lowered = LowercaseLikePython(
      "A\xC4\xB0"
      "b");
  EXPECT_EQ(lowered.text,
            "ai\xCC\x87"
            "b");
  EXPECT_THAT(lowered.source_begin, ElementsAre(0, 1, 1, 1, 3, 4));
  // A span ending between "i" and U+0307 still covers all of İ.
  EXPECT_EQ(lowered.SourceBegin(1), 1u);
  EXPECT_EQ(lowered.SourceEnd(2), 3u);
  EXPECT_EQ(lowered.SourceBegin(2), 1u);
  EXPECT_EQ(lowered.SourceEnd(4), 3u);
  EXPECT_EQ(lowered.SourceEnd(5), 4u);
  EXPECT_EQ(lowered.SourceEnd(0), 0u);
}

TEST(TokenizerUnicodeTextTest, LowercasesSigmaByPosition) {
  // Expected values are Python 3.11's str.lower().
  EXPECT_EQ(
      LowercaseLikePython(Utf8(U"\u03A3\u0391\u03A3 \u039F\u0394\u039F\u03A3 \u03A3 "
                               U"\u0391\u03A3. \u03A3-\u0391"))
          .text,
      Utf8(U"\u03C3\u03B1\u03C2 \u03BF\u03B4\u03BF\u03C2 \u03C3 \u03B1\u03C2. \u03C3-\u03B1"));
  EXPECT_EQ(LowercaseLikePython(Utf8(U"\u03A3")).text, Utf8(U"\u03C3"));
  // ' is case-ignorable: skipped when looking for a cased letter after the sigma.
  EXPECT_EQ(LowercaseLikePython(Utf8(U"\u0391\u03A3'")).text, Utf8(U"\u03B1\u03C2'"));
  EXPECT_EQ(LowercaseLikePython(Utf8(U"\u0391\u03A3'\u0391")).text, Utf8(U"\u03B1\u03C3'\u03B1"));
  // A combining mark is skipped when looking for a cased letter before it.
  EXPECT_EQ(LowercaseLikePython(Utf8(U"\u0391\u0301\u03A3")).text, Utf8(U"\u03B1\u0301\u03C2"));
}

TEST(TokenizerUnicodeTextTest, PunctuationRule) {
  for (char32_t c : std::u32string(U"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")) {
    EXPECT_TRUE(IsPunctuation(c)) << static_cast<uint32_t>(c);
  }
  for (char32_t c : std::u32string(U"aZ09 \t\n\u00A0\u3000\u00E9\u65E5\U0001F600\u00BD\u2122")) {
    EXPECT_FALSE(IsPunctuation(c)) << static_cast<uint32_t>(c);
  }
  // Unicode P* categories beyond ASCII.
  for (char32_t c :
       std::u32string(U"\u00A1\u00BF\u2014\u2018\u201C\u2026\u3001\u3002\uFF01\u300C")) {
    EXPECT_TRUE(IsPunctuation(c)) << static_cast<uint32_t>(c);
  }
  // Symbols (S*) are not punctuation unless in the ASCII ranges: $ + < are, € ± are not.
  EXPECT_FALSE(IsPunctuation(U'\u20AC'));
  EXPECT_FALSE(IsPunctuation(U'\u00B1'));
}

// Sorted ranges -> a dense bitmap, so that the exhaustive loop stays fast under sanitizers.
std::vector<bool> Bitmap(const nlohmann::json& ranges) {
  std::vector<bool> bits(0x110000, false);
  for (const auto& range : ranges) {
    for (char32_t c = range[0].get<char32_t>(); c <= range[1].get<char32_t>(); ++c) bits[c] = true;
  }
  return bits;
}

// Every code point against tables that make_tokenizer_goldens.py generated with Python 3.11
// (Unicode 14.0). Code points unassigned in Unicode 14 may differ (utf8proc has Unicode 15).
TEST(TokenizerUnicodeTextTest, MatchesPythonOnEveryCodePoint) {
  const auto text = ReadFile(std::filesystem::path(DFLASH_SOURCE_DIR) /
                             "tests/golden/tokenizer/unicode_properties.json");
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json tables = nlohmann::json::parse(*text);
  const std::vector<bool> assigned = Bitmap(tables["assigned"]);
  const std::vector<bool> punctuation = Bitmap(tables["punctuation"]);
  const std::vector<bool> cased = Bitmap(tables["sigma_cased"]);
  const std::vector<bool> ignorable = Bitmap(tables["sigma_case_ignorable"]);
  std::map<char32_t, std::u32string> lower;
  for (const auto& entry : tables["lower"]) {
    std::u32string lowered;
    for (const auto& c : entry[1]) lowered.push_back(c.get<char32_t>());
    lower[entry[0].get<char32_t>()] = lowered;
  }
  const std::string sigma = Utf8(U"Σ");
  const std::string final_sigma = Utf8(U"ς");

  int checked = 0;
  std::vector<uint32_t> newer_than_python;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const std::string one = Utf8(std::u32string(1, c));
    const auto it = lower.find(c);
    const std::string want_lower = Utf8(it == lower.end() ? std::u32string(1, c) : it->second);
    const bool lower_ok = LowercaseLikePython(one).text == want_lower;
    const bool punct_ok = IsPunctuation(c) == punctuation[c];
    // "c" + Σ ends in ς iff c is cased and not case-ignorable; "A" + c + Σ iff c is either.
    const bool is_cased = absl::EndsWith(LowercaseLikePython(one + sigma).text, final_sigma);
    const bool cased_or_ignorable =
        absl::EndsWith(LowercaseLikePython("A" + one + sigma).text, final_sigma);
    const bool sigma_ok = is_cased == cased[c] && cased_or_ignorable == (cased[c] || ignorable[c]);
    if (lower_ok && punct_ok && sigma_ok) {
      ++checked;
      continue;
    }
    if (!assigned[c]) {
      newer_than_python.push_back(static_cast<uint32_t>(c));
      continue;
    }
    ADD_FAILURE() << "U+" << absl::StrCat(absl::Hex(static_cast<uint32_t>(c), absl::kZeroPad4))
                  << ": lower " << lower_ok << ", punctuation " << punct_ok << ", sigma context "
                  << sigma_ok;
  }
  EXPECT_GT(checked, 1000000);
  // Characters that Unicode 15 added and Python 3.11 does not know yet (134 with utf8proc 2.8:
  // new punctuation, combining marks, modifier and lower-case letters).
  EXPECT_LT(newer_than_python.size(), 200u);
}

}  // namespace
}  // namespace dflash
