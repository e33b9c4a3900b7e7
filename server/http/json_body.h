// The JSON body of a request: parsed strictly (ParseJsonDocument: no duplicate keys, bounded
// nesting) and read through typed accessors whose errors name the field, as the pipeline's do.
#pragma once

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
