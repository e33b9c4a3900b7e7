#include "server/tokenizer/tokenizer_json/template_processing.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dflash::tokenizer_json {
namespace {

// Far more than [CLS] A [SEP] B [SEP] needs; bounds a hostile template.
constexpr size_t kMaxTemplatePieces = 64;
constexpr size_t kMaxSpecialIds = 64;

absl::StatusOr<std::vector<TemplatePiece>> ParsePieces(
    const JsonNode& node, const std::map<std::string, std::vector<int32_t>>& specials,
    bool is_pair) {
  DFLASH_RETURN_IF_ERROR(node.ExpectArray());
  if (node.Size() > kMaxTemplatePieces) {
    return node.Unsupported(absl::StrCat("a template of ", node.Size(), " pieces"));
  }
  std::vector<TemplatePiece> pieces;
  bool has_first = false;
  bool has_second = false;
  for (size_t i = 0; i < node.Size(); ++i) {
    const JsonNode entry = node.Element(i);
    DFLASH_RETURN_IF_ERROR(entry.ExpectObject());
    TemplatePiece piece;
    JsonNode body = entry;
    if (entry.HasMember("SpecialToken")) {
      body = entry.Member("SpecialToken");
      DFLASH_ASSIGN_OR_RETURN(const std::string name, body.Member("id").String());
      const auto it = specials.find(name);
      if (it == specials.end()) {
        return body.Member("id").Invalid(
            absl::StrCat("special token \"", name, "\" is missing from special_tokens"));
      }
      piece.ids = it->second;
    } else if (entry.HasMember("Sequence")) {
      body = entry.Member("Sequence");
      const nlohmann::json& sequence = body.Member("id").value();
      if (!sequence.is_string()) return body.Member("id").Invalid("expected \"A\" or \"B\"");
      if (sequence.get_ref<const std::string&>() == "A") {
        piece.kind = TemplatePiece::Kind::kFirst;
        if (has_first) return body.Member("id").Unsupported("sequence A twice in one template");
        has_first = true;
      } else if (sequence.get_ref<const std::string&>() == "B" && is_pair) {
        piece.kind = TemplatePiece::Kind::kSecond;
        if (has_second) return body.Member("id").Unsupported("sequence B twice in one template");
        has_second = true;
      } else {
        return body.Member("id").Invalid(absl::StrCat("sequence \"",
                                                      sequence.get_ref<const std::string&>(),
                                                      "\" does not belong in this template"));
      }
    } else {
      return entry.Invalid("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    DFLASH_ASSIGN_OR_RETURN(const int64_t type_id, body.Member("type_id").Index(1 << 20));
    piece.type_id = static_cast<int32_t>(type_id);
    pieces.push_back(std::move(piece));
  }
  if (!has_first || (is_pair && !has_second)) {
    return node.Invalid(is_pair ? "a pair template needs sequences A and B"
                                : "a single template needs sequence A");
  }
  return pieces;
}

}  // namespace

absl::StatusOr<EncodingTemplate> ParseTemplateProcessing(const JsonNode& node, int64_t max_id) {
  EncodingTemplate processing;
  if (node.IsNull()) return processing;
  DFLASH_ASSIGN_OR_RETURN(const std::string type, node.Type());
  if (type != "TemplateProcessing") {
    return node.Member("type").Unsupported(absl::StrCat("post-processor type \"", type, "\""));
  }
  const JsonNode table = node.Member("special_tokens");
  DFLASH_RETURN_IF_ERROR(table.ExpectObject());
  if (table.Size() > kMaxTemplatePieces) {
    return table.Unsupported(absl::StrCat(table.Size(), " special tokens"));
  }
  std::map<std::string, std::vector<int32_t>> specials;
  for (const auto& [name, value] : table.value().items()) {
    const JsonNode entry = table.Member(name);
    const JsonNode ids = entry.Member("ids");
    DFLASH_RETURN_IF_ERROR(ids.ExpectArray());
    if (ids.Size() == 0 || ids.Size() > kMaxSpecialIds) {
      return ids.Invalid(absl::StrCat("expected 1 to ", kMaxSpecialIds, " ids"));
    }
    std::vector<int32_t>& list = specials[name];
    for (size_t i = 0; i < ids.Size(); ++i) {
      DFLASH_ASSIGN_OR_RETURN(const int64_t id, ids.Element(i).Index(max_id - 1));
      list.push_back(static_cast<int32_t>(id));
    }
  }
  DFLASH_ASSIGN_OR_RETURN(processing.single,
                          ParsePieces(node.Member("single"), specials, /*is_pair=*/false));
  DFLASH_ASSIGN_OR_RETURN(processing.pair,
                          ParsePieces(node.Member("pair"), specials, /*is_pair=*/true));
  return processing;
}

}  // namespace dflash::tokenizer_json
