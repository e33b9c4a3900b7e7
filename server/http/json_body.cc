#include "server/http/json_body.h"

#include "absl/strings/str_cat.h"
#include "common/json_document.h"
#include "common/status_macros.h"
#include "server/http/http_errors.h"

namespace dflash::http {
namespace {

// JSON nesting a request can need: an object holding lists of lists (OpenAI's token arrays,
// TEI's batches of pairs), with room to spare.
constexpr int kMaxDepth = 8;

const nlohmann::json* Find(const nlohmann::json& object, absl::string_view key) {
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return nullptr;
  return &*found;
}

absl::string_view TypeName(const nlohmann::json& value) {
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number()) return "a number";
  if (value.is_array()) return "a list";
  if (value.is_object()) return "an object";
  return "null";
}

}  // namespace

absl::Status FieldError(absl::string_view key, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": ", problem));
}

absl::StatusOr<nlohmann::json> ParseJsonBody(absl::string_view body) {
  if (body.empty()) return MalformedBody("the request has no body; send a JSON object");
  absl::StatusOr<nlohmann::json> parsed = ParseJsonDocument(body, "request body", kMaxDepth);
  if (!parsed.ok()) return MalformedBody(parsed.status().message());
  if (!parsed->is_object()) {
    return MalformedBody(
        absl::StrCat("the request body must be a JSON object, got ", TypeName(*parsed)));
  }
  return parsed;
}

absl::StatusOr<TextList> ReadTextList(const nlohmann::json& object, absl::string_view key) {
  const nlohmann::json* value = Find(object, key);
  if (value == nullptr) return FieldError(key, "is required");
  TextList list;
  if (value->is_string()) {
    list.texts.push_back(value->get<std::string>());
    return list;
  }
  if (!value->is_array()) {
    return FieldError(
        key, absl::StrCat("must be a string or a list of strings, got ", TypeName(*value)));
  }
  if (value->empty()) return EmptyInput(absl::StrCat(key, ": must not be empty"));
  list.batch = true;
  list.texts.reserve(value->size());
  for (size_t i = 0; i < value->size(); ++i) {
    const nlohmann::json& item = (*value)[i];
    if (!item.is_string()) {
      return FieldError(absl::StrCat(key, "[", i, "]"),
                        absl::StrCat("must be a string, got ", TypeName(item)));
    }
    list.texts.push_back(item.get<std::string>());
  }
  return list;
}

absl::StatusOr<std::vector<int32_t>> ReadTokenIds(const nlohmann::json& value,
                                                  absl::string_view field) {
  if (!value.is_array()) {
    return FieldError(field, absl::StrCat("must be a list of token ids, got ", TypeName(value)));
  }
  if (value.empty()) return EmptyInput(absl::StrCat(field, ": the token id list is empty"));
  std::vector<int32_t> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& item = value[i];
    const bool in_range =
        (item.is_number_unsigned() && item.get<uint64_t>() <= uint64_t{INT32_MAX}) ||
        (item.is_number_integer() && !item.is_number_unsigned() &&
         item.get<int64_t>() >= int64_t{INT32_MIN} && item.get<int64_t>() <= int64_t{INT32_MAX});
    if (!in_range) {
      return FieldError(
          absl::StrCat(field, "[", i, "]"),
          absl::StrCat("must be a token id (a 32-bit integer), got ", JsonExcerpt(item)));
    }
    ids.push_back(static_cast<int32_t>(item.get<int64_t>()));
  }
  return ids;
}

absl::StatusOr<InputList> ReadInputList(const nlohmann::json& object, absl::string_view key) {
  const nlohmann::json* value = Find(object, key);
  if (value == nullptr) return FieldError(key, "is required");
  InputList list;
  if (value->is_string()) {
    list.texts.push_back(value->get<std::string>());
    return list;
  }
  if (!value->is_array()) {
    return FieldError(key, absl::StrCat("must be a string or a list of strings and token-id "
                                        "lists, or a list of token ids, got ",
                                        TypeName(*value)));
  }
  if (value->empty()) return EmptyInput(absl::StrCat(key, ": must not be empty"));
  // A list of numbers is one input given as ids.
  if ((*value)[0].is_number()) {
    DFLASH_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ReadTokenIds(*value, key));
    list.texts.emplace_back();
    list.token_ids.emplace_back(std::move(ids));
    return list;
  }
  list.batch = true;
  list.texts.reserve(value->size());
  for (size_t i = 0; i < value->size(); ++i) {
    const nlohmann::json& item = (*value)[i];
    const std::string field = absl::StrCat(key, "[", i, "]");
    if (item.is_string()) {
      list.texts.push_back(item.get<std::string>());
      continue;
    }
    if (!item.is_array()) {
      return FieldError(
          field, absl::StrCat("must be a string or a list of token ids, got ", TypeName(item)));
    }
    DFLASH_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ReadTokenIds(item, field));
    list.texts.emplace_back();
    list.token_ids.resize(value->size());
    list.token_ids[i] = std::move(ids);
  }
  return list;
}

absl::StatusOr<std::vector<std::string>> ReadStringArray(const nlohmann::json& object,
                                                         absl::string_view key) {
  const nlohmann::json* value = Find(object, key);
  if (value == nullptr) return FieldError(key, "is required");
  if (!value->is_array()) {
    return FieldError(key, absl::StrCat("must be a list of strings, got ", TypeName(*value)));
  }
  absl::StatusOr<TextList> list = ReadTextList(object, key);
  if (!list.ok()) return list.status();
  return std::move(list->texts);
}

absl::StatusOr<std::string> ReadRequiredString(const nlohmann::json& object,
                                               absl::string_view key) {
  const nlohmann::json* value = Find(object, key);
  if (value == nullptr) return FieldError(key, "is required");
  if (!value->is_string()) {
    return FieldError(key, absl::StrCat("must be a string, got ", TypeName(*value)));
  }
  return value->get<std::string>();
}

absl::StatusOr<std::optional<bool>> ReadOptionalBool(const nlohmann::json& object,
                                                     absl::string_view key) {
  const nlohmann::json* value = Find(object, key);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) {
    return FieldError(key, absl::StrCat("must be true or false, got ", TypeName(*value)));
  }
  return std::optional<bool>(value->get<bool>());
}

absl::StatusOr<std::optional<uint32_t>> ReadOptionalCount(const nlohmann::json& object,
                                                          absl::string_view key) {
  const nlohmann::json* value = Find(object, key);
  if (value == nullptr) return std::optional<uint32_t>();
  if (value->is_number_unsigned() && value->get<uint64_t>() <= UINT32_MAX) {
    return std::optional<uint32_t>(static_cast<uint32_t>(value->get<uint64_t>()));
  }
  return FieldError(
      key, absl::StrCat("must be a non-negative integer below 2^32, got ", JsonExcerpt(*value)));
}

absl::StatusOr<std::optional<std::string>> ReadOptionalString(const nlohmann::json& object,
                                                              absl::string_view key) {
  const nlohmann::json* value = Find(object, key);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) {
    return FieldError(key, absl::StrCat("must be a string, got ", TypeName(*value)));
  }
  return std::optional<std::string>(value->get<std::string>());
}

}  // namespace dflash::http
