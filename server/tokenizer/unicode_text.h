// Unicode text handling for the tokenizer: UTF-8 validation and decoding, lower-casing that
// reproduces Python's str.lower() (what transformers-4's DebertaV2Tokenizer applies when
// do_lower_case is set) together with a map back to input offsets, and the punctuation predicate
// of split_by_punct. Character data comes from libutf8proc (Unicode 15.0 in Debian 12).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dflash {

// OK when `text` is well-formed UTF-8: no overlong forms, no UTF-16 surrogates, nothing above
// U+10FFFF, no truncated sequence. Otherwise INVALID_ARGUMENT naming `what` (e.g. "text") and
// the byte offset of the first bad sequence.
absl::Status ValidateUtf8(absl::string_view text, absl::string_view what);

struct DecodedChar {
  char32_t code_point = 0;
  size_t length = 0;  // Bytes of its UTF-8 form, 1..4.
};

// Decodes the character that starts at `offset` (< text.size()) of text that ValidateUtf8
// accepted.
DecodedChar DecodeUtf8At(absl::string_view valid_utf8, size_t offset);

void AppendUtf8(char32_t code_point, std::string* out);

// The lower-cased form of a text and, for each of its bytes, the input character it came from.
// Inputs must be shorter than 4 GiB (offsets are 32-bit; the tokenizer caps inputs far lower).
struct LowercasedText {
  std::string text;
  // source_begin[i] is the input byte offset of the character that produced text[i]; one more
  // entry at the end holds the input size.
  std::vector<uint32_t> source_begin;

  // Maps a span [begin, end) of `text` to the input span of the characters that produced it. An
  // end inside a one-to-many expansion (U+0130 -> "i" U+0307) rounds up to the end of its source
  // character, so a span never loses part of a character.
  uint32_t SourceBegin(size_t begin) const;
  uint32_t SourceEnd(size_t end) const;
};

// Lower-cases valid UTF-8 exactly like Python 3's str.lower(): the simple Unicode lower-case
// mapping of each character, plus the two rules Python adds from SpecialCasing.txt: U+0130 (I with
// dot above) becomes "i" U+0307, and capital sigma becomes final sigma (U+03C2) when a cased
// letter precedes it and none follows (case-ignorable characters skipped on both sides).
// Known differences, both from Unicode versions (Python 3.11 has 14.0, utf8proc 15.0): characters
// assigned after Unicode 14 follow utf8proc; tokenizer_unicode_text_test checks every code point
// against a table generated with Python.
LowercasedText LowercaseLikePython(absl::string_view valid_utf8);

// DeBERTa's punctuation rule for split_by_punct (docs/deberta.md#encoding-a-text step 3): the ASCII
// symbols 33-47, 58-64, 91-96, 123-126, or any character of Unicode general category P*.
bool IsPunctuation(char32_t code_point);

}  // namespace dflash
