#include "server/tokenizer/tokenizer_json/replace_pattern.h"

#include <utf8proc.h>

#include <cctype>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/tokenizer/tokenizer_json/unicode_properties.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {

struct ReplacePattern::CharClass {
  enum class Kind { kLiteral, kRange, kSpace, kNotSpace, kDigit, kWord, kAnyButNewline };
  struct Item {
    Kind kind = Kind::kLiteral;
    char32_t low = 0;
    char32_t high = 0;
  };
  std::vector<Item> items;
  bool negated = false;

  bool Matches(char32_t c) const {
    bool hit = false;
    for (const Item& item : items) {
      switch (item.kind) {
        case Kind::kLiteral:
          hit = c == item.low;
          break;
        case Kind::kRange:
          hit = c >= item.low && c <= item.high;
          break;
        case Kind::kSpace:
          hit = IsWhiteSpace(c);
          break;
        case Kind::kNotSpace:
          hit = !IsWhiteSpace(c);
          break;
        case Kind::kDigit:
          hit = utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ND;
          break;
        case Kind::kWord:
          hit = IsWordCharacter(c);
          break;
        case Kind::kAnyButNewline:
          hit = c != U'\n';
          break;
      }
      if (hit) break;
    }
    return hit != negated;
  }
};

struct ReplacePattern::Atom {
  CharClass chars;
  size_t min = 1;
  size_t max = 1;
};

struct ReplacePattern::Branch {
  std::vector<Atom> atoms;
};

ReplacePattern::~ReplacePattern() = default;

namespace {

constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();
// Longer patterns are not what a tokenizer normalizer holds; the bound keeps parsing cheap.
constexpr size_t kMaxPatternBytes = 4096;

class RegexReader {
 public:
  RegexReader(absl::string_view pattern, const JsonNode& node) : pattern_(pattern), node_(node) {}

  bool AtEnd() const { return offset_ >= pattern_.size(); }
  char32_t Peek() const { return DecodeUtf8At(pattern_, offset_).code_point; }
  char32_t Next() {
    const DecodedChar c = DecodeUtf8At(pattern_, offset_);
    offset_ += c.length;
    return c.code_point;
  }
  absl::Status Unsupported(absl::string_view what) const {
    return node_.Unsupported(absl::StrCat("regex \"", pattern_, "\": ", what, " at byte ", offset_,
                                          " is outside the supported subset"));
  }
  size_t offset() const { return offset_; }

 private:
  absl::string_view pattern_;
  const JsonNode& node_;
  size_t offset_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReplacePattern>> ReplacePattern::Parse(const JsonNode& node) {
  DFLASH_RETURN_IF_ERROR(node.ExpectObject());
  auto pattern = std::unique_ptr<ReplacePattern>(new ReplacePattern());
  if (node.HasMember("String")) {
    DFLASH_ASSIGN_OR_RETURN(pattern->literal_, node.Member("String").String());
    if (pattern->literal_.empty()) return node.Member("String").Unsupported("an empty pattern");
    DFLASH_RETURN_IF_ERROR(ValidateUtf8(pattern->literal_, node.Member("String").path()));
    return pattern;
  }
  if (!node.HasMember("Regex")) {
    return node.Invalid("expected {\"String\": ...} or {\"Regex\": ...}");
  }
  const JsonNode regex_node = node.Member("Regex");
  DFLASH_ASSIGN_OR_RETURN(const std::string regex, regex_node.String());
  DFLASH_RETURN_IF_ERROR(ValidateUtf8(regex, regex_node.path()));
  if (regex.empty() || regex.size() > kMaxPatternBytes) {
    return regex_node.Unsupported(
        absl::StrCat("a regex of ", regex.size(), " bytes (expected 1 to ", kMaxPatternBytes, ")"));
  }
  RegexReader reader(regex, regex_node);
  using Kind = CharClass::Kind;

  // An escape after '\': a class item, or a literal.
  auto read_escape = [&](CharClass::Item* item) -> absl::Status {
    if (reader.AtEnd()) return reader.Unsupported("a trailing '\\'");
    const char32_t c = reader.Next();
    switch (c) {
      case U's':
        item->kind = Kind::kSpace;
        return absl::OkStatus();
      case U'S':
        item->kind = Kind::kNotSpace;
        return absl::OkStatus();
      case U'd':
        item->kind = Kind::kDigit;
        return absl::OkStatus();
      case U'w':
        item->kind = Kind::kWord;
        return absl::OkStatus();
      case U'n':
        item->low = U'\n';
        return absl::OkStatus();
      case U'r':
        item->low = U'\r';
        return absl::OkStatus();
      case U't':
        item->low = U'\t';
        return absl::OkStatus();
      case U'f':
        item->low = U'\f';
        return absl::OkStatus();
      case U'v':
        item->low = U'\v';
        return absl::OkStatus();
      default:
        break;
    }
    if (c < 0x80 && !std::isalnum(static_cast<int>(c))) {
      item->low = c;
      return absl::OkStatus();
    }
    return reader.Unsupported("this escape");
  };

  Branch branch;
  while (true) {
    if (reader.AtEnd() || reader.Peek() == U'|') {
      if (branch.atoms.empty()) return reader.Unsupported("an empty alternative");
      pattern->branches_.push_back(std::move(branch));
      branch = Branch();
      if (reader.AtEnd()) break;
      reader.Next();
      continue;
    }
    Atom atom;
    const char32_t c = reader.Next();
    if (c == U'\\') {
      CharClass::Item item;
      DFLASH_RETURN_IF_ERROR(read_escape(&item));
      atom.chars.items.push_back(item);
    } else if (c == U'.') {
      atom.chars.items.push_back({Kind::kAnyButNewline, 0, 0});
    } else if (c == U'[') {
      if (!reader.AtEnd() && reader.Peek() == U'^') {
        reader.Next();
        atom.chars.negated = true;
      }
      bool closed = false;
      while (!reader.AtEnd()) {
        char32_t d = reader.Next();
        if (d == U']' && !atom.chars.items.empty()) {
          closed = true;
          break;
        }
        if (d == U'[') return reader.Unsupported("a nested class");
        CharClass::Item item;
        if (d == U'\\') {
          DFLASH_RETURN_IF_ERROR(read_escape(&item));
        } else {
          item.low = d;
        }
        if (item.kind == Kind::kLiteral && !reader.AtEnd() && reader.Peek() == U'-') {
          reader.Next();
          if (reader.AtEnd()) return reader.Unsupported("an unterminated class");
          char32_t high = reader.Next();
          if (high == U']') {
            atom.chars.items.push_back(item);
            atom.chars.items.push_back({Kind::kLiteral, U'-', 0});
            closed = true;
            break;
          }
          if (high == U'\\') {
            CharClass::Item escaped;
            DFLASH_RETURN_IF_ERROR(read_escape(&escaped));
            if (escaped.kind != Kind::kLiteral) return reader.Unsupported("a range to a class");
            high = escaped.low;
          }
          if (high < item.low) return reader.Unsupported("a reversed range");
          item = {Kind::kRange, item.low, high};
        }
        atom.chars.items.push_back(item);
      }
      if (!closed) return reader.Unsupported("an unterminated class");
    } else if (c == U'(' || c == U')' || c == U'^' || c == U'$' || c == U'*' || c == U'+' ||
               c == U'?' || c == U'{' || c == U'}' || c == U']') {
      return reader.Unsupported(absl::StrCat("'", std::string(1, static_cast<char>(c)), "'"));
    } else {
      atom.chars.items.push_back({Kind::kLiteral, c, 0});
    }
    // A quantifier.
    if (!reader.AtEnd()) {
      const char32_t q = reader.Peek();
      if (q == U'+' || q == U'{') {
        reader.Next();
        if (q == U'+') {
          atom.min = 1;
          atom.max = kUnbounded;
        } else {
          auto read_number = [&](size_t* value) -> bool {
            bool any = false;
            *value = 0;
            while (!reader.AtEnd() && reader.Peek() >= U'0' && reader.Peek() <= U'9') {
              *value = *value * 10 + (reader.Next() - U'0');
              if (*value > 100000) return false;
              any = true;
            }
            return any;
          };
          if (!read_number(&atom.min)) return reader.Unsupported("this quantifier");
          atom.max = atom.min;
          if (!reader.AtEnd() && reader.Peek() == U',') {
            reader.Next();
            if (!reader.AtEnd() && reader.Peek() == U'}') {
              atom.max = kUnbounded;
            } else if (!read_number(&atom.max)) {
              return reader.Unsupported("this quantifier");
            }
          }
          if (reader.AtEnd() || reader.Next() != U'}') {
            return reader.Unsupported("this quantifier");
          }
        }
        if (atom.min == 0 || atom.max < atom.min) {
          return reader.Unsupported("a quantifier that allows an empty match");
        }
        if (!reader.AtEnd() && (reader.Peek() == U'?' || reader.Peek() == U'+')) {
          return reader.Unsupported("a lazy or possessive quantifier");
        }
      } else if (q == U'*' || q == U'?') {
        return reader.Unsupported("a quantifier that allows an empty match");
      }
    }
    const bool quantified = atom.min != 1 || atom.max != 1;
    const bool had_quantified =
        !branch.atoms.empty() && (branch.atoms.front().min != 1 || branch.atoms.front().max != 1);
    if ((quantified && !branch.atoms.empty()) || had_quantified) {
      return reader.Unsupported("a quantified atom inside a sequence");
    }
    branch.atoms.push_back(std::move(atom));
  }
  return pattern;
}

size_t ReplacePattern::MatchBranch(const Branch& branch, absl::string_view text,
                                   size_t offset) const {
  if (branch.atoms.size() == 1 && (branch.atoms[0].min != 1 || branch.atoms[0].max != 1)) {
    const Atom& atom = branch.atoms[0];
    size_t count = 0;
    size_t end = offset;
    while (count < atom.max && end < text.size()) {
      const DecodedChar c = DecodeUtf8At(text, end);
      if (!atom.chars.Matches(c.code_point)) break;
      end += c.length;
      ++count;
    }
    return count >= atom.min ? end : absl::string_view::npos;
  }
  size_t end = offset;
  for (const Atom& atom : branch.atoms) {
    if (end >= text.size()) return absl::string_view::npos;
    const DecodedChar c = DecodeUtf8At(text, end);
    if (!atom.chars.Matches(c.code_point)) return absl::string_view::npos;
    end += c.length;
  }
  return end;
}

std::vector<std::pair<size_t, size_t>> ReplacePattern::FindAll(absl::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  if (!literal_.empty()) {
    size_t from = 0;
    while (true) {
      const size_t at = text.find(literal_, from);
      if (at == absl::string_view::npos) break;
      matches.emplace_back(at, at + literal_.size());
      from = at + literal_.size();
    }
    return matches;
  }
  size_t offset = 0;
  while (offset < text.size()) {
    size_t end = absl::string_view::npos;
    for (const Branch& branch : branches_) {
      end = MatchBranch(branch, text, offset);
      if (end != absl::string_view::npos) break;
    }
    if (end != absl::string_view::npos) {
      matches.emplace_back(offset, end);
      offset = end;
    } else {
      offset += DecodeUtf8At(text, offset).length;
    }
  }
  return matches;
}

}  // namespace dflash::tokenizer_json
