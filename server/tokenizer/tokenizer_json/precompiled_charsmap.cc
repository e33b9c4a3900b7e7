#include "server/tokenizer/tokenizer_json/precompiled_charsmap.h"

#include <utf8proc.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {
namespace {

// darts-clone's unit layout.
bool HasLeaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
uint32_t Value(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t Label(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
uint32_t Offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

size_t CharCount(absl::string_view valid_utf8) {
  size_t count = 0;
  for (const char c : valid_utf8) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

// tokenizers' bookkeeping for one replaced chunk: replaced characters keep change 0, extra ones
// are insertions, and a shorter replacement folds the removals into the last change written.
void AppendReplacement(absl::string_view old_part, absl::string_view new_part,
                       std::vector<CharChange>* changes) {
  const int64_t diff =
      static_cast<int64_t>(CharCount(new_part)) - static_cast<int64_t>(CharCount(old_part));
  for (size_t offset = 0; offset < new_part.size();) {
    const DecodedChar c = DecodeUtf8At(new_part, offset);
    changes->push_back({c.code_point, 0});
    offset += c.length;
  }
  if (diff > 0) {
    for (int64_t i = 0; i < diff && static_cast<size_t>(i) < changes->size(); ++i) {
      (*changes)[changes->size() - 1 - static_cast<size_t>(i)].change = 1;
    }
  } else if (diff < 0 && !changes->empty()) {
    changes->back().change += diff;
  }
}

}  // namespace

absl::StatusOr<PrecompiledCharsmap> PrecompiledCharsmap::Parse(absl::string_view blob) {
  if (blob.size() < 4) {
    return absl::InvalidArgumentError("precompiled_charsmap is shorter than its 4-byte header");
  }
  uint32_t trie_bytes = 0;
  std::memcpy(&trie_bytes, blob.data(), 4);  // Little-endian, as is every supported host.
  const size_t units = trie_bytes / 4;
  if (units == 0 || units > (blob.size() - 4) / 4) {
    return absl::InvalidArgumentError(absl::StrCat("precompiled_charsmap: its trie of ", trie_bytes,
                                                   " bytes does not fit in the ", blob.size(),
                                                   "-byte table"));
  }
  PrecompiledCharsmap map;
  map.units_.resize(units);
  std::memcpy(map.units_.data(), blob.data() + 4, units * 4);
  map.replacements_ = std::string(blob.substr(4 + units * 4));
  // The replacement strings (NUL-separated) must be UTF-8, as tokenizers requires.
  absl::string_view rest = map.replacements_;
  while (!rest.empty()) {
    const size_t nul = rest.find('\0');
    const absl::string_view piece = rest.substr(0, nul);
    if (!ValidateUtf8(piece, "precompiled_charsmap replacement").ok()) {
      return absl::InvalidArgumentError("precompiled_charsmap: a replacement is not valid UTF-8");
    }
    if (nul == absl::string_view::npos) break;
    rest.remove_prefix(nul + 1);
  }
  return map;
}

std::optional<absl::string_view> PrecompiledCharsmap::Lookup(absl::string_view chunk) const {
  // The first leaf on the path is the shortest key that prefixes `chunk`. Positions outside the
  // table end the search (a damaged table finds nothing rather than reading out of bounds).
  size_t node = 0;
  uint32_t unit = units_[0];
  node ^= Offset(unit);
  for (const char byte : chunk) {
    const auto c = static_cast<unsigned char>(byte);
    if (c == 0) break;
    node ^= c;
    if (node >= units_.size()) return std::nullopt;
    unit = units_[node];
    if (Label(unit) != c) return std::nullopt;
    node ^= Offset(unit);
    if (node >= units_.size()) return std::nullopt;
    if (HasLeaf(unit)) {
      const size_t begin = Value(units_[node]);
      if (begin > replacements_.size()) return std::nullopt;
      size_t end = replacements_.find('\0', begin);
      if (end == std::string::npos) end = replacements_.size();
      const absl::string_view replacement(replacements_.data() + begin, end - begin);
      // A start inside a character would be an invalid str slice in tokenizers: no entry.
      if (!ValidateUtf8(replacement, "replacement").ok()) return std::nullopt;
      return replacement;
    }
  }
  return std::nullopt;
}

void PrecompiledCharsmap::Normalize(AlignedText* text) const {
  const std::string& input = text->text();
  std::vector<CharChange> changes;
  changes.reserve(input.size());
  bool modified = false;
  size_t offset = 0;
  utf8proc_int32_t state = 0;  // Carried across clusters, as utf8proc expects.
  while (offset < input.size()) {
    // One extended grapheme cluster [offset, end).
    size_t end = offset;
    DecodedChar c = DecodeUtf8At(input, end);
    end += c.length;
    char32_t previous = c.code_point;
    while (end < input.size()) {
      const DecodedChar next = DecodeUtf8At(input, end);
      if (utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous),
                                           static_cast<utf8proc_int32_t>(next.code_point),
                                           &state)) {
        break;
      }
      previous = next.code_point;
      end += next.length;
    }
    const absl::string_view grapheme(input.data() + offset, end - offset);
    offset = end;
    if (grapheme.size() < 6) {
      if (const std::optional<absl::string_view> replacement = Lookup(grapheme)) {
        modified = true;
        AppendReplacement(grapheme, *replacement, &changes);
        continue;
      }
    }
    for (size_t at = 0; at < grapheme.size();) {
      const DecodedChar ch = DecodeUtf8At(grapheme, at);
      const absl::string_view part = grapheme.substr(at, ch.length);
      if (const std::optional<absl::string_view> replacement = Lookup(part)) {
        modified = true;
        AppendReplacement(part, *replacement, &changes);
      } else {
        changes.push_back({ch.code_point, 0});
      }
      at += ch.length;
    }
  }
  if (modified) text->Transform(changes, 0);
}

}  // namespace dflash::tokenizer_json
