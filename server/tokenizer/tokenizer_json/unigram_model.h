// The Unigram model of tokenizer.json ("model": {"type": "Unigram", "vocab": [[piece, score],
// ...], "unk_id": n, "byte_fallback": b}) with the semantics of the `tokenizers` library:
// Viterbi over the pieces that prefix each position (scores added as doubles, the earlier
// candidate winning ties), a character no piece covers costs min_score - 10 as the unknown piece,
// consecutive unknown pieces fuse into one, and with byte_fallback an unknown string becomes its
// <0xXX> byte pieces when all of them exist.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/tokenizer/tokenizer_json/json_node.h"

namespace dflash::tokenizer_json {

struct ModelToken {
  int32_t id = 0;
  size_t begin = 0;  // Byte range in the tokenized string.
  size_t end = 0;
};

class UnigramModel {
 public:
  // Reads the model object at `node`; at most `max_pieces` pieces.
  static absl::StatusOr<std::unique_ptr<UnigramModel>> Parse(const JsonNode& node,
                                                             size_t max_pieces);

  // Tokenizes a non-empty pre-tokenized piece. FAILED_PRECONDITION when it needs the unknown
  // piece and the model has none.
  absl::Status Tokenize(absl::string_view piece, std::vector<ModelToken>* out) const;

  // The id of a piece (the last one when a piece repeats), or -1.
  int32_t PieceToId(absl::string_view piece) const;
  // The piece of `id`, or empty.
  absl::string_view IdToPiece(int32_t id) const;
  int32_t piece_count() const { return static_cast<int32_t>(pieces_.size()); }
  int32_t unk_id() const { return unk_id_; }  // -1 when the file has none.

 private:
  UnigramModel() = default;
  // Calls `visit(length, id)` for every piece that is a prefix of text[offset...], shortest
  // first.
  template <typename Visit>
  void ForEachPrefix(absl::string_view text, size_t offset, Visit visit) const;

  std::vector<std::pair<std::string, double>> pieces_;
  absl::flat_hash_map<std::string, int32_t> ids_;
  // Distinct non-empty pieces in byte order, each with the id ids_ gives it.
  std::vector<std::pair<absl::string_view, int32_t>> sorted_;
  size_t longest_piece_ = 0;
  double min_score_ = 0;
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
};

}  // namespace dflash::tokenizer_json
