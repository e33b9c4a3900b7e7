// The one door to libsentencepiece, which runs in its own link namespace behind a C interface
// (sentencepiece_shim_api.h explains why: its private protobuf copy clashes with gRPC's).
// Debian's sentencepiece_processor.h (0.1.97) also declares `namespace absl { using
// std::string_view; }`, which clashes with Abseil's own absl::string_view, so this interface uses
// std types only; failures come back as a SentencePieceError and callers turn them into
// absl::Status.
//
// The shim library is found, in order, at $DFLASH_SENTENCEPIECE_SHIM, at
// <executable dir>/../lib/libdflash_sentencepiece_shim.so, and at its build-tree path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dflash {

struct SentencePieceError {
  enum class Kind { kNotFound, kInvalidModel, kEncodeFailed, kDecodeFailed };
  Kind kind = Kind::kInvalidModel;
  std::string message;
};

// One piece of an encoding. [byte_begin, byte_end) is the span of the encoded text that the piece
// covers, as sentencepiece aligns it through its normalizer; a standalone dummy-prefix "▁" covers
// no bytes (byte_begin == byte_end).
struct SentencePieceToken {
  int32_t id = 0;
  uint32_t byte_begin = 0;
  uint32_t byte_end = 0;
};

// A loaded sentencepiece model (spm.model). Immutable after Load, so every const method may be
// called from several threads at once: SentencePieceProcessor::Encode is const and builds its
// normalized text and lattice in locals (tokenizer_sentencepiece_model_test encodes from several
// threads at once and compares with the sequential results).
class SentencePieceModel {
 public:
  // Returns nullptr and fills *error (which must not be null) when the file is missing or is not
  // a sentencepiece model. Messages name the file.
  static std::unique_ptr<SentencePieceModel> Load(const std::filesystem::path& path,
                                                  SentencePieceError* error);
  ~SentencePieceModel();

  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  int piece_count() const;
  // The id of `piece`, or -1 when the model has no such piece (sentencepiece itself answers
  // unk_id for unknown pieces, which would hide the difference).
  int32_t PieceToId(std::string_view piece) const;
  // The piece of `id`; empty for an id outside [0, piece_count()).
  std::string_view IdToPiece(int32_t id) const;
  int32_t unk_id() const;

  // Normalizes and segments `text`, which must be valid UTF-8 shorter than 4 GiB. Offsets are
  // relative to `text`. Returns false and fills *error on failure.
  bool Encode(std::string_view text, std::vector<SentencePieceToken>* tokens,
              SentencePieceError* error) const;

  // The text of `ids` (each in [0, piece_count())), as sentencepiece's decode writes it: pieces
  // joined, "▁" as a space, the leading whitespace dropped, byte pieces reassembled. Returns false
  // and fills *error on failure.
  bool Decode(const std::vector<int32_t>& ids, std::string* text, SentencePieceError* error) const;

 private:
  struct Shim;
  // Loads the shim on first use and keeps it for the life of the process (a link namespace
  // cannot be fully unloaded, and one shim serves every model).
  static const Shim& LoadShim();
  SentencePieceModel(const Shim* shim, void* handle) : shim_(shim), handle_(handle) {}

  const Shim* shim_;  // Process-wide, loaded once, never unloaded.
  void* handle_;      // The model, owned, inside the shim's link namespace.
};

}  // namespace dflash
