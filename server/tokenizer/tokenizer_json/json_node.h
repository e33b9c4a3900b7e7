// Reading tokenizer.json: a JSON value together with its path in the document
// ("normalizer.normalizers[2].pattern.Regex"), so that every load error says where in the file
// the problem is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash::tokenizer_json {

class JsonNode {
 public:
  // `value` must outlive the node and every node derived from it.
  JsonNode(const nlohmann::json& value, std::string path)
      : value_(&value), path_(std::move(path)) {}

  const nlohmann::json& value() const { return *value_; }
  const std::string& path() const { return path_; }
  bool IsNull() const { return value_->is_null(); }

  // Member `key` of an object; a missing member (or a non-object) reads as JSON null.
  JsonNode Member(absl::string_view key) const;
  bool HasMember(absl::string_view key) const;
  // Element `index` of an array (index < Size()).
  JsonNode Element(size_t index) const;
  // Elements of an array or members of an object; 0 for anything else.
  size_t Size() const { return value_->size(); }

  absl::Status ExpectObject() const;
  absl::Status ExpectArray() const;
  absl::StatusOr<std::string> String() const;
  absl::StatusOr<bool> Bool() const;
  // A missing member or null reads as `fallback`.
  absl::StatusOr<bool> OptionalBool(bool fallback) const;
  absl::StatusOr<double> Number() const;
  // A non-negative integer no larger than `max`.
  absl::StatusOr<int64_t> Index(int64_t max) const;
  // The "type" member of a component object.
  absl::StatusOr<std::string> Type() const;

  // INVALID_ARGUMENT "tokenizer.json: <path>: <problem>": the file is malformed.
  absl::Status Invalid(absl::string_view problem) const;
  // FAILED_PRECONDITION naming the path: a well-formed component this server does not implement.
  absl::Status Unsupported(absl::string_view problem) const;

 private:
  const nlohmann::json* value_;
  std::string path_;
};

}  // namespace dflash::tokenizer_json
