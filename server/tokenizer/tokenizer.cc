#include "server/tokenizer/tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/tokenizer/encoding_template.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash {

absl::Status Tokenizer::CheckText(absl::string_view text, absl::string_view what) const {
  if (text.size() > max_input_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", text.size(),
                                                   " bytes, more than the limit of ",
                                                   max_input_bytes(), " bytes per text"));
  }
  return ValidateUtf8(text, what);
}

absl::StatusOr<TextTokens> Tokenizer::EncodeText(absl::string_view text,
                                                 absl::string_view what) const {
  DFLASH_RETURN_IF_ERROR(CheckText(text, what));
  return TokenizeText(text, what);
}

absl::StatusOr<Encoding> Tokenizer::Encode(absl::string_view text,
                                           std::optional<absl::string_view> pair,
                                           const TruncationOptions& truncation) const {
  const absl::string_view what = pair.has_value() ? "first text" : "text";
  DFLASH_RETURN_IF_ERROR(CheckText(text, what));
  if (pair.has_value()) DFLASH_RETURN_IF_ERROR(CheckText(*pair, "second text"));
  DFLASH_ASSIGN_OR_RETURN(const TextTokens first, TokenizeText(text, what));
  if (!pair.has_value()) return Assemble(first, nullptr, truncation);
  DFLASH_ASSIGN_OR_RETURN(const TextTokens second, TokenizeText(*pair, "second text"));
  return Assemble(first, &second, truncation);
}

absl::Status Tokenizer::CheckIds(absl::Span<const int32_t> ids) const {
  const int32_t size = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id [", i, "] is ", ids[i], ", outside the model's vocabulary [0, ", size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Encoding> Tokenizer::EncodeIds(absl::Span<const int32_t> ids,
                                              const TruncationOptions& truncation) const {
  if (ids.empty()) return absl::InvalidArgumentError("the token id list is empty");
  DFLASH_RETURN_IF_ERROR(CheckIds(ids));
  TextTokens tokens;
  tokens.ids.assign(ids.begin(), ids.end());
  tokens.offsets.resize(ids.size());
  // The default template: the ids alone, type 0, nothing added.
  return AssembleEncoding(EncodingTemplate{}, tokens, nullptr, truncation);
}

TruncationOptions Tokenizer::DefaultTruncation() const {
  TruncationOptions options;
  options.side = config().truncation_side;
  if (config().model_max_length.has_value()) {
    options.strategy = TruncationStrategy::kLongestFirst;
    options.max_length = *config().model_max_length;
  }
  return options;
}

}  // namespace dflash
