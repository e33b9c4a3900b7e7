// The tokenizer of a served model, whatever file it is read from: text (or a text pair) -> model
// input ids, token types and offsets. Two implementations exist: DebertaTokenizer
// (deberta_tokenizer.h, spm.model through libsentencepiece) and JsonTokenizer
// (tokenizer_json/json_tokenizer.h, a Hugging Face tokenizer.json); tokenizer_loader.h chooses
// one for a checkpoint directory. The rest of the server sees only this interface.
//
// Thread safety: a loaded tokenizer is immutable; every const method may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/tokenizer/tokenizer_config.h"
#include "server/tokenizer/truncation.h"

namespace dflash {

struct TokenizerOptions {
  // Longest text accepted, in UTF-8 bytes, checked before any other work; at most 1 GiB. 1 MiB
  // is far beyond DeBERTa's 512-token window (2-3 KB of English) yet bounds the cost of one
  // text: about 0.1 s of one core for prose and 0.6 s for the worst case measured (1 MiB of
  // punctuation with split_by_punct, 2M tokens) on a 2-core x86-64 machine with spm.model; with
  // tokenizer.json about 1 s for prose and 3 s for that worst case.
  size_t max_input_bytes = size_t{1} << 20;
};

// Where a token of an Encoding comes from.
enum class TokenSource : uint8_t {
  kTemplate,  // [CLS] or [SEP] added by the template.
  kFirst,     // Text A (including added tokens written in A).
  kSecond,    // Text B.
};

// A byte range [begin, end) of the input text a token came from; template tokens are empty. Each
// implementation documents which bytes a token covers.
struct ByteSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
  friend bool operator==(const ByteSpan&, const ByteSpan&) = default;
};

// The content tokens of one text, without [CLS]/[SEP]: the unit that Assemble combines. A rerank
// query can be tokenized once and paired with many passages.
struct TextTokens {
  std::vector<int32_t> ids;
  std::vector<ByteSpan> offsets;  // Into the text, one per id.
};

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> token_type_ids;       // 0 for [CLS] A [SEP], 1 for B [SEP].
  std::vector<uint8_t> special_tokens_mask;  // 1 for template tokens only, as in transformers.
  std::vector<TokenSource> sources;
  std::vector<ByteSpan> offsets;  // Into the text the token came from.
  // Content tokens of A and B before truncation, and whether truncation removed any.
  size_t first_tokens_before_truncation = 0;
  size_t second_tokens_before_truncation = 0;
  bool truncated = false;
};

// The file a tokenizer was read from.
enum class TokenizerSource : uint8_t {
  kSentencePiece,  // spm.model (+ tokenizer_config.json and the legacy token files).
  kTokenizerJson,  // tokenizer.json (+ tokenizer_config.json for lengths and sides).
};

// "sentencepiece" or "tokenizer_json", as the configuration and the Info RPC name them.
inline absl::string_view TokenizerSourceName(TokenizerSource source) {
  return source == TokenizerSource::kTokenizerJson ? "tokenizer_json" : "sentencepiece";
}

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The one check of a text before it is tokenized: INVALID_ARGUMENT naming `what` ("<what>: N
  // bytes, more than the limit of M bytes per text") for a text longer than max_input_bytes,
  // checked before any other work, then for invalid UTF-8 ("<what> is not valid UTF-8: ..."). The
  // service passes request field paths ("inputs[1].text_pair") as `what`.
  absl::Status CheckText(absl::string_view text, absl::string_view what) const;

  // Tokenizes one text (or a pair) into model input. INVALID_ARGUMENT for a text that fails
  // CheckText ("text", or "first text" and "second text" for a pair) or truncation options that
  // cannot be met. Both texts are checked before either is tokenized.
  absl::StatusOr<Encoding> Encode(absl::string_view text, std::optional<absl::string_view> pair,
                                  const TruncationOptions& truncation) const;

  // The content tokens of one text, offsets into `text`, after CheckText; `what` names the text in
  // errors. Assemble of EncodeText(a) and EncodeText(b) equals Encode(a, b) with the same
  // truncation.
  absl::StatusOr<TextTokens> EncodeText(absl::string_view text,
                                        absl::string_view what = "text") const;
  // The template and truncation around one or two tokenized texts (`second` may be null).
  virtual absl::StatusOr<Encoding> Assemble(const TextTokens& first, const TextTokens* second,
                                            const TruncationOptions& truncation) const = 0;

  // Model input given as ids of this vocabulary: the sequence as given, no template tokens added
  // (a client that wants [CLS]/[SEP] sends them), truncated like one text whose template adds
  // nothing. Offsets are empty. INVALID_ARGUMENT naming the index for an id outside
  // [0, vocab_size()), and for an empty list.
  absl::StatusOr<Encoding> EncodeIds(absl::Span<const int32_t> ids,
                                     const TruncationOptions& truncation) const;

  // The text of `ids`, as the source's decoder writes it; special tokens left out when
  // `skip_special_tokens`. INVALID_ARGUMENT naming the index for an id outside the vocabulary;
  // FAILED_PRECONDITION when the tokenizer's files describe no decoder this server implements.
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                             bool skip_special_tokens) const = 0;

  // Longest-first truncation to model_max_length on the configured side when the checkpoint sets
  // a length limit; no truncation otherwise.
  TruncationOptions DefaultTruncation() const;

  virtual int32_t cls_id() const = 0;
  virtual int32_t sep_id() const = 0;
  virtual int32_t pad_id() const = 0;
  virtual int32_t unk_id() const = 0;
  virtual int32_t mask_id() const = 0;
  // One more than the largest id this tokenizer emits.
  virtual int32_t vocab_size() const = 0;
  virtual const TokenizerConfig& config() const = 0;
  // The piece or added token of `id`; empty for an id outside the vocabulary.
  virtual absl::string_view TokenText(int32_t id) const = 0;
  virtual TokenizerSource source() const = 0;

 protected:
  // The per-source step of EncodeText and Encode: the content tokens of `text`, which passed
  // CheckText. `what` (EncodeText's name for it, or Encode's "text", "first text", "second text")
  // names it in errors.
  virtual absl::StatusOr<TextTokens> TokenizeText(absl::string_view text,
                                                  absl::string_view what) const = 0;
  virtual size_t max_input_bytes() const = 0;

  // INVALID_ARGUMENT naming the index when an id of `ids` is outside [0, vocab_size()).
  absl::Status CheckIds(absl::Span<const int32_t> ids) const;
};

}  // namespace dflash
