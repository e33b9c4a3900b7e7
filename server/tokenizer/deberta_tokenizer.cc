#include "server/tokenizer/deberta_tokenizer.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/tokenizer/encoding_template.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash {
namespace {

// Larger inputs would overflow the 32-bit offsets of sentencepiece and of ByteSpan.
constexpr size_t kMaxInputBytesLimit = size_t{1} << 30;

absl::Status FromSentencePieceError(const SentencePieceError& error) {
  switch (error.kind) {
    case SentencePieceError::Kind::kNotFound:
      return absl::NotFoundError(error.message);
    case SentencePieceError::Kind::kInvalidModel:
      return absl::InvalidArgumentError(error.message);
    case SentencePieceError::Kind::kEncodeFailed:
    case SentencePieceError::Kind::kDecodeFailed:
      return absl::InternalError(error.message);
  }
  return absl::UnknownError(error.message);
}

ByteSpan Span(size_t begin, size_t end) {
  return {static_cast<uint32_t>(begin), static_cast<uint32_t>(end)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<DebertaTokenizer>> DebertaTokenizer::Load(
    const std::filesystem::path& model_dir, const TokenizerOptions& options) {
  if (options.max_input_bytes == 0 || options.max_input_bytes > kMaxInputBytesLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("TokenizerOptions.max_input_bytes is ", options.max_input_bytes,
                     "; expected a value in [1, ", kMaxInputBytesLimit, "]"));
  }
  auto tokenizer = std::unique_ptr<DebertaTokenizer>(new DebertaTokenizer());
  tokenizer->options_ = options;
  DFLASH_ASSIGN_OR_RETURN(tokenizer->config_, LoadTokenizerConfig(model_dir));
  const TokenizerConfig& config = tokenizer->config_;

  SentencePieceError error;
  tokenizer->model_ = SentencePieceModel::Load(model_dir / "spm.model", &error);
  if (tokenizer->model_ == nullptr) return FromSentencePieceError(error);
  const SentencePieceModel& model = *tokenizer->model_;

  // Ids, in transformers' order of precedence: stated by the files, else a sentencepiece piece,
  // else the next free id after the pieces and every stated id.
  std::map<std::string, int32_t> ids;
  int64_t next_id = model.piece_count();
  for (const auto& [token, id] : config.explicit_token_ids) {
    ids.emplace(token, static_cast<int32_t>(id));
    next_id = std::max(next_id, id + 1);
  }
  auto resolve = [&](const std::string& token) -> int32_t {
    if (const auto it = ids.find(token); it != ids.end()) return it->second;
    int32_t id = model.PieceToId(token);
    if (id < 0) id = static_cast<int32_t>(next_id++);
    ids.emplace(token, id);
    return id;
  };
  tokenizer->cls_id_ = resolve(config.cls_token);
  tokenizer->sep_id_ = resolve(config.sep_token);
  tokenizer->template_ = EncodingTemplate::ClsSep(tokenizer->cls_id_, tokenizer->sep_id_);
  tokenizer->pad_id_ = resolve(config.pad_token);
  tokenizer->unk_id_ = resolve(config.unk_token);
  tokenizer->mask_id_ = resolve(config.mask_token);
  for (const std::string& token : config.additional_special_tokens) {
    tokenizer->special_ids_.push_back(resolve(token));
  }
  tokenizer->special_ids_.insert(tokenizer->special_ids_.end(),
                                 {tokenizer->cls_id_, tokenizer->sep_id_, tokenizer->pad_id_,
                                  tokenizer->unk_id_, tokenizer->mask_id_});
  std::sort(tokenizer->special_ids_.begin(), tokenizer->special_ids_.end());

  std::vector<AddedTokenMatcher::Token> added;
  int32_t max_id = model.piece_count() - 1;
  for (const auto& [token, id] : ids) {
    DFLASH_RETURN_IF_ERROR(ValidateUtf8(token, absl::StrCat("added token \"", token, "\"")));
    added.push_back({token, id});
    max_id = std::max(max_id, id);
  }
  tokenizer->vocab_size_ = max_id + 1;
  tokenizer->added_tokens_ = std::make_unique<AddedTokenMatcher>(added);
  std::sort(added.begin(), added.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  tokenizer->added_token_list_ = std::move(added);

  Log().info(
      "tokenizer {}: {} pieces, vocabulary {}, [MASK]={}, do_lower_case={}, split_by_punct={}",
      model_dir.string(), model.piece_count(), tokenizer->vocab_size_, tokenizer->mask_id_,
      config.do_lower_case, config.split_by_punct);
  return tokenizer;
}

absl::string_view DebertaTokenizer::TokenText(int32_t id) const {
  const auto it =
      std::lower_bound(added_token_list_.begin(), added_token_list_.end(), id,
                       [](const auto& token, int32_t value) { return token.id < value; });
  if (it != added_token_list_.end() && it->id == id) return it->content;
  const std::string_view piece = model_->IdToPiece(id);
  return absl::string_view(piece.data(), piece.size());
}

absl::Status DebertaTokenizer::EncodeWithSentencePiece(absl::string_view piece, size_t piece_offset,
                                                       std::vector<int32_t>* ids,
                                                       std::vector<ByteSpan>* offsets) const {
  std::vector<SentencePieceToken> tokens;
  SentencePieceError error;
  if (!model_->Encode(std::string_view(piece.data(), piece.size()), &tokens, &error)) {
    return FromSentencePieceError(error);
  }
  for (const SentencePieceToken& token : tokens) {
    ids->push_back(token.id);
    offsets->push_back(Span(piece_offset + token.byte_begin, piece_offset + token.byte_end));
  }
  return absl::OkStatus();
}

absl::Status DebertaTokenizer::EncodePlainChunk(absl::string_view text, size_t chunk_begin,
                                                size_t chunk_end, TextTokens* out) const {
  const absl::string_view chunk = text.substr(chunk_begin, chunk_end - chunk_begin);
  std::optional<LowercasedText> lowered;
  if (config_.do_lower_case) lowered = LowercaseLikePython(chunk);
  const absl::string_view work = lowered.has_value() ? absl::string_view(lowered->text) : chunk;

  // Offsets first relative to `work`, then mapped back to `text`.
  std::vector<int32_t> ids;
  std::vector<ByteSpan> offsets;
  if (config_.split_by_punct) {
    for (const TextChunk& piece : SplitOnPunctuation(work)) {
      DFLASH_RETURN_IF_ERROR(EncodeWithSentencePiece(
          work.substr(piece.begin, piece.end - piece.begin), piece.begin, &ids, &offsets));
    }
  } else {
    DFLASH_RETURN_IF_ERROR(EncodeWithSentencePiece(work, 0, &ids, &offsets));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    ByteSpan span = offsets[i];
    if (lowered.has_value())
      span = {lowered->SourceBegin(span.begin), lowered->SourceEnd(span.end)};
    out->ids.push_back(ids[i]);
    out->offsets.push_back(Span(chunk_begin + span.begin, chunk_begin + span.end));
  }
  return absl::OkStatus();
}

absl::StatusOr<TextTokens> DebertaTokenizer::TokenizeText(absl::string_view text,
                                                          absl::string_view /*what*/) const {
  TextTokens tokens;
  for (const TextChunk& chunk : added_tokens_->Split(text)) {
    if (chunk.added_token_id >= 0) {
      tokens.ids.push_back(chunk.added_token_id);
      tokens.offsets.push_back(Span(chunk.begin, chunk.end));
    } else {
      DFLASH_RETURN_IF_ERROR(EncodePlainChunk(text, chunk.begin, chunk.end, &tokens));
    }
  }
  return tokens;
}

absl::StatusOr<Encoding> DebertaTokenizer::Assemble(const TextTokens& first,
                                                    const TextTokens* second,
                                                    const TruncationOptions& truncation) const {
  return AssembleEncoding(template_, first, second, truncation);
}

bool DebertaTokenizer::IsSpecial(int32_t id) const {
  return std::binary_search(special_ids_.begin(), special_ids_.end(), id);
}

absl::StatusOr<std::string> DebertaTokenizer::Decode(absl::Span<const int32_t> ids,
                                                     bool skip_special_tokens) const {
  DFLASH_RETURN_IF_ERROR(CheckIds(ids));
  std::string text;
  std::vector<int32_t> run;
  auto flush = [&]() -> absl::Status {
    if (run.empty()) return absl::OkStatus();
    std::string decoded;
    SentencePieceError error;
    if (!model_->Decode(run, &decoded, &error)) return FromSentencePieceError(error);
    if (!text.empty() && model_->IdToPiece(run.front()).starts_with("\xE2\x96\x81")) text += ' ';
    text += decoded;
    run.clear();
    return absl::OkStatus();
  };
  for (const int32_t id : ids) {
    const auto added =
        std::lower_bound(added_token_list_.begin(), added_token_list_.end(), id,
                         [](const auto& token, int32_t value) { return token.id < value; });
    if (added == added_token_list_.end() || added->id != id) {
      run.push_back(id);
      continue;
    }
    if (skip_special_tokens && IsSpecial(id)) continue;
    DFLASH_RETURN_IF_ERROR(flush());
    text += added->content;
  }
  DFLASH_RETURN_IF_ERROR(flush());
  return text;
}

}  // namespace dflash
