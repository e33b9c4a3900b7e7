#include "server/tokenizer/tokenizer_json/unicode_normalization.h"

#include <utf8proc.h>

#include <algorithm>
#include <optional>

#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {
namespace {

int CombiningClass(char32_t c) {
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class;
}

// The full (recursive) canonical or compatibility decomposition of one character.
void Decompose(char32_t c, bool compatibility, std::vector<char32_t>* out) {
  utf8proc_int32_t buffer[32];
  int boundclass = 0;
  const int options = UTF8PROC_DECOMPOSE | (compatibility ? UTF8PROC_COMPAT : 0);
  const utf8proc_ssize_t count =
      utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buffer, 32,
                              static_cast<utf8proc_option_t>(options), &boundclass);
  if (count <= 0 || count > 32) {
    out->push_back(c);
    return;
  }
  for (utf8proc_ssize_t i = 0; i < count; ++i) out->push_back(static_cast<char32_t>(buffer[i]));
}

// The primary composite of a pair, if any.
std::optional<char32_t> Compose(char32_t first, char32_t second) {
  utf8proc_int32_t buffer[2] = {static_cast<utf8proc_int32_t>(first),
                                static_cast<utf8proc_int32_t>(second)};
  const utf8proc_ssize_t length = utf8proc_normalize_utf32(
      buffer, 2, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
  if (length == 1) return static_cast<char32_t>(buffer[0]);
  return std::nullopt;
}

std::vector<CharChange> DecomposeWithChanges(absl::string_view text, bool compatibility) {
  std::vector<CharChange> out;
  out.reserve(text.size());
  std::vector<char32_t> parts;
  size_t run_begin = 0;  // First entry not yet reordered.
  auto reorder = [&]() {
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(run_begin), out.end(),
                     [](const CharChange& a, const CharChange& b) {
                       return CombiningClass(a.code_point) < CombiningClass(b.code_point);
                     });
    run_begin = out.size();
  };
  for (size_t offset = 0; offset < text.size();) {
    const DecodedChar c = DecodeUtf8At(text, offset);
    offset += c.length;
    parts.clear();
    Decompose(c.code_point, compatibility, &parts);
    for (size_t i = 0; i < parts.size(); ++i) {
      if (CombiningClass(parts[i]) == 0) reorder();
      out.push_back({parts[i], i == 0 ? 0 : 1});
    }
  }
  reorder();
  return out;
}

std::vector<CharChange> RecomposeWithChanges(const std::vector<CharChange>& decomposed) {
  std::vector<CharChange> out;
  out.reserve(decomposed.size());
  std::vector<CharChange> blocked;  // Marks after the composee that did not combine with it.
  std::optional<CharChange> composee;
  int last_class = -1;  // Combining class of the last blocked mark; -1: none since the composee.
  for (const CharChange& c : decomposed) {
    const int c_class = CombiningClass(c.code_point);
    if (!composee.has_value()) {
      if (c_class != 0) {
        out.push_back(c);
      } else {
        composee = c;
      }
      continue;
    }
    const CharChange k = *composee;
    if (last_class >= 0 && last_class >= c_class) {
      if (c_class == 0) {
        out.push_back(k);
        out.insert(out.end(), blocked.begin(), blocked.end());
        blocked.clear();
        composee = c;
        last_class = -1;
      } else {
        blocked.push_back(c);
        last_class = c_class;
      }
      continue;
    }
    if (const std::optional<char32_t> composed = Compose(k.code_point, c.code_point)) {
      composee = CharChange{*composed, k.change + c.change - 1};
      continue;
    }
    if (last_class < 0 && c_class == 0) {
      out.push_back(k);
      composee = c;
      continue;
    }
    blocked.push_back(c);
    last_class = c_class;
  }
  if (composee.has_value()) out.push_back(*composee);
  out.insert(out.end(), blocked.begin(), blocked.end());
  return out;
}

}  // namespace

std::vector<CharChange> NormalizeWithChanges(absl::string_view text, NormalizationForm form) {
  const bool compatibility = form == NormalizationForm::kNfkd || form == NormalizationForm::kNfkc;
  std::vector<CharChange> decomposed = DecomposeWithChanges(text, compatibility);
  if (form == NormalizationForm::kNfd || form == NormalizationForm::kNfkd) return decomposed;
  return RecomposeWithChanges(decomposed);
}

}  // namespace dflash::tokenizer_json
