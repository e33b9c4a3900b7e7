#include "server/tokenizer/tokenizer_json/decoders.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {

absl::StatusOr<Decoder> Decoder::Parse(const JsonNode& node) {
  Decoder decoder;
  if (node.IsNull()) {
    decoder.unsupported_ = node.Unsupported(
        "no decoder; decoding ids to text needs the Metaspace decoder DeBERTa files carry");
    return decoder;
  }
  DFLASH_ASSIGN_OR_RETURN(const std::string type, node.Type());
  if (type != "Metaspace") {
    decoder.unsupported_ = node.Member("type").Unsupported(
        absl::StrCat("decoder \"", type, "\" is not implemented (only Metaspace)"));
    return decoder;
  }
  const JsonNode replacement = node.Member("replacement");
  DFLASH_ASSIGN_OR_RETURN(decoder.replacement_, replacement.String());
  DFLASH_RETURN_IF_ERROR(ValidateUtf8(decoder.replacement_, replacement.path()));
  if (decoder.replacement_.empty() ||
      DecodeUtf8At(decoder.replacement_, 0).length != decoder.replacement_.size()) {
    return replacement.Invalid("must be exactly one character");
  }
  const JsonNode scheme = node.Member("prepend_scheme");
  if (!scheme.IsNull()) {
    DFLASH_ASSIGN_OR_RETURN(const std::string name, scheme.String());
    if (name != "always" && name != "first" && name != "never") {
      return scheme.Invalid(
          absl::StrCat("unknown prepend_scheme \"", name, "\" (expected always, first or never)"));
    }
    decoder.strip_first_ = name != "never";
  }
  // Files written before prepend_scheme existed say add_prefix_space; false means never.
  const JsonNode add_prefix_space = node.Member("add_prefix_space");
  if (scheme.IsNull() && !add_prefix_space.IsNull()) {
    DFLASH_ASSIGN_OR_RETURN(decoder.strip_first_, add_prefix_space.Bool());
  }
  return decoder;
}

absl::StatusOr<std::string> Decoder::Decode(const std::vector<absl::string_view>& tokens) const {
  if (!unsupported_.ok()) return unsupported_;
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    absl::StrAppend(
        &text, absl::StrReplaceAll(tokens[i], {{replacement_, i == 0 && strip_first_ ? "" : " "}}));
  }
  return text;
}

}  // namespace dflash::tokenizer_json
