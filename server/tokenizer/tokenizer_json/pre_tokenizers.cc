#include "server/tokenizer/tokenizer_json/pre_tokenizers.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/tokenizer/tokenizer_json/unicode_properties.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {
namespace {

constexpr int kMaxSequenceDepth = 8;
constexpr size_t kMaxSequenceLength = 64;

absl::StatusOr<SplitBehavior> ParseBehavior(const JsonNode& node) {
  DFLASH_ASSIGN_OR_RETURN(const std::string name, node.String());
  // tokenizers writes these names; its deserializer also takes the lower-case forms.
  if (name == "Removed" || name == "removed") return SplitBehavior::kRemoved;
  if (name == "Isolated" || name == "isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious" || name == "merged_with_previous") {
    return SplitBehavior::kMergedWithPrevious;
  }
  if (name == "MergedWithNext" || name == "merged_with_next") {
    return SplitBehavior::kMergedWithNext;
  }
  if (name == "Contiguous" || name == "contiguous") return SplitBehavior::kContiguous;
  return node.Invalid(absl::StrCat("unknown split behavior \"", name, "\""));
}

}  // namespace

PreTokenizer::~PreTokenizer() = default;

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Parse(const JsonNode& node, int depth) {
  DFLASH_ASSIGN_OR_RETURN(const std::string type, node.Type());
  auto pre = std::unique_ptr<PreTokenizer>(new PreTokenizer());
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) {
      return node.Unsupported(
          absl::StrCat("Sequences nested more than ", kMaxSequenceDepth, " deep"));
    }
    const JsonNode list = node.Member("pretokenizers");
    DFLASH_RETURN_IF_ERROR(list.ExpectArray());
    if (list.Size() > kMaxSequenceLength) {
      return list.Unsupported(absl::StrCat("a Sequence of ", list.Size(),
                                           " pre-tokenizers (at most ", kMaxSequenceLength, ")"));
    }
    pre->kind_ = Kind::kSequence;
    for (size_t i = 0; i < list.Size(); ++i) {
      DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> child,
                              Parse(list.Element(i), depth + 1));
      pre->children_.push_back(std::move(child));
    }
  } else if (type == "WhitespaceSplit") {
    pre->kind_ = Kind::kWhitespaceSplit;
  } else if (type == "Punctuation") {
    pre->kind_ = Kind::kPunctuation;
    const JsonNode behavior = node.Member("behavior");
    if (!behavior.IsNull()) {
      DFLASH_ASSIGN_OR_RETURN(pre->behavior_, ParseBehavior(behavior));
    }
  } else if (type == "Metaspace") {
    pre->kind_ = Kind::kMetaspace;
    const JsonNode replacement = node.Member("replacement");
    DFLASH_ASSIGN_OR_RETURN(pre->replacement_, replacement.String());
    DFLASH_RETURN_IF_ERROR(ValidateUtf8(pre->replacement_, replacement.path()));
    if (pre->replacement_.empty() ||
        DecodeUtf8At(pre->replacement_, 0).length != pre->replacement_.size()) {
      return replacement.Invalid("must be exactly one character");
    }
    pre->replacement_char_ = DecodeUtf8At(pre->replacement_, 0).code_point;
    const JsonNode scheme = node.Member("prepend_scheme");
    if (!scheme.IsNull()) {
      DFLASH_ASSIGN_OR_RETURN(const std::string name, scheme.String());
      if (name == "always") {
        pre->prepend_scheme_ = PrependScheme::kAlways;
      } else if (name == "first") {
        pre->prepend_scheme_ = PrependScheme::kFirst;
      } else if (name == "never") {
        pre->prepend_scheme_ = PrependScheme::kNever;
      } else {
        return scheme.Invalid(absl::StrCat("unknown prepend_scheme \"", name,
                                           "\" (expected always, first or never)"));
      }
    }
    // Files written before prepend_scheme existed say add_prefix_space; false means never.
    const JsonNode add_prefix_space = node.Member("add_prefix_space");
    if (!add_prefix_space.IsNull()) {
      DFLASH_ASSIGN_OR_RETURN(const bool add, add_prefix_space.Bool());
      if (!add) {
        if (!scheme.IsNull() && pre->prepend_scheme_ != PrependScheme::kNever) {
          return add_prefix_space.Invalid("add_prefix_space does not match prepend_scheme");
        }
        pre->prepend_scheme_ = PrependScheme::kNever;
      }
    }
    DFLASH_ASSIGN_OR_RETURN(pre->split_, node.Member("split").OptionalBool(true));
  } else {
    return node.Member("type").Unsupported(absl::StrCat("pre-tokenizer type \"", type, "\""));
  }
  return pre;
}

std::vector<AlignedText> PreTokenizer::SplitOne(const AlignedText& piece) const {
  switch (kind_) {
    case Kind::kSequence:
      break;
    case Kind::kWhitespaceSplit:
      return piece.Split(MatchCharacters(piece.text(), IsWhiteSpace), SplitBehavior::kRemoved);
    case Kind::kPunctuation:
      return piece.Split(MatchCharacters(piece.text(), IsTokenizersPunctuation), behavior_);
    case Kind::kMetaspace: {
      AlignedText text = piece;
      std::vector<std::pair<size_t, size_t>> spaces;
      for (size_t i = 0; i < text.text().size(); ++i) {
        if (text.text()[i] == ' ') spaces.emplace_back(i, i + 1);
      }
      text.ReplaceMatches(spaces, replacement_);
      const bool starts_with_replacement = text.text().rfind(replacement_, 0) == 0;
      if (!starts_with_replacement &&
          (prepend_scheme_ == PrependScheme::kAlways ||
           (prepend_scheme_ == PrependScheme::kFirst && text.original_begin() == 0))) {
        text.Prepend(replacement_);
      }
      if (!split_) {
        std::vector<AlignedText> out;
        if (!text.empty()) out.push_back(std::move(text));
        return out;
      }
      const char32_t replacement = replacement_char_;
      return text.Split(
          MatchCharacters(text.text(), [replacement](char32_t c) { return c == replacement; }),
          SplitBehavior::kMergedWithNext);
    }
  }
  return {piece};
}

void PreTokenizer::Split(std::vector<AlignedText>* pieces) const {
  if (kind_ == Kind::kSequence) {
    for (const auto& child : children_) child->Split(pieces);
    return;
  }
  std::vector<AlignedText> out;
  out.reserve(pieces->size());
  for (const AlignedText& piece : *pieces) {
    for (AlignedText& part : SplitOne(piece)) {
      if (!part.empty()) out.push_back(std::move(part));
    }
  }
  *pieces = std::move(out);
}

}  // namespace dflash::tokenizer_json
