// Unicode normalization forms with the per-character change list that `tokenizers` derives its
// offsets from (aligned_text.h): each character of a decomposition after the first is an
// insertion, characters keep their change through canonical reordering, and a composition folds
// the changes of its parts (change_a + change_b - 1). Character data from libutf8proc.
#pragma once

#include <vector>

#include "absl/strings/string_view.h"
#include "server/tokenizer/tokenizer_json/aligned_text.h"

namespace dflash::tokenizer_json {

enum class NormalizationForm { kNfd, kNfkd, kNfc, kNfkc };

// The normalized form of valid UTF-8 `text` as a change list over its characters.
std::vector<CharChange> NormalizeWithChanges(absl::string_view text, NormalizationForm form);

}  // namespace dflash::tokenizer_json
