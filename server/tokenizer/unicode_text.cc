#include "server/tokenizer/unicode_text.h"

#include <utf8proc.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dflash {
namespace {

constexpr char32_t kCapitalSigma = 0x03A3;
constexpr char32_t kSmallSigma = 0x03C3;
constexpr char32_t kFinalSigma = 0x03C2;
constexpr char32_t kCapitalIWithDot = 0x0130;
constexpr char32_t kCombiningDotAbove = 0x0307;

// Unicode's Case_Ignorable property (DerivedCoreProperties.txt): general categories Mn, Me, Cf,
// Lm, Sk, plus the characters whose Word_Break is MidLetter, MidNumLet or Single_Quote, which
// utf8proc does not expose; that list is short and stable, so it is spelled out.
bool IsCaseIgnorable(char32_t code_point) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(code_point))) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  constexpr char32_t kWordBreakMidLetterOrQuote[] = {0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F,
                                                     0x05F4, 0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                                     0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  return std::find(std::begin(kWordBreakMidLetterOrQuote), std::end(kWordBreakMidLetterOrQuote),
                   code_point) != std::end(kWordBreakMidLetterOrQuote);
}

// Unicode's Cased property: Lt, or the Lowercase / Uppercase properties, which utf8proc's
// islower / isupper implement (Ll and Lu plus Other_Lowercase / Other_Uppercase, e.g. ª and the
// squared capitals U+1F130..).
bool IsCased(char32_t code_point) {
  const auto point = static_cast<utf8proc_int32_t>(code_point);
  return utf8proc_category(point) == UTF8PROC_CATEGORY_LT || utf8proc_islower(point) ||
         utf8proc_isupper(point);
}

struct IndexedChar {
  char32_t code_point;
  uint32_t offset;
};

// Python's Final_Sigma test for the capital sigma at chars[index]: a cased character before it
// and no cased character after it, skipping case-ignorable characters in both directions.
bool IsFinalSigma(const std::vector<IndexedChar>& chars, size_t index) {
  bool cased_before = false;
  for (size_t i = index; i-- > 0;) {
    if (IsCaseIgnorable(chars[i].code_point)) continue;
    cased_before = IsCased(chars[i].code_point);
    break;
  }
  if (!cased_before) return false;
  for (size_t i = index + 1; i < chars.size(); ++i) {
    if (IsCaseIgnorable(chars[i].code_point)) continue;
    return !IsCased(chars[i].code_point);
  }
  return true;
}

}  // namespace

absl::Status ValidateUtf8(absl::string_view text, absl::string_view what) {
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    if (static_cast<unsigned char>(text[offset]) < 0x80) {
      ++offset;
      continue;
    }
    utf8proc_int32_t code_point = -1;
    const utf8proc_ssize_t length = utf8proc_iterate(
        bytes + offset, static_cast<utf8proc_ssize_t>(text.size() - offset), &code_point);
    if (length <= 0 || code_point < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is not valid UTF-8: bad byte sequence at byte offset ", offset,
                       " (byte 0x", absl::Hex(static_cast<unsigned char>(text[offset])), ")"));
    }
    offset += static_cast<size_t>(length);
  }
  return absl::OkStatus();
}

DecodedChar DecodeUtf8At(absl::string_view valid_utf8, size_t offset) {
  const auto lead = static_cast<unsigned char>(valid_utf8[offset]);
  if (lead < 0x80) return {lead, 1};
  utf8proc_int32_t code_point = -1;
  const utf8proc_ssize_t length =
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(valid_utf8.data()) + offset,
                       static_cast<utf8proc_ssize_t>(valid_utf8.size() - offset), &code_point);
  // Callers pass validated text; should they not, each bad byte decodes to U+FFFD rather than
  // stalling a loop or reading past the end.
  if (length <= 0 || code_point < 0) return {0xFFFD, 1};
  return {static_cast<char32_t>(code_point), static_cast<size_t>(length)};
}

void AppendUtf8(char32_t code_point, std::string* out) {
  utf8proc_uint8_t buffer[4];
  const utf8proc_ssize_t length =
      utf8proc_encode_char(static_cast<utf8proc_int32_t>(code_point), buffer);
  out->append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length));
}

uint32_t LowercasedText::SourceBegin(size_t begin) const {
  return source_begin[std::min(begin, text.size())];
}

uint32_t LowercasedText::SourceEnd(size_t end) const {
  end = std::min(end, text.size());
  if (end == 0) return source_begin[0];
  // Inside an expansion the bytes on both sides of `end` share one source character: move to
  // the first byte produced by the next source character.
  const uint32_t previous = source_begin[end - 1];
  while (end < text.size() && source_begin[end] == previous) ++end;
  return source_begin[end];
}

LowercasedText LowercaseLikePython(absl::string_view valid_utf8) {
  LowercasedText result;
  result.text.reserve(valid_utf8.size());
  result.source_begin.reserve(valid_utf8.size() + 1);
  std::vector<IndexedChar> chars;
  for (size_t offset = 0; offset < valid_utf8.size();) {
    const DecodedChar decoded = DecodeUtf8At(valid_utf8, offset);
    chars.push_back({decoded.code_point, static_cast<uint32_t>(offset)});
    offset += decoded.length;
  }
  for (size_t i = 0; i < chars.size(); ++i) {
    const auto [code_point, offset] = chars[i];
    const size_t before = result.text.size();
    if (code_point < 0x80) {
      result.text.push_back(static_cast<char>(
          code_point >= 'A' && code_point <= 'Z' ? code_point + ('a' - 'A') : code_point));
    } else if (code_point == kCapitalIWithDot) {
      result.text.push_back('i');
      AppendUtf8(kCombiningDotAbove, &result.text);
    } else if (code_point == kCapitalSigma) {
      AppendUtf8(IsFinalSigma(chars, i) ? kFinalSigma : kSmallSigma, &result.text);
    } else {
      AppendUtf8(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(code_point))),
                 &result.text);
    }
    result.source_begin.insert(result.source_begin.end(), result.text.size() - before, offset);
  }
  result.source_begin.push_back(static_cast<uint32_t>(valid_utf8.size()));
  return result;
}

bool IsPunctuation(char32_t code_point) {
  if ((code_point >= 33 && code_point <= 47) || (code_point >= 58 && code_point <= 64) ||
      (code_point >= 91 && code_point <= 96) || (code_point >= 123 && code_point <= 126)) {
    return true;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(code_point))) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

}  // namespace dflash
