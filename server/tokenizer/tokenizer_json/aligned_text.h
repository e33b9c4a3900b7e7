// A piece of the input text as normalization and pre-tokenization change it, with the origin of
// every byte: the model of offsets that the Hugging Face `tokenizers` library uses, kept here so
// that token offsets equal its offset_mapping.
//
// Each byte of the current text carries the input byte range [begin, end) of the character it
// came from (absolute offsets into the whole input). Edits are described as in `tokenizers`: a
// sequence of (character, change) where change 0 replaces the next input character, +1 inserts a
// character (which inherits the alignment of the byte before it) and -n replaces the next one and
// drops n more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {

struct CharChange {
  char32_t code_point = 0;
  int64_t change = 0;
};

// How a split keeps the matched delimiters (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A match list as `tokenizers` patterns produce it: ranges covering the whole text in order, each
// flagged as a match or the text between matches.
struct PatternMatch {
  size_t begin = 0;
  size_t end = 0;
  bool is_match = false;
};

class AlignedText {
 public:
  struct Alignment {
    uint32_t begin = 0;
    uint32_t end = 0;
    friend bool operator==(const Alignment&, const Alignment&) = default;
  };

  // The input bytes [shift, shift + text.size()) of a request text, not yet normalized.
  AlignedText(absl::string_view text, size_t shift);

  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  // Start of this piece in the input (tokenizers' offsets_original().0).
  size_t original_begin() const { return shift_; }

  // Applies `changes` to the whole text; `initial_offset` input characters are dropped first.
  void Transform(const std::vector<CharChange>& changes, size_t initial_offset);
  // Puts `prefix` before the text (nothing for an empty text).
  void Prepend(absl::string_view prefix);
  // Replaces the matched ranges (sorted, disjoint, non-empty) by `content`.
  void ReplaceMatches(const std::vector<std::pair<size_t, size_t>>& matches,
                      absl::string_view content);
  // Removes leading and/or trailing whitespace (Unicode White_Space).
  void Strip(bool left, bool right);

  // The sub-piece of text bytes [begin, end), on character boundaries.
  AlignedText Slice(size_t begin, size_t end) const;
  // Splits at `matches` (which cover the text) by `behavior`; empty pieces are dropped.
  std::vector<AlignedText> Split(const std::vector<PatternMatch>& matches,
                                 SplitBehavior behavior) const;

  // The input byte range of text bytes [begin, end) (absolute offsets).
  std::pair<size_t, size_t> InputRange(size_t begin, size_t end) const;

 private:
  AlignedText() = default;
  // tokenizers' convert_offsets from an original range (relative to this piece) to text bytes.
  std::optional<std::pair<size_t, size_t>> TextRangeOfOriginal(size_t begin, size_t end) const;
  void TransformRange(size_t begin, size_t end, const std::vector<CharChange>& changes,
                      size_t initial_offset);

  std::string text_;
  std::vector<Alignment> alignments_;  // One per byte of text_, absolute input offsets.
  size_t shift_ = 0;
  size_t original_size_ = 0;
};

// The match list of a character predicate: every matching character is a match of its own.
template <typename Predicate>
std::vector<PatternMatch> MatchCharacters(absl::string_view valid_utf8, Predicate predicate);

template <typename Predicate>
std::vector<PatternMatch> MatchCharacters(absl::string_view valid_utf8, Predicate predicate) {
  std::vector<PatternMatch> matches;
  if (valid_utf8.empty()) {
    matches.push_back({0, 0, false});
    return matches;
  }
  size_t last = 0;
  size_t offset = 0;
  while (offset < valid_utf8.size()) {
    const DecodedChar decoded = DecodeUtf8At(valid_utf8, offset);
    if (predicate(decoded.code_point)) {
      if (last < offset) matches.push_back({last, offset, false});
      matches.push_back({offset, offset + decoded.length, true});
      last = offset + decoded.length;
    }
    offset += decoded.length;
  }
  if (last < valid_utf8.size()) matches.push_back({last, valid_utf8.size(), false});
  return matches;
}

}  // namespace dflash::tokenizer_json
