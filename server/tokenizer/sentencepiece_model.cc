// The only translation unit that includes sentencepiece_processor.h (see the header for why).
#include "server/tokenizer/sentencepiece_model.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <limits>
#include <system_error>
#include <utility>

namespace dflash {

SentencePieceModel::SentencePieceModel(
    std::unique_ptr<sentencepiece::SentencePieceProcessor> processor)
    : processor_(std::move(processor)) {}

SentencePieceModel::~SentencePieceModel() = default;

std::unique_ptr<SentencePieceModel> SentencePieceModel::Load(const std::filesystem::path& path,
                                                             SentencePieceError* error) {
  std::error_code filesystem_error;
  if (!std::filesystem::is_regular_file(path, filesystem_error)) {
    error->kind = SentencePieceError::Kind::kNotFound;
    error->message = path.string() +
                     ": no such file (the sentencepiece model that DeBERTa-v2/v3 checkpoints ship "
                     "as spm.model)";
    return nullptr;
  }
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const sentencepiece::util::Status status = processor->Load(path.string());
  if (!status.ok()) {
    error->kind = SentencePieceError::Kind::kInvalidModel;
    error->message = path.string() + ": not a valid sentencepiece model: " + status.ToString();
    return nullptr;
  }
  if (processor->GetPieceSize() <= 0) {
    error->kind = SentencePieceError::Kind::kInvalidModel;
    error->message = path.string() + ": the sentencepiece model has no pieces";
    return nullptr;
  }
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(std::move(processor)));
}

int SentencePieceModel::piece_count() const { return processor_->GetPieceSize(); }

int32_t SentencePieceModel::PieceToId(std::string_view piece) const {
  const int id = processor_->PieceToId(piece);
  if (id < 0 || id >= piece_count() || processor_->IdToPiece(id) != piece) return -1;
  return id;
}

std::string_view SentencePieceModel::IdToPiece(int32_t id) const {
  if (id < 0 || id >= piece_count()) return {};
  return processor_->IdToPiece(id);
}

int32_t SentencePieceModel::unk_id() const { return processor_->unk_id(); }

bool SentencePieceModel::Encode(std::string_view text, std::vector<SentencePieceToken>* tokens,
                                SentencePieceError* error) const {
  tokens->clear();
  if (text.size() >= std::numeric_limits<uint32_t>::max()) {
    error->kind = SentencePieceError::Kind::kEncodeFailed;
    error->message = "text too large for sentencepiece (4 GiB or more)";
    return false;
  }
  sentencepiece::ImmutableSentencePieceText encoded;
  const sentencepiece::util::Status status = processor_->Encode(text, encoded.mutable_proto());
  if (!status.ok()) {
    error->kind = SentencePieceError::Kind::kEncodeFailed;
    error->message = "sentencepiece encode failed: " + status.ToString();
    return false;
  }
  const size_t count = encoded.pieces_size();
  tokens->reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const auto piece = encoded.pieces(static_cast<int>(i));
    // Offsets come from the normalizer's alignment; clamp them so that a surprise can never
    // index outside `text` downstream.
    const uint32_t end = std::min<uint32_t>(piece.end(), static_cast<uint32_t>(text.size()));
    const uint32_t begin = std::min<uint32_t>(piece.begin(), end);
    tokens->push_back({static_cast<int32_t>(piece.id()), begin, end});
  }
  return true;
}

}  // namespace dflash
