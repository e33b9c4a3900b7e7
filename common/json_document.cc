#include "common/json_document.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dflash {
namespace {

// Rejects nesting deeper than a bound and duplicate object keys (which nlohmann::json would
// otherwise resolve silently by keeping the last), stopping at the first problem. Syntax errors
// stop it too; the building pass then reports them.
class StructureChecker : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit StructureChecker(int max_depth) : max_depth_(max_depth) {}
  const std::string& error() const { return error_; }

  bool null() override { return true; }
  bool boolean(bool /*value*/) override { return true; }
  bool number_integer(number_integer_t /*value*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*value*/) override { return true; }
  bool number_float(number_float_t /*value*/, const string_t& /*text*/) override { return true; }
  bool string(string_t& /*value*/) override { return true; }
  bool binary(binary_t& /*value*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override {
    if (!Enter()) return false;
    keys_.emplace_back();
    is_object_.push_back(true);
    return true;
  }
  bool key(string_t& key) override {
    if (!keys_.empty() && !keys_.back().insert(key).second) {
      error_ = absl::StrCat("duplicate key \"", key, "\"");
      return false;
    }
    return true;
  }
  bool end_object() override { return Leave(); }
  bool start_array(std::size_t /*elements*/) override {
    if (!Enter()) return false;
    is_object_.push_back(false);
    return true;
  }
  bool end_array() override { return Leave(); }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  bool Enter() {
    if (static_cast<int>(is_object_.size()) >= max_depth_) {
      error_ = absl::StrCat("nesting deeper than ", max_depth_, " levels");
      return false;
    }
    return true;
  }
  bool Leave() {
    if (!is_object_.empty()) {
      if (is_object_.back()) keys_.pop_back();
      is_object_.pop_back();
    }
    return true;
  }

  int max_depth_;
  std::vector<std::set<std::string>> keys_;  // One key set per open object.
  std::vector<bool> is_object_;              // Per open container.
  std::string error_;
};

std::pair<int, int> LineAndColumn(absl::string_view text, size_t byte) {
  byte = std::min(byte, text.size());
  int line = 1;
  int column = 1;
  for (size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonDocument(absl::string_view text, absl::string_view source,
                                                 int max_depth) {
  // The structure is checked in a first pass without building anything; the second pass builds
  // the document with nlohmann's plain parser. (Its callback parser scans the enclosing container
  // at the end of every object, which is quadratic for a long array of objects.)
  StructureChecker checker(max_depth);
  nlohmann::json::sax_parse(text.begin(), text.end(), &checker,
                            nlohmann::json::input_format_t::json, /*strict=*/true,
                            /*ignore_comments=*/false);
  if (!checker.error().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON: ", checker.error()));
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                                 /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::parse_error& error) {
    const auto [line, column] = LineAndColumn(text, error.byte > 0 ? error.byte - 1 : 0);
    std::string what = error.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line..";
    // keep only the human part after the last ": ".
    const size_t cut = what.rfind(": ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", line, ":", column, ": invalid JSON: ", what));
  } catch (const nlohmann::json::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON: ", error.what()));
  }
}

const nlohmann::json* JsonFields::Find(absl::string_view key) const {
  if (!object_.is_object()) return nullptr;
  const auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::Has(absl::string_view key) const { return Find(key) != nullptr; }

absl::Status JsonFields::FieldError(absl::string_view key, absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(source_, ": field '", key, "' ", problem));
}

absl::StatusOr<int64_t> JsonFields::Int(absl::string_view key, int64_t fallback) const {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return fallback;
  // nlohmann's is_number_integer() is also true for unsigned values, so unsigned comes first:
  // 2^63 and above must be an error, not wrap to a negative int64.
  if (value->is_number_unsigned()) {
    const uint64_t unsigned_value = value->get<uint64_t>();
    if (unsigned_value <= static_cast<uint64_t>(INT64_MAX)) {
      return static_cast<int64_t>(unsigned_value);
    }
  } else if (value->is_number_integer()) {
    return value->get<int64_t>();
  }
  return FieldError(key, absl::StrCat("must be an integer, got ", JsonExcerpt(*value)));
}

absl::StatusOr<double> JsonFields::Number(absl::string_view key, double fallback) const {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return fallback;
  if (value->is_number()) return value->get<double>();
  return FieldError(key, absl::StrCat("must be a number, got ", JsonExcerpt(*value)));
}

absl::StatusOr<bool> JsonFields::Bool(absl::string_view key, bool fallback) const {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return fallback;
  if (value->is_boolean()) return value->get<bool>();
  return FieldError(key, absl::StrCat("must be true or false, got ", JsonExcerpt(*value)));
}

absl::StatusOr<std::string> JsonFields::String(absl::string_view key,
                                               absl::string_view fallback) const {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return std::string(fallback);
  if (value->is_string()) return value->get<std::string>();
  return FieldError(key, absl::StrCat("must be a string, got ", JsonExcerpt(*value)));
}

absl::StatusOr<std::vector<std::string>> JsonFields::StringList(absl::string_view key,
                                                                char separator) const {
  const nlohmann::json* value = Find(key);
  std::vector<std::string> items;
  if (value == nullptr) return items;
  if (value->is_string()) {
    for (absl::string_view part : absl::StrSplit(value->get_ref<const std::string&>(), separator)) {
      part = absl::StripAsciiWhitespace(part);
      if (!part.empty()) items.emplace_back(part);
    }
    return items;
  }
  if (value->is_array()) {
    for (const nlohmann::json& item : *value) {
      if (!item.is_string()) {
        return FieldError(key, absl::StrCat("must list strings, got ", JsonExcerpt(item)));
      }
      items.emplace_back(absl::StripAsciiWhitespace(item.get_ref<const std::string&>()));
    }
    return items;
  }
  return FieldError(key, absl::StrCat("must be a list of strings or a '", std::string(1, separator),
                                      "'-separated string, got ", JsonExcerpt(*value)));
}

std::string JsonExcerpt(const nlohmann::json& value) {
  std::string text =
      value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  constexpr size_t kMax = 60;
  if (text.size() > kMax) text = absl::StrCat(text.substr(0, kMax - 3), "...");
  return text;
}

}  // namespace dflash
