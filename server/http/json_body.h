// The JSON body of a request: parsed strictly (ParseJsonDocument: no duplicate keys, bounded
// nesting) and read through typed accessors whose errors name the field, as the pipeline's do.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash::http {

// The body as a JSON object; a body that is not one is MalformedBody (400).
absl::StatusOr<nlohmann::json> ParseJsonBody(absl::string_view body);

// A list of strings, or one string. `batch` tells which was sent.
struct TextList {
  std::vector<std::string> texts;
  bool batch = false;
};

// Field `key` of `object` as a string or a list of strings; INVALID_ARGUMENT naming the field
// (and the element) otherwise, EmptyInput for an empty list. Required: missing is an error.
absl::StatusOr<TextList> ReadTextList(const nlohmann::json& object, absl::string_view key);
// Inputs that may be texts or token-id lists, as TEI's /embed and OpenAI's /v1/embeddings take
// them: a string, a list of token ids (one input), or a list whose elements are strings or lists
// of token ids. An id input's entry in `texts` is "".
struct InputList {
  std::vector<std::string> texts;
  // Empty when every input is a text; else one element per input, set for the id inputs.
  std::vector<std::optional<std::vector<int32_t>>> token_ids;
  bool batch = false;
};

// Field `key` of `object` as an InputList. A token id is an integer in [-2^31, 2^31) (whether it
// is in the model's vocabulary is the tokenizer's check); anything else is INVALID_ARGUMENT naming
// the element; an empty list (of inputs or of ids) is EmptyInput.
absl::StatusOr<InputList> ReadInputList(const nlohmann::json& object, absl::string_view key);
// A token-id list: `value` (named `field` in errors) must be a non-empty list of integers in
// [-2^31, 2^31).
absl::StatusOr<std::vector<int32_t>> ReadTokenIds(const nlohmann::json& value,
                                                  absl::string_view field);
// A required list of strings (non-empty).
absl::StatusOr<std::vector<std::string>> ReadStringArray(const nlohmann::json& object,
                                                         absl::string_view key);
// A required string.
absl::StatusOr<std::string> ReadRequiredString(const nlohmann::json& object, absl::string_view key);
// An optional bool / non-negative integer / string (null counts as absent).
absl::StatusOr<std::optional<bool>> ReadOptionalBool(const nlohmann::json& object,
                                                     absl::string_view key);
absl::StatusOr<std::optional<uint32_t>> ReadOptionalCount(const nlohmann::json& object,
                                                          absl::string_view key);
absl::StatusOr<std::optional<std::string>> ReadOptionalString(const nlohmann::json& object,
                                                              absl::string_view key);

// INVALID_ARGUMENT "<key>: <problem>".
absl::Status FieldError(absl::string_view key, absl::string_view problem);

}  // namespace dflash::http
