// The "post_processor" of tokenizer.json: TemplateProcessing (single and pair templates of
// SpecialToken and Sequence pieces with their type ids, and the special_tokens table that maps
// each special token to its ids), or null for none. Any other type is refused at load with its
// JSON path. The result is the EncodingTemplate the tokenizer assembles encodings with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/encoding_template.h"
#include "server/tokenizer/tokenizer_json/json_node.h"

namespace dflash::tokenizer_json {

// Reads the post_processor at `node` (null: none). Ids must be below `max_id`.
absl::StatusOr<EncodingTemplate> ParseTemplateProcessing(const JsonNode& node, int64_t max_id);

}  // namespace dflash::tokenizer_json
