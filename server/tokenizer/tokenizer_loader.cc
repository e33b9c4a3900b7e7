#include "server/tokenizer/tokenizer_loader.h"

#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/tokenizer/deberta_tokenizer.h"
#include "server/tokenizer/tokenizer_json/json_tokenizer.h"

namespace dflash {

absl::StatusOr<TokenizerChoice> ParseTokenizerChoice(absl::string_view name) {
  if (name == "auto") return TokenizerChoice::kAuto;
  if (name == "tokenizer_json") return TokenizerChoice::kTokenizerJson;
  if (name == "sentencepiece") return TokenizerChoice::kSentencePiece;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown tokenizer \"", name, "\" (expected auto, tokenizer_json or sentencepiece)"));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::filesystem::path& model_dir,
                                                         TokenizerChoice choice,
                                                         const TokenizerOptions& options) {
  if (choice == TokenizerChoice::kAuto) {
    std::error_code error;
    const bool has_json = std::filesystem::is_regular_file(model_dir / "tokenizer.json", error);
    const bool has_spm = std::filesystem::is_regular_file(model_dir / "spm.model", error);
    if (!has_json && !has_spm) {
      return absl::NotFoundError(absl::StrCat(model_dir.string(),
                                              ": no tokenizer: expected tokenizer.json or "
                                              "spm.model in the checkpoint directory"));
    }
    choice = has_json ? TokenizerChoice::kTokenizerJson : TokenizerChoice::kSentencePiece;
  }
  if (choice == TokenizerChoice::kTokenizerJson) {
    absl::StatusOr<std::unique_ptr<JsonTokenizer>> tokenizer =
        JsonTokenizer::Load(model_dir, options);
    if (!tokenizer.ok()) return tokenizer.status();
    return std::unique_ptr<Tokenizer>(*std::move(tokenizer));
  }
  absl::StatusOr<std::unique_ptr<DebertaTokenizer>> tokenizer =
      DebertaTokenizer::Load(model_dir, options);
  if (!tokenizer.ok()) return tokenizer.status();
  return std::unique_ptr<Tokenizer>(*std::move(tokenizer));
}

}  // namespace dflash
