// The "added_tokens" of tokenizer.json and how `tokenizers` finds them in text: tokens with
// normalized=false are matched in the raw text first, then each remaining part is normalized and
// tokens with normalized=true are matched in it (against their own normalized form); matching is
// leftmost-longest; single_word requires no word character (\w) on either side; lstrip and rstrip
// take the whitespace before or after the token into the match. Ids follow tokenizers: a token
// that is already a model piece keeps the piece's id, the others are numbered after the model's
// vocabulary in file order (the "id" written in the file is not used, as in tokenizers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/tokenizer/tokenizer_json/json_node.h"
#include "server/tokenizer/tokenizer_json/normalizers.h"
#include "server/tokenizer/tokenizer_json/unigram_model.h"

namespace dflash::tokenizer_json {

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  friend bool operator==(const AddedToken&, const AddedToken&) = default;
};

// A part of a text: either an added token (id >= 0) or text for the model.
struct TextSegment {
  AlignedText text;
  int32_t added_token_id = -1;
};

class AddedVocabulary {
 public:
  // Reads the array at `node` (null: none); at most `max_tokens` entries.
  static absl::StatusOr<std::unique_ptr<AddedVocabulary>> Parse(const JsonNode& node,
                                                                const UnigramModel& model,
                                                                const Normalizer* normalizer,
                                                                size_t max_tokens);

  // Cuts the added tokens out of `text` (valid UTF-8) and normalizes the rest.
  std::vector<TextSegment> ExtractAndNormalize(absl::string_view text,
                                               const Normalizer* normalizer) const;

  // The id of an added token, or -1.
  int32_t TokenToId(absl::string_view content) const;
  // The content of added token `id`, or nullptr.
  const std::string* IdToToken(int32_t id) const;
  // Whether `id` is an added token marked "special" (which decoding may skip).
  bool IsSpecial(int32_t id) const;
  // One more than the largest id; 0 when empty.
  int32_t end_id() const { return end_id_; }

 private:
  // Leftmost-longest matcher over one set of patterns.
  class Matcher {
   public:
    void Build(std::vector<std::pair<std::string, int32_t>> patterns);
    bool empty() const { return patterns_.empty(); }
    // The longest pattern starting at `offset`: (length, id), or length 0.
    std::pair<size_t, int32_t> LongestAt(absl::string_view text, size_t offset) const;

   private:
    std::vector<std::pair<std::string, int32_t>> patterns_;  // Sorted by bytes.
    size_t longest_ = 0;
    bool first_byte_[256] = {};
  };

  AddedVocabulary() = default;
  void SplitWithMatcher(const AlignedText& text, const Matcher& matcher,
                        std::vector<TextSegment>* out) const;

  std::map<int32_t, AddedToken> tokens_;  // By id.
  absl::flat_hash_map<std::string, int32_t> ids_;
  Matcher raw_matcher_;         // normalized = false.
  Matcher normalized_matcher_;  // normalized = true, by normalized content.
  int32_t end_id_ = 0;
};

}  // namespace dflash::tokenizer_json
