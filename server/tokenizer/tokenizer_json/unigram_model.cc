#include "server/tokenizer/tokenizer_json/unigram_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {
namespace {

constexpr double kUnknownPenalty = 10.0;
// Pieces longer than this are not sentencepiece pieces; the bound keeps prefix search cheap.
constexpr size_t kMaxPieceBytes = 1024;

}  // namespace

absl::StatusOr<std::unique_ptr<UnigramModel>> UnigramModel::Parse(const JsonNode& node,
                                                                  size_t max_pieces) {
  DFLASH_ASSIGN_OR_RETURN(const std::string type, node.Type());
  if (type != "Unigram") {
    return node.Member("type").Unsupported(
        absl::StrCat("model type \"", type, "\" (DeBERTa-v2/v3 files use Unigram)"));
  }
  auto model = std::unique_ptr<UnigramModel>(new UnigramModel());
  const JsonNode vocab = node.Member("vocab");
  DFLASH_RETURN_IF_ERROR(vocab.ExpectArray());
  if (vocab.Size() > max_pieces) {
    return vocab.Invalid(
        absl::StrCat("holds ", vocab.Size(), " pieces, more than the limit of ", max_pieces));
  }
  model->pieces_.reserve(vocab.Size());
  model->min_score_ = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < vocab.Size(); ++i) {
    const JsonNode entry = vocab.Element(i);
    if (!entry.value().is_array() || entry.Size() != 2) {
      return entry.Invalid("expected [piece, score]");
    }
    DFLASH_ASSIGN_OR_RETURN(std::string piece, entry.Element(0).String());
    DFLASH_RETURN_IF_ERROR(ValidateUtf8(piece, entry.Element(0).path()));
    if (piece.size() > kMaxPieceBytes) {
      return entry.Element(0).Invalid(
          absl::StrCat("a piece of ", piece.size(), " bytes (at most ", kMaxPieceBytes, ")"));
    }
    DFLASH_ASSIGN_OR_RETURN(const double score, entry.Element(1).Number());
    if (!std::isfinite(score)) return entry.Element(1).Invalid("the score must be finite");
    model->min_score_ = std::min(model->min_score_, score);
    model->longest_piece_ = std::max(model->longest_piece_, piece.size());
    model->ids_[piece] = static_cast<int32_t>(i);
    model->pieces_.emplace_back(std::move(piece), score);
  }
  const JsonNode unk = node.Member("unk_id");
  if (!unk.IsNull()) {
    if (model->pieces_.empty()) return vocab.Invalid("is empty, but unk_id is set");
    DFLASH_ASSIGN_OR_RETURN(const int64_t unk_id,
                            unk.Index(static_cast<int64_t>(model->pieces_.size()) - 1));
    model->unk_id_ = static_cast<int32_t>(unk_id);
  }
  DFLASH_ASSIGN_OR_RETURN(model->byte_fallback_, node.Member("byte_fallback").OptionalBool(false));
  for (const auto& [piece, id] : model->ids_) {
    if (!piece.empty()) model->sorted_.emplace_back(piece, id);
  }
  std::sort(model->sorted_.begin(), model->sorted_.end());
  return model;
}

int32_t UnigramModel::PieceToId(absl::string_view piece) const {
  const auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

absl::string_view UnigramModel::IdToPiece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return {};
  return pieces_[static_cast<size_t>(id)].first;
}

template <typename Visit>
void UnigramModel::ForEachPrefix(absl::string_view text, size_t offset, Visit visit) const {
  // Narrow the sorted pieces to those that share text[offset, offset + length) as the length
  // grows; a piece of exactly that length is a match.
  auto low = sorted_.begin();
  auto high = sorted_.end();
  const size_t limit = std::min(longest_piece_, text.size() - offset);
  for (size_t length = 1; length <= limit && low != high; ++length) {
    const char byte = text[offset + length - 1];
    low = std::lower_bound(low, high, byte, [length](const auto& entry, char value) {
      return entry.first.size() < length || static_cast<unsigned char>(entry.first[length - 1]) <
                                                static_cast<unsigned char>(value);
    });
    high = std::upper_bound(low, high, byte, [length](char value, const auto& entry) {
      return static_cast<unsigned char>(value) <
             static_cast<unsigned char>(entry.first[length - 1]);
    });
    if (low != high && low->first.size() == length) {
      visit(length, low->second);
      ++low;
    }
  }
}

absl::Status UnigramModel::Tokenize(absl::string_view piece, std::vector<ModelToken>* out) const {
  struct Node {
    int32_t id = 0;
    double score = 0;
    std::optional<size_t> starts_at;
  };
  const size_t size = piece.size();
  const double unknown_score = min_score_ - kUnknownPenalty;
  std::vector<Node> best(size + 1);
  bool missing_unknown = false;
  for (size_t start = 0; start < size;) {
    const double score_here = best[start].score;
    const size_t char_length = DecodeUtf8At(piece, start).length;
    bool has_single = false;
    ForEachPrefix(piece, start, [&](size_t length, int32_t id) {
      Node& target = best[start + length];
      const double candidate = pieces_[static_cast<size_t>(id)].second + score_here;
      if (!target.starts_at.has_value() || candidate > target.score) {
        target = {id, candidate, start};
      }
      if (length == char_length) has_single = true;
    });
    if (!has_single) {
      Node& target = best[start + char_length];
      const double candidate = unknown_score + score_here;
      if (!target.starts_at.has_value() || candidate > target.score) {
        if (unk_id_ < 0) missing_unknown = true;
        target = {unk_id_, candidate, start};
      }
    }
    start += char_length;
  }
  // Back from the end; runs of unknown pieces fuse into one token.
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<bool> unknown;
  for (size_t end = size; end > 0;) {
    const Node& node = best[end];
    const size_t start = *node.starts_at;
    const bool is_unknown = unk_id_ >= 0 && node.id == unk_id_;
    if (node.id < 0) missing_unknown = true;
    if (is_unknown && !unknown.empty() && unknown.back()) {
      spans.back().first = start;
    } else {
      spans.emplace_back(start, end);
      unknown.push_back(is_unknown);
    }
    end = start;
  }
  if (missing_unknown) {
    return absl::FailedPreconditionError(
        "the text has a character that no piece of the tokenizer.json vocabulary covers, and the "
        "model has no unk_id");
  }
  for (size_t i = spans.size(); i-- > 0;) {
    const auto [begin, end] = spans[i];
    const absl::string_view text = piece.substr(begin, end - begin);
    const int32_t id = PieceToId(text);
    if (id >= 0) {
      out->push_back({id, begin, end});
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (const char byte : text) {
        const int32_t byte_id =
            PieceToId(absl::StrFormat("<0x%02X>", static_cast<unsigned char>(byte)));
        if (byte_id < 0) break;
        bytes.push_back(byte_id);
      }
      if (bytes.size() == text.size()) {
        for (const int32_t byte_id : bytes) out->push_back({byte_id, begin, end});
        continue;
      }
    }
    if (unk_id_ < 0) {
      return absl::FailedPreconditionError(
          "the text needs the unknown piece, and the tokenizer.json model has no unk_id");
    }
    out->push_back({unk_id_, begin, end});
  }
  return absl::OkStatus();
}

}  // namespace dflash::tokenizer_json
