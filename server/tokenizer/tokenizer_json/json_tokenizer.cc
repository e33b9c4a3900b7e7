#include "server/tokenizer/tokenizer_json/json_tokenizer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_document.h"
#include "common/logging.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash {
namespace {

using tokenizer_json::AlignedText;
using tokenizer_json::JsonNode;
using tokenizer_json::ModelToken;
using tokenizer_json::TextSegment;

// Larger inputs would overflow the 32-bit offsets of ByteSpan.
constexpr size_t kMaxInputBytesLimit = size_t{1} << 30;
// Ids beyond this are not a real vocabulary (as in tokenizer_config.cc).
constexpr int64_t kMaxTokenId = int64_t{1} << 24;
// tokenizer.json nests about six levels; the bound stops pathological nesting while parsing.
constexpr int kMaxJsonDepth = 32;

ByteSpan Span(size_t begin, size_t end) {
  return {static_cast<uint32_t>(begin), static_cast<uint32_t>(end)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<JsonTokenizer>> JsonTokenizer::Load(
    const std::filesystem::path& model_dir, const TokenizerOptions& options,
    const TokenizerJsonLimits& limits) {
  const std::filesystem::path path = model_dir / "tokenizer.json";
  DFLASH_ASSIGN_OR_RETURN(const std::string text, ReadFile(path, limits.max_file_bytes));
  DFLASH_ASSIGN_OR_RETURN(TokenizerConfig config, LoadTokenizerConfig(model_dir));
  absl::StatusOr<std::unique_ptr<JsonTokenizer>> tokenizer =
      FromJson(text, std::move(config), options, limits);
  if (!tokenizer.ok()) {
    // Errors about the file say "tokenizer.json: <path>: ..."; give the whole file path.
    const absl::string_view message = tokenizer.status().message();
    if (!absl::StartsWith(message, "tokenizer.json")) return tokenizer.status();
    return absl::Status(tokenizer.status().code(), absl::StrCat(model_dir.string(), "/", message));
  }
  Log().info("tokenizer {}: tokenizer.json, {} pieces, vocabulary {}, [MASK]={}",
             model_dir.string(), (*tokenizer)->model_->piece_count(), (*tokenizer)->vocab_size_,
             (*tokenizer)->mask_id_);
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<JsonTokenizer>> JsonTokenizer::FromJson(
    absl::string_view json, TokenizerConfig config, const TokenizerOptions& options,
    const TokenizerJsonLimits& limits) {
  if (options.max_input_bytes == 0 || options.max_input_bytes > kMaxInputBytesLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("TokenizerOptions.max_input_bytes is ", options.max_input_bytes,
                     "; expected a value in [1, ", kMaxInputBytesLimit, "]"));
  }
  if (json.size() > limits.max_file_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json is ", json.size(),
                                                   " bytes, more than the limit of ",
                                                   limits.max_file_bytes));
  }
  DFLASH_ASSIGN_OR_RETURN(const nlohmann::json document,
                          ParseJsonDocument(json, "tokenizer.json", kMaxJsonDepth));
  const JsonNode root(document, "");
  DFLASH_RETURN_IF_ERROR(root.ExpectObject());
  auto tokenizer = std::unique_ptr<JsonTokenizer>(new JsonTokenizer());
  tokenizer->options_ = options;
  tokenizer->config_ = std::move(config);

  const JsonNode version = root.Member("version");
  if (!version.IsNull()) {
    DFLASH_ASSIGN_OR_RETURN(const std::string value, version.String());
    if (value != "1.0") return version.Unsupported(absl::StrCat("version \"", value, "\""));
  }
  // truncation and padding are request settings that transformers overrides on every call: neither
  // changes an encoding here.
  DFLASH_ASSIGN_OR_RETURN(tokenizer->model_, tokenizer_json::UnigramModel::Parse(
                                                 root.Member("model"), limits.max_pieces));
  if (const JsonNode node = root.Member("normalizer"); !node.IsNull()) {
    DFLASH_ASSIGN_OR_RETURN(tokenizer->normalizer_, tokenizer_json::Normalizer::Parse(node));
  }
  if (const JsonNode node = root.Member("pre_tokenizer"); !node.IsNull()) {
    DFLASH_ASSIGN_OR_RETURN(tokenizer->pre_tokenizer_, tokenizer_json::PreTokenizer::Parse(node));
  }
  DFLASH_ASSIGN_OR_RETURN(tokenizer->added_,
                          tokenizer_json::AddedVocabulary::Parse(
                              root.Member("added_tokens"), *tokenizer->model_,
                              tokenizer->normalizer_.get(), limits.max_added_tokens));
  DFLASH_ASSIGN_OR_RETURN(tokenizer->decoder_,
                          tokenizer_json::Decoder::Parse(root.Member("decoder")));
  DFLASH_ASSIGN_OR_RETURN(tokenizer->template_, tokenizer_json::ParseTemplateProcessing(
                                                    root.Member("post_processor"), kMaxTokenId));

  int32_t vocab_size = std::max(tokenizer->model_->piece_count(), tokenizer->added_->end_id());
  for (const auto* pieces : {&tokenizer->template_.single, &tokenizer->template_.pair}) {
    for (const TemplatePiece& piece : *pieces) {
      for (const int32_t id : piece.ids) vocab_size = std::max(vocab_size, id + 1);
    }
  }
  tokenizer->vocab_size_ = vocab_size;
  const TokenizerConfig& names = tokenizer->config_;
  tokenizer->cls_id_ = tokenizer->ResolveId(names.cls_token, tokenizer->template_.FirstSpecialId());
  tokenizer->sep_id_ = tokenizer->ResolveId(names.sep_token, tokenizer->template_.LastSpecialId());
  tokenizer->pad_id_ = tokenizer->ResolveId(names.pad_token, -1);
  tokenizer->unk_id_ = tokenizer->ResolveId(names.unk_token, tokenizer->model_->unk_id());
  tokenizer->mask_id_ = tokenizer->ResolveId(names.mask_token, -1);
  return tokenizer;
}

int32_t JsonTokenizer::ResolveId(const std::string& token, int32_t fallback) const {
  if (const int32_t id = added_->TokenToId(token); id >= 0) return id;
  if (const int32_t id = model_->PieceToId(token); id >= 0) return id;
  return fallback;
}

absl::string_view JsonTokenizer::TokenText(int32_t id) const {
  if (const std::string* content = added_->IdToToken(id)) return *content;
  return model_->IdToPiece(id);
}

absl::StatusOr<TextTokens> JsonTokenizer::TokenizeText(absl::string_view text,
                                                       absl::string_view what) const {
  TextTokens tokens;
  std::vector<ModelToken> model_tokens;
  std::vector<AlignedText> pieces;
  for (TextSegment& segment : added_->ExtractAndNormalize(text, normalizer_.get())) {
    if (segment.added_token_id >= 0) {
      const auto [begin, end] = segment.text.InputRange(0, segment.text.text().size());
      tokens.ids.push_back(segment.added_token_id);
      tokens.offsets.push_back(Span(begin, end));
      continue;
    }
    pieces.clear();
    pieces.push_back(std::move(segment.text));
    if (pre_tokenizer_ != nullptr) pre_tokenizer_->Split(&pieces);
    for (const AlignedText& piece : pieces) {
      if (piece.empty()) continue;
      model_tokens.clear();
      if (absl::Status status = model_->Tokenize(piece.text(), &model_tokens); !status.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": ", status.message()));
      }
      for (const ModelToken& token : model_tokens) {
        const auto [begin, end] = piece.InputRange(token.begin, token.end);
        tokens.ids.push_back(token.id);
        tokens.offsets.push_back(Span(begin, end));
      }
    }
  }
  return tokens;
}

absl::StatusOr<Encoding> JsonTokenizer::Assemble(const TextTokens& first, const TextTokens* second,
                                                 const TruncationOptions& truncation) const {
  return AssembleEncoding(template_, first, second, truncation);
}

absl::StatusOr<std::string> JsonTokenizer::Decode(absl::Span<const int32_t> ids,
                                                  bool skip_special_tokens) const {
  DFLASH_RETURN_IF_ERROR(CheckIds(ids));
  std::vector<absl::string_view> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (const std::string* content = added_->IdToToken(ids[i])) {
      if (!(skip_special_tokens && added_->IsSpecial(ids[i]))) tokens.push_back(*content);
      continue;
    }
    const absl::string_view piece = model_->IdToPiece(ids[i]);
    if (piece.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id [", i, "] is ", ids[i], ", which names no token of the model"));
    }
    tokens.push_back(piece);
  }
  return decoder_.Decode(tokens);
}

}  // namespace dflash
