#include "server/tokenizer/tokenizer_json/unicode_properties.h"

#include <utf8proc.h>

#include <utility>

#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {

bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool IsWordCharacter(char32_t c) {
  if (c > 0x10FFFF) return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      break;
  }
  // Joiners, and the symbols that are Other_Alphabetic (circled and squared Latin letters).
  return c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) ||
         (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
         (c >= 0x1F170 && c <= 0x1F189);
}

bool IsTokenizersPunctuation(char32_t c) {
  // Characters Unicode 8.0 had in a P* category that later versions moved elsewhere.
  if (c == 0x166D || c == 0x111C9) return true;
  if (!IsPunctuation(c)) return false;
  // P* characters assigned after Unicode 8.0 (present in utf8proc's Unicode 15 tables).
  static constexpr std::pair<char32_t, char32_t> kAddedAfterUnicode8[] = {
      {0x61D, 0x61D},     {0x9FD, 0x9FD},     {0xA76, 0xA76},     {0xC77, 0xC77},
      {0xC84, 0xC84},     {0x1B7D, 0x1B7E},   {0x2E43, 0x2E4F},   {0x2E52, 0x2E5D},
      {0x10EAD, 0x10EAD}, {0x10F55, 0x10F59}, {0x10F86, 0x10F89}, {0x1144B, 0x1144F},
      {0x1145A, 0x1145B}, {0x1145D, 0x1145D}, {0x11660, 0x1166C}, {0x116B9, 0x116B9},
      {0x1183B, 0x1183B}, {0x11944, 0x11946}, {0x119E2, 0x119E2}, {0x11A3F, 0x11A46},
      {0x11A9A, 0x11A9C}, {0x11A9E, 0x11AA2}, {0x11B00, 0x11B09}, {0x11C41, 0x11C45},
      {0x11C70, 0x11C71}, {0x11EF7, 0x11EF8}, {0x11F43, 0x11F4F}, {0x11FFF, 0x11FFF},
      {0x12FF1, 0x12FF2}, {0x16E97, 0x16E9A}, {0x16FE2, 0x16FE2}, {0x1E95E, 0x1E95F},
  };
  for (const auto& [low, high] : kAddedAfterUnicode8) {
    if (c >= low && c <= high) return false;
  }
  return true;
}

void AppendLowercase(char32_t c, std::vector<char32_t>* out) {
  // U+0130 is the only character whose full lower-case mapping has two characters.
  if (c == 0x0130) {
    out->push_back(U'i');
    out->push_back(0x0307);
    return;
  }
  if (c > 0x10FFFF) {
    out->push_back(c);
    return;
  }
  out->push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

}  // namespace dflash::tokenizer_json
