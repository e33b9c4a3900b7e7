// libdflash_sentencepiece_shim.so: libsentencepiece behind the C interface of
// sentencepiece_shim_api.h (see there for why it lives in its own link namespace). Everything the
// tokenizer needs from sentencepiece is here; nothing else includes sentencepiece_processor.h.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "server/tokenizer/sentencepiece_shim_api.h"

namespace {

void WriteMessage(const std::string& text, char* message, size_t capacity) {
  if (message == nullptr || capacity == 0) return;
  const size_t size = std::min(text.size(), capacity - 1);
  std::memcpy(message, text.data(), size);
  message[size] = '\0';
}

// What a model handle points to: the processor, and spare output messages for Encode. A cleared
// message keeps its pieces and their strings, so reusing one spares the allocations of every
// piece. The spares are shared by the calling threads (not thread_local: this library lives in
// its own link namespace, whose thread-exit destructors the process's threads never run).
struct Model {
  sentencepiece::SentencePieceProcessor processor;
  mutable std::mutex mutex;
  mutable std::vector<std::unique_ptr<sentencepiece::ImmutableSentencePieceText>> spares;
};

// A message that held a text over this size is freed rather than kept, which bounds what the
// spares hold (a piece covers at least one byte of its text).
constexpr size_t kRetainedTextBytes = 16 << 10;

const Model& ModelOf(const void* model) { return *static_cast<const Model*>(model); }

const sentencepiece::SentencePieceProcessor& Processor(const void* model) {
  return ModelOf(model).processor;
}

std::unique_ptr<sentencepiece::ImmutableSentencePieceText> TakeSpare(const Model& model) {
  {
    std::lock_guard<std::mutex> lock(model.mutex);
    if (!model.spares.empty()) {
      std::unique_ptr<sentencepiece::ImmutableSentencePieceText> spare =
          std::move(model.spares.back());
      model.spares.pop_back();
      return spare;
    }
  }
  return std::unique_ptr<sentencepiece::ImmutableSentencePieceText>(
      new (std::nothrow) sentencepiece::ImmutableSentencePieceText());
}

// Without memory for the list the spare is freed (no exception may reach the caller).
void KeepSpare(const Model& model,
               std::unique_ptr<sentencepiece::ImmutableSentencePieceText> spare) noexcept {
  std::lock_guard<std::mutex> lock(model.mutex);
  try {
    model.spares.push_back(std::move(spare));
  } catch (const std::bad_alloc&) {
  }
}

}  // namespace

extern "C" {

void* dflash_spm_load(const char* path, int* error_kind, char* message, size_t message_capacity) {
  // An exception must not cross into the caller's namespace: everything here is noexcept-safe.
  auto* model = new (std::nothrow) Model();
  if (model == nullptr) {
    *error_kind = DFLASH_SPM_INVALID_MODEL;
    WriteMessage("out of memory", message, message_capacity);
    return nullptr;
  }
  const sentencepiece::util::Status status = model->processor.Load(std::string(path));
  if (!status.ok()) {
    *error_kind = DFLASH_SPM_INVALID_MODEL;
    WriteMessage(status.ToString(), message, message_capacity);
    delete model;
    return nullptr;
  }
  *error_kind = DFLASH_SPM_OK;
  return model;
}

void dflash_spm_free(void* model) { delete static_cast<Model*>(model); }

int32_t dflash_spm_piece_count(const void* model) { return Processor(model).GetPieceSize(); }

int32_t dflash_spm_unk_id(const void* model) { return Processor(model).unk_id(); }

int32_t dflash_spm_piece_to_id(const void* model, const char* piece, size_t size) {
  const auto& processor = Processor(model);
  const std::string text(piece, size);
  const int id = processor.PieceToId(text);
  // sentencepiece answers unk_id for an unknown piece; tell the two apart.
  if (id < 0 || id >= processor.GetPieceSize() || processor.IdToPiece(id) != text) return -1;
  return id;
}

const char* dflash_spm_id_to_piece(const void* model, int32_t id, size_t* size) {
  const auto& processor = Processor(model);
  if (id < 0 || id >= processor.GetPieceSize()) {
    *size = 0;
    return "";
  }
  const std::string& piece = processor.IdToPiece(id);
  *size = piece.size();
  return piece.data();
}

int64_t dflash_spm_encode(const void* model, const char* text, size_t size, DflashSpmToken* tokens,
                          size_t capacity, char* message, size_t message_capacity) {
  if (size >= std::numeric_limits<uint32_t>::max()) {
    WriteMessage("text too large for sentencepiece (4 GiB or more)", message, message_capacity);
    return -1;
  }
  std::unique_ptr<sentencepiece::ImmutableSentencePieceText> encoded = TakeSpare(ModelOf(model));
  if (encoded == nullptr) {
    WriteMessage("out of memory", message, message_capacity);
    return -1;
  }
  const sentencepiece::util::Status status =
      Processor(model).Encode(std::string_view(text, size), encoded->mutable_proto());
  if (!status.ok()) {
    WriteMessage("sentencepiece encode failed: " + status.ToString(), message, message_capacity);
    return -1;
  }
  const size_t count = encoded->pieces_size();
  for (size_t i = 0; i < count && i < capacity; ++i) {
    const auto piece = encoded->pieces(static_cast<int>(i));
    // Offsets come from the normalizer's alignment; clamp them so that a surprise can never
    // index outside `text` downstream.
    const uint32_t end = std::min<uint32_t>(piece.end(), static_cast<uint32_t>(size));
    const uint32_t begin = std::min<uint32_t>(piece.begin(), end);
    tokens[i] = DflashSpmToken{static_cast<int32_t>(piece.id()), begin, end};
  }
  if (size <= kRetainedTextBytes) KeepSpare(ModelOf(model), std::move(encoded));
  return static_cast<int64_t>(count);
}

int64_t dflash_spm_decode(const void* model, const int32_t* ids, size_t count, char* text,
                          size_t capacity, char* message, size_t message_capacity) {
  const auto& processor = Processor(model);
  std::vector<int> pieces(ids, ids + count);
  for (const int id : pieces) {
    if (id < 0 || id >= processor.GetPieceSize()) {
      WriteMessage("sentencepiece decode: id " + std::to_string(id) + " is out of range", message,
                   message_capacity);
      return -1;
    }
  }
  std::string decoded;
  const sentencepiece::util::Status status = processor.Decode(pieces, &decoded);
  if (!status.ok()) {
    WriteMessage("sentencepiece decode failed: " + status.ToString(), message, message_capacity);
    return -1;
  }
  if (decoded.size() <= capacity) std::memcpy(text, decoded.data(), decoded.size());
  return static_cast<int64_t>(decoded.size());
}

}  // extern "C"
