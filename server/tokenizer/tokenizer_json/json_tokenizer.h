// A tokenizer read from a Hugging Face tokenizer.json, encoding exactly as the `tokenizers`
// library does for the components DeBERTa-v2/v3 and mDeBERTa files use (docs/deberta.md,
// "tokenizer.json"):
//   1. added tokens are cut out (added_vocabulary.h), the rest normalized (normalizers.h);
//   2. each normalized part is split by the pre-tokenizer (pre_tokenizers.h);
//   3. each split is tokenized by the Unigram model (unigram_model.h);
//   4. the post-processor's template adds the special tokens and type ids
//      (template_processing.h), with truncation by the Rust rules (truncation.h).
// Decode runs the file's decoder (decoders.h).
// tokenizer_config.json, when present, supplies what tokenizer.json does not hold:
// model_max_length, truncation_side and the names of the special tokens.
//
// Offsets (ByteSpan) are tokenizers' offsets in bytes: the input bytes of the characters a token
// came from, so a "▁word" token covers "word" and a lone "▁" covers the space it replaced. The
// Python offset_mapping counts characters instead; it names the same characters.
//
// Deviation: a truncation max_length below the template's special tokens is INVALID_ARGUMENT
// here; tokenizers then skips truncation (truncation.h).
//
// Thread safety: a loaded JsonTokenizer is immutable; every const method may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/tokenizer/tokenizer.h"
#include "server/tokenizer/tokenizer_json/added_vocabulary.h"
#include "server/tokenizer/tokenizer_json/decoders.h"
#include "server/tokenizer/tokenizer_json/normalizers.h"
#include "server/tokenizer/tokenizer_json/pre_tokenizers.h"
#include "server/tokenizer/tokenizer_json/template_processing.h"
#include "server/tokenizer/tokenizer_json/unigram_model.h"

namespace dflash {

// Bounds on what a tokenizer.json may hold; a file beyond them is refused at load.
struct TokenizerJsonLimits {
  size_t max_file_bytes = size_t{256} << 20;  // mDeBERTa's file is about 16 MiB.
  size_t max_pieces = size_t{1} << 22;        // mDeBERTa has 250,000.
  size_t max_added_tokens = size_t{1} << 16;  // DeBERTa files add a handful.
};

class JsonTokenizer : public Tokenizer {
 public:
  // Loads `model_dir`/tokenizer.json and the optional tokenizer_config.json.
  static absl::StatusOr<std::unique_ptr<JsonTokenizer>> Load(
      const std::filesystem::path& model_dir, const TokenizerOptions& options = {},
      const TokenizerJsonLimits& limits = {});
  // From the text of a tokenizer.json and the settings tokenizer_config.json would give.
  static absl::StatusOr<std::unique_ptr<JsonTokenizer>> FromJson(
      absl::string_view json, TokenizerConfig config, const TokenizerOptions& options = {},
      const TokenizerJsonLimits& limits = {});

  absl::StatusOr<Encoding> Assemble(const TextTokens& first, const TextTokens* second,
                                    const TruncationOptions& truncation) const override;
  // As tokenizers' decode: each id's token (an added token's content, else the model's piece),
  // special added tokens left out when `skip_special_tokens`, through the file's decoder
  // (decoders.h). Unlike tokenizers, which drops an id it does not know, such an id is an error.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens) const override;

  int32_t cls_id() const override { return cls_id_; }
  int32_t sep_id() const override { return sep_id_; }
  int32_t pad_id() const override { return pad_id_; }
  int32_t unk_id() const override { return unk_id_; }
  int32_t mask_id() const override { return mask_id_; }
  int32_t vocab_size() const override { return vocab_size_; }
  const TokenizerConfig& config() const override { return config_; }
  absl::string_view TokenText(int32_t id) const override;
  TokenizerSource source() const override { return TokenizerSource::kTokenizerJson; }

 private:
  JsonTokenizer() = default;
  absl::StatusOr<TextTokens> TokenizeText(absl::string_view text,
                                          absl::string_view what) const override;
  size_t max_input_bytes() const override { return options_.max_input_bytes; }
  // The id of a special token named in tokenizer_config.json, or `fallback`.
  int32_t ResolveId(const std::string& token, int32_t fallback) const;

  TokenizerOptions options_;
  TokenizerConfig config_;
  std::unique_ptr<tokenizer_json::Normalizer> normalizer_;       // May be null.
  std::unique_ptr<tokenizer_json::PreTokenizer> pre_tokenizer_;  // May be null.
  std::unique_ptr<tokenizer_json::UnigramModel> model_;
  std::unique_ptr<tokenizer_json::AddedVocabulary> added_;
  tokenizer_json::Decoder decoder_;
  EncodingTemplate template_;
  int32_t cls_id_ = -1;
  int32_t sep_id_ = -1;
  int32_t pad_id_ = -1;
  int32_t unk_id_ = -1;
  int32_t mask_id_ = -1;
  int32_t vocab_size_ = 0;
};

}  // namespace dflash
