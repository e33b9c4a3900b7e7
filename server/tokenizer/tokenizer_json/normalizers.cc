#include "server/tokenizer/tokenizer_json/normalizers.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/tokenizer/tokenizer_json/unicode_properties.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {
namespace {

// DeBERTa files nest one Sequence; the bounds keep a hostile file from building deep or wide
// trees.
constexpr int kMaxSequenceDepth = 8;
constexpr size_t kMaxSequenceLength = 64;

}  // namespace

Normalizer::~Normalizer() = default;

absl::StatusOr<std::unique_ptr<Normalizer>> Normalizer::Parse(const JsonNode& node, int depth) {
  DFLASH_ASSIGN_OR_RETURN(const std::string type, node.Type());
  auto normalizer = std::unique_ptr<Normalizer>(new Normalizer());
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) {
      return node.Unsupported(
          absl::StrCat("Sequences nested more than ", kMaxSequenceDepth, " deep"));
    }
    const JsonNode list = node.Member("normalizers");
    DFLASH_RETURN_IF_ERROR(list.ExpectArray());
    if (list.Size() > kMaxSequenceLength) {
      return list.Unsupported(absl::StrCat("a Sequence of ", list.Size(), " normalizers (at most ",
                                           kMaxSequenceLength, ")"));
    }
    normalizer->kind_ = Kind::kSequence;
    for (size_t i = 0; i < list.Size(); ++i) {
      DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<Normalizer> child, Parse(list.Element(i), depth + 1));
      normalizer->children_.push_back(std::move(child));
    }
  } else if (type == "Replace") {
    normalizer->kind_ = Kind::kReplace;
    DFLASH_ASSIGN_OR_RETURN(normalizer->pattern_, ReplacePattern::Parse(node.Member("pattern")));
    DFLASH_ASSIGN_OR_RETURN(normalizer->content_, node.Member("content").String());
    DFLASH_RETURN_IF_ERROR(ValidateUtf8(normalizer->content_, node.Member("content").path()));
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    normalizer->kind_ = Kind::kUnicode;
    normalizer->form_ = type == "NFC"    ? NormalizationForm::kNfc
                        : type == "NFD"  ? NormalizationForm::kNfd
                        : type == "NFKC" ? NormalizationForm::kNfkc
                                         : NormalizationForm::kNfkd;
  } else if (type == "Lowercase") {
    normalizer->kind_ = Kind::kLowercase;
  } else if (type == "Strip") {
    normalizer->kind_ = Kind::kStrip;
    DFLASH_ASSIGN_OR_RETURN(normalizer->strip_left_, node.Member("strip_left").Bool());
    DFLASH_ASSIGN_OR_RETURN(normalizer->strip_right_, node.Member("strip_right").Bool());
  } else if (type == "Precompiled") {
    normalizer->kind_ = Kind::kPrecompiled;
    const JsonNode field = node.Member("precompiled_charsmap");
    DFLASH_ASSIGN_OR_RETURN(const std::string encoded, field.String());
    std::string blob;
    if (!absl::Base64Unescape(encoded, &blob)) return field.Invalid("is not valid base64");
    absl::StatusOr<PrecompiledCharsmap> charsmap = PrecompiledCharsmap::Parse(blob);
    if (!charsmap.ok()) return field.Invalid(charsmap.status().message());
    normalizer->charsmap_ = *std::move(charsmap);
  } else {
    return node.Member("type").Unsupported(absl::StrCat("normalizer type \"", type, "\""));
  }
  return normalizer;
}

void Normalizer::Normalize(AlignedText* text) const {
  switch (kind_) {
    case Kind::kSequence:
      for (const auto& child : children_) child->Normalize(text);
      return;
    case Kind::kReplace:
      text->ReplaceMatches(pattern_->FindAll(text->text()), content_);
      return;
    case Kind::kUnicode:
      text->Transform(NormalizeWithChanges(text->text(), form_), 0);
      return;
    case Kind::kLowercase: {
      std::vector<CharChange> changes;
      std::vector<char32_t> lowered;
      const std::string& input = text->text();
      for (size_t offset = 0; offset < input.size();) {
        const DecodedChar c = DecodeUtf8At(input, offset);
        offset += c.length;
        lowered.clear();
        AppendLowercase(c.code_point, &lowered);
        for (size_t i = 0; i < lowered.size(); ++i) changes.push_back({lowered[i], i > 0 ? 1 : 0});
      }
      text->Transform(changes, 0);
      return;
    }
    case Kind::kStrip:
      text->Strip(strip_left_, strip_right_);
      return;
    case Kind::kPrecompiled:
      charsmap_->Normalize(text);
      return;
  }
}

}  // namespace dflash::tokenizer_json
