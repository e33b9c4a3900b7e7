// The Precompiled normalizer: sentencepiece's precompiled_charsmap (a darts-clone double-array
// trie over UTF-8 keys followed by the NUL-separated replacement strings), applied the way
// `tokenizers` applies it: per extended grapheme cluster, the whole cluster when it is shorter
// than 6 bytes and has an entry, else character by character; an entry is found by the first
// (shortest) key that prefixes the lookup string. libsentencepiece applies the same table with
// longest-match over the whole text and its own whitespace handling, so it cannot serve here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/tokenizer/tokenizer_json/aligned_text.h"

namespace dflash::tokenizer_json {

class PrecompiledCharsmap {
 public:
  // Parses the decoded (not base64) charsmap. INVALID_ARGUMENT for a truncated table or
  // replacement strings that are not UTF-8.
  static absl::StatusOr<PrecompiledCharsmap> Parse(absl::string_view blob);

  // Normalizes `text` in place (offsets kept, aligned_text.h).
  void Normalize(AlignedText* text) const;

 private:
  // The replacement for `chunk`, if the table has an entry.
  std::optional<absl::string_view> Lookup(absl::string_view chunk) const;

  std::vector<uint32_t> units_;
  std::string replacements_;
};

}  // namespace dflash::tokenizer_json
