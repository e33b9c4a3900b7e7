// DeBERTa-v2/v3 tokenizer: spm.model + the tokenizer files of a checkpoint directory -> model
// input ids. Serves a checkpoint without tokenizer.json, or one configured with `tokenizer:
// sentencepiece` (tokenizer_loader.h); tokenizer_json/json_tokenizer.h reads tokenizer.json.
//
// Semantics: sentencepiece / transformers-4, as docs/deberta.md#tokenizer recommends, because that
// is what the models were pretrained and fine-tuned with:
//   1. added and special tokens are cut out of the raw text first (exact, case-sensitive,
//      leftmost-longest; user text containing "[SEP]" becomes the real SEP id, as in transformers);
//   2. each remaining chunk is lower-cased like Python's str.lower() when do_lower_case;
//   3. with split_by_punct every punctuation character becomes a piece of its own;
//   4. each chunk or piece is encoded by libsentencepiece on its own (nmt_nfkc normalization,
//      whitespace trimmed and collapsed, its own dummy-prefix "▁", Unigram Viterbi, consecutive
//      unknown characters merged into one [UNK]);
//   5. template [CLS] A [SEP] or [CLS] A [SEP] B [SEP], token types 0 for [CLS] A [SEP] and 1 for
//      B [SEP], with the truncation rules of the Rust tokenizers (truncation.h).
//
// Known differences from transformers 5.17's DebertaV2Tokenizer (tokenizers backend), all
// recorded and flagged ("hf5_differs") in tests/golden/tokenizer:
// - it replaces sentencepiece's nmt_nfkc normalization by "\s{2,}|[\n\r\t] -> space, NFC,
//   strip right", so text that is not NFKC-stable (full-width letters, ligatures, NBSP, U+2003,
//   U+3000, zero-width space, U+2028, "½ № ™", circled or Roman numerals, Kelvin/Ohm/Angstrom
//   signs, long s, DŽ-style digraphs, some combining sequences) can tokenize differently; there it
//   tends to emit [UNK] or raw pieces where sentencepiece maps to ASCII or compatibility forms;
// - with split_by_punct, whitespace between two punctuation characters becomes an extra "▁";
// - an empty second text ("") is dropped there (Python truthiness), giving [CLS] A [SEP]; here a
//   pair is always [CLS] A [SEP] B [SEP];
// - a truncation max_length below the special-token count is silently ignored there and an error
//   here (truncation.h).
// ASCII/NFC text, whitespace, CJK, emoji, casing, special tokens and truncation agree. Token
// offsets follow sentencepiece's alignment (the space before a word belongs to its token), not
// transformers' offset_mapping.
//
// Token offsets (ByteSpan) follow sentencepiece's alignment: the whitespace before a word belongs
// to that word's token; a standalone "▁" is empty.
//
// Thread safety: a loaded DebertaTokenizer is immutable; every const method may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/tokenizer/encoding_template.h"
#include "server/tokenizer/pretokenizer.h"
#include "server/tokenizer/sentencepiece_model.h"
#include "server/tokenizer/tokenizer.h"
#include "server/tokenizer/tokenizer_config.h"
#include "server/tokenizer/truncation.h"

namespace dflash {

class DebertaTokenizer : public Tokenizer {
 public:
  // Loads spm.model and the optional tokenizer files (tokenizer_config.h) from `model_dir`. Ids:
  // a token the files give an id keeps it; otherwise a token that is a sentencepiece piece takes
  // the piece id ([PAD] [CLS] [SEP] [UNK] = 0..3 in DeBERTa's layout); the remaining special
  // tokens get piece_count, piece_count + 1, ... ([MASK] first, then the additional ones in file
  // order), as transformers assigns them.
  static absl::StatusOr<std::unique_ptr<DebertaTokenizer>> Load(
      const std::filesystem::path& model_dir, const TokenizerOptions& options = {});

  // Step 5: the template and truncation around one or two tokenized texts (`second` may be null).
  absl::StatusOr<Encoding> Assemble(const TextTokens& first, const TextTokens* second,
                                    const TruncationOptions& truncation) const override;

  // Each run of sentencepiece pieces is decoded by libsentencepiece, as sentencepiece's decode
  // does (byte pieces reassembled, the run's leading whitespace dropped); an added token is
  // written as its text, or left out when it is a special token and `skip_special_tokens`. A run
  // after written text keeps one space for a leading "▁", as tokenizers' Metaspace decoder does.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens) const override;

  int32_t cls_id() const override { return cls_id_; }
  int32_t sep_id() const override { return sep_id_; }
  int32_t pad_id() const override { return pad_id_; }
  int32_t unk_id() const override { return unk_id_; }
  int32_t mask_id() const override { return mask_id_; }
  // Sentencepiece pieces plus added tokens: one more than the largest id this tokenizer emits.
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t piece_count() const { return model_->piece_count(); }
  const TokenizerConfig& config() const override { return config_; }
  // The piece or added token of `id`; empty for an id outside the vocabulary.
  absl::string_view TokenText(int32_t id) const override;
  TokenizerSource source() const override { return TokenizerSource::kSentencePiece; }

 private:
  DebertaTokenizer() = default;

  // Steps 1-4 for one text: its content tokens, offsets into `text`.
  absl::StatusOr<TextTokens> TokenizeText(absl::string_view text,
                                          absl::string_view what) const override;
  size_t max_input_bytes() const override { return options_.max_input_bytes; }
  // Whether added token `id` is one of the special tokens (the five named ones and
  // additional_special_tokens), which Decode may skip.
  bool IsSpecial(int32_t id) const;
  absl::Status EncodePlainChunk(absl::string_view text, size_t chunk_begin, size_t chunk_end,
                                TextTokens* out) const;
  absl::Status EncodeWithSentencePiece(absl::string_view piece, size_t piece_offset,
                                       std::vector<int32_t>* ids,
                                       std::vector<ByteSpan>* offsets) const;

  TokenizerOptions options_;
  TokenizerConfig config_;
  std::unique_ptr<SentencePieceModel> model_;
  std::unique_ptr<AddedTokenMatcher> added_tokens_;
  std::vector<AddedTokenMatcher::Token> added_token_list_;  // Sorted by id, for TokenText.
  std::vector<int32_t> special_ids_;                        // Sorted.
  int32_t cls_id_ = 1;
  int32_t sep_id_ = 2;
  int32_t pad_id_ = 0;
  int32_t unk_id_ = 3;
  int32_t mask_id_ = 0;
  int32_t vocab_size_ = 0;
  EncodingTemplate template_;  // [CLS] A [SEP] / [CLS] A [SEP] B [SEP].
};

}  // namespace dflash
