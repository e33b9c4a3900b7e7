#include "server/tokenizer/tokenizer_json/json_node.h"

#include "absl/strings/str_cat.h"
#include "common/json_document.h"

namespace dflash::tokenizer_json {
namespace {

const nlohmann::json& NullJson() {
  static const nlohmann::json* const null = new nlohmann::json();
  return *null;
}

std::string Where(const std::string& path) { return path.empty() ? "(document root)" : path; }

}  // namespace

JsonNode JsonNode::Member(absl::string_view key) const {
  const std::string path = path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  if (!value_->is_object()) return JsonNode(NullJson(), path);
  const auto it = value_->find(std::string(key));
  if (it == value_->end()) return JsonNode(NullJson(), path);
  return JsonNode(*it, path);
}

bool JsonNode::HasMember(absl::string_view key) const {
  return value_->is_object() && value_->contains(std::string(key));
}

JsonNode JsonNode::Element(size_t index) const {
  return JsonNode((*value_)[index], absl::StrCat(path_, "[", index, "]"));
}

absl::Status JsonNode::ExpectObject() const {
  if (value_->is_object()) return absl::OkStatus();
  return Invalid(absl::StrCat("expected an object, got ", JsonExcerpt(*value_)));
}

absl::Status JsonNode::ExpectArray() const {
  if (value_->is_array()) return absl::OkStatus();
  return Invalid(absl::StrCat("expected an array, got ", JsonExcerpt(*value_)));
}

absl::StatusOr<std::string> JsonNode::String() const {
  if (value_->is_string()) return value_->get<std::string>();
  return Invalid(absl::StrCat("expected a string, got ", JsonExcerpt(*value_)));
}

absl::StatusOr<bool> JsonNode::Bool() const {
  if (value_->is_boolean()) return value_->get<bool>();
  return Invalid(absl::StrCat("expected true or false, got ", JsonExcerpt(*value_)));
}

absl::StatusOr<bool> JsonNode::OptionalBool(bool fallback) const {
  if (value_->is_null()) return fallback;
  return Bool();
}

absl::StatusOr<double> JsonNode::Number() const {
  if (value_->is_number()) return value_->get<double>();
  return Invalid(absl::StrCat("expected a number, got ", JsonExcerpt(*value_)));
}

absl::StatusOr<int64_t> JsonNode::Index(int64_t max) const {
  if (value_->is_number_unsigned()) {
    const uint64_t value = value_->get<uint64_t>();
    if (value <= static_cast<uint64_t>(max)) return static_cast<int64_t>(value);
  } else if (value_->is_number_integer() && value_->get<int64_t>() >= 0 &&
             value_->get<int64_t>() <= max) {
    return value_->get<int64_t>();
  }
  return Invalid(absl::StrCat("expected an integer in [0, ", max, "], got ", JsonExcerpt(*value_)));
}

absl::StatusOr<std::string> JsonNode::Type() const {
  if (!value_->is_object()) {
    return Invalid(absl::StrCat("expected an object with a \"type\", got ", JsonExcerpt(*value_)));
  }
  return Member("type").String();
}

absl::Status JsonNode::Invalid(absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", Where(path_), ": ", problem));
}

absl::Status JsonNode::Unsupported(absl::string_view problem) const {
  return absl::FailedPreconditionError(
      absl::StrCat("tokenizer.json: ", Where(path_), ": ", problem,
                   " (supported: what DeBERTa-v2/v3 and mDeBERTa tokenizer.json files use; "
                   "docs/deberta.md#tokenizerjson)"));
}

}  // namespace dflash::tokenizer_json
