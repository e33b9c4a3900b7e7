#include "server/tokenizer/pretokenizer.h"

#include <algorithm>
#include <utility>

#include "server/tokenizer/unicode_text.h"

namespace dflash {

AddedTokenMatcher::AddedTokenMatcher(std::vector<Token> tokens) : tokens_(std::move(tokens)) {
  std::erase_if(tokens_, [](const Token& token) { return token.content.empty(); });
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const Token& a, const Token& b) {
    return a.content.size() > b.content.size();
  });
  for (const Token& token : tokens_) {
    first_byte_used_[static_cast<unsigned char>(token.content[0])] = true;
  }
}

std::vector<TextChunk> AddedTokenMatcher::Split(absl::string_view text) const {
  std::vector<TextChunk> chunks;
  size_t plain_begin = 0;
  size_t position = 0;
  while (position < text.size()) {
    const Token* match = nullptr;
    if (first_byte_used_[static_cast<unsigned char>(text[position])]) {
      const absl::string_view rest = text.substr(position);
      for (const Token& token : tokens_) {
        if (rest.size() >= token.content.size() &&
            rest.substr(0, token.content.size()) == token.content) {
          match = &token;
          break;
        }
      }
    }
    if (match == nullptr) {
      ++position;
      continue;
    }
    if (plain_begin < position) chunks.push_back({plain_begin, position, -1});
    chunks.push_back({position, position + match->content.size(), match->id});
    position += match->content.size();
    plain_begin = position;
  }
  if (plain_begin < text.size()) chunks.push_back({plain_begin, text.size(), -1});
  return chunks;
}

std::vector<TextChunk> SplitOnPunctuation(absl::string_view valid_utf8) {
  std::vector<TextChunk> pieces;
  size_t run_begin = 0;
  for (size_t offset = 0; offset < valid_utf8.size();) {
    const DecodedChar decoded = DecodeUtf8At(valid_utf8, offset);
    if (IsPunctuation(decoded.code_point)) {
      if (run_begin < offset) pieces.push_back({run_begin, offset, -1});
      pieces.push_back({offset, offset + decoded.length, -1});
      run_begin = offset + decoded.length;
    }
    offset += decoded.length;
  }
  if (run_begin < valid_utf8.size()) pieces.push_back({run_begin, valid_utf8.size(), -1});
  return pieces;
}

}  // namespace dflash
