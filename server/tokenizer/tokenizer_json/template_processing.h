// The "post_processor" of tokenizer.json: TemplateProcessing (single and pair templates of
// SpecialToken and Sequence pieces with their type ids, and the special_tokens table that maps
// each special token to its ids), or null for none. Any other type is refused at load with its
// JSON path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/tokenizer_json/json_node.h"

namespace dflash::tokenizer_json {

struct TemplatePiece {
  enum class Kind { kSpecial, kFirst, kSecond };
  Kind kind = Kind::kSpecial;
  std::vector<int32_t> ids;  // kSpecial.
  int32_t type_id = 0;
};

struct TemplateProcessing {
  // Without a post-processor: A with type 0, B with type 1, nothing added.
  std::vector<TemplatePiece> single = {{TemplatePiece::Kind::kFirst, {}, 0}};
  std::vector<TemplatePiece> pair = {{TemplatePiece::Kind::kFirst, {}, 0},
                                     {TemplatePiece::Kind::kSecond, {}, 1}};

  // Ids the template adds around one text or a pair.
  int64_t AddedTokens(bool is_pair) const;
  // The first and last special ids of the single template ([CLS] and [SEP]), or -1.
  int32_t FirstSpecialId() const;
  int32_t LastSpecialId() const;
};

// Reads the post_processor at `node` (null: none). Ids must be below `max_id`.
absl::StatusOr<TemplateProcessing> ParseTemplateProcessing(const JsonNode& node, int64_t max_id);

}  // namespace dflash::tokenizer_json
