// The splits DeBERTa's tokenizer makes before sentencepiece sees any text
// (docs/deberta.md#encoding-a-text steps 1 and 3): added/special tokens cut out of the raw text,
// and split_by_punct's isolation of every punctuation character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace dflash {

// A byte range [begin, end) of a text, and for an added-token match the token's id (-1 for text
// left to sentencepiece).
struct TextChunk {
  size_t begin = 0;
  size_t end = 0;
  int32_t added_token_id = -1;
};

// Finds added tokens in raw text: exact, case-sensitive, leftmost then longest match, which is
// what transformers' added-token trie does. Immutable after construction; thread-safe.
class AddedTokenMatcher {
 public:
  struct Token {
    std::string content;
    int32_t id = 0;
  };
  // Empty contents are ignored.
  explicit AddedTokenMatcher(std::vector<Token> tokens);

  // Splits `text` into alternating plain chunks and matches, in order; plain chunks are never
  // empty. Matches start and end on character boundaries of valid UTF-8 input, since every token
  // is itself valid UTF-8.
  std::vector<TextChunk> Split(absl::string_view text) const;

 private:
  std::vector<Token> tokens_;  // Longest first, so the first hit at a position is the longest.
  bool first_byte_used_[256] = {};
};

// Splits valid UTF-8 into pieces so that each punctuation character (IsPunctuation) is a piece of
// its own and the text between them forms the other pieces; whitespace stays inside its piece.
// Returns byte ranges covering all of `text`, in order; empty text gives none.
std::vector<TextChunk> SplitOnPunctuation(absl::string_view valid_utf8);

}  // namespace dflash
