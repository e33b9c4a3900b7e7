// Strict JSON for checkpoint and tokenizer files. Errors name the file and the position or field;
// duplicate object keys and pathological nesting are rejected; no exception leaves this module.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash {

// Parses `text`. `source` (usually a file name) prefixes every error message.
absl::StatusOr<nlohmann::json> ParseJsonDocument(absl::string_view text, absl::string_view source,
                                                 int max_depth = 32);

// Typed, defaulted access to the fields of one JSON object. A missing key or a JSON null yields
// the fallback; a present value of the wrong type yields INVALID_ARGUMENT naming source and key.
class JsonFields {
 public:
  // `object` must outlive this reader.
  JsonFields(const nlohmann::json& object, absl::string_view source)
      : object_(object), source_(source) {}

  bool Has(absl::string_view key) const;
  absl::StatusOr<int64_t> Int(absl::string_view key, int64_t fallback) const;
  absl::StatusOr<double> Number(absl::string_view key, double fallback) const;
  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const;
  absl::StatusOr<std::string> String(absl::string_view key, absl::string_view fallback) const;
  // A list of strings, or a single string split on `separator` (HF writes both forms).
  absl::StatusOr<std::vector<std::string>> StringList(absl::string_view key, char separator) const;

  // "<source>: field '<key>' <problem>" as INVALID_ARGUMENT.
  absl::Status FieldError(absl::string_view key, absl::string_view problem) const;

 private:
  const nlohmann::json* Find(absl::string_view key) const;

  const nlohmann::json& object_;
  std::string source_;
};

// A short rendering of a JSON value for error messages (at most ~60 characters).
std::string JsonExcerpt(const nlohmann::json& value);

}  // namespace dflash
