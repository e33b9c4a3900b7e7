#include "server/config/yaml_fields.h"

#include <algorithm>
#include <climits>
#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflash::serving {
namespace {

// The parent of a key path: "a.b" -> "a", "a[0]" -> "a", "a" -> "".
absl::string_view ParentPath(absl::string_view path) {
  const size_t cut = path.find_last_of(".[");
  return cut == absl::string_view::npos ? absl::string_view() : path.substr(0, cut);
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string Quoted(absl::string_view text) {
  constexpr size_t kMax = 60;
  if (text.size() > kMax) return absl::StrCat("'", text.substr(0, kMax - 3), "...'");
  return absl::StrCat("'", text, "'");
}

// "'abc'" for a scalar, "a list" / "a map" otherwise: what the file holds, for "got ..." messages.
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return Quoted(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing";
  }
}

// The scalar's text, or an error saying what was expected instead.
absl::StatusOr<std::string> ScalarText(const YamlValue& value, absl::string_view expected,
                                       const YamlLocations& locations) {
  if (value.node.IsScalar()) return value.node.Scalar();
  return locations.Error(value.path,
                         absl::StrCat("expected ", expected, ", got ", Describe(value.node)));
}

}  // namespace

std::string ChildPath(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

std::string ElementPath(absl::string_view parent, size_t index) {
  return absl::StrCat(parent, "[", index, "]");
}

std::optional<absl::string_view> ClosestMatch(absl::string_view word,
                                              absl::Span<const absl::string_view> candidates) {
  const std::string lower_word = absl::AsciiStrToLower(word);
  std::optional<absl::string_view> best;
  size_t best_distance = 0;
  for (absl::string_view candidate : candidates) {
    const size_t distance = EditDistance(lower_word, absl::AsciiStrToLower(candidate));
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  // About one typo per three characters; never a suggestion that shares nothing with the word.
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  if (!best || best_distance > limit || best_distance >= word.size()) return std::nullopt;
  return best;
}

void YamlLocations::SetOverride(const std::string& path, std::string text) {
  overrides_[path] = std::move(text);
}

void YamlLocations::Record(const std::string& path, const YAML::Mark& mark) {
  if (mark.is_null() || OverrideFor(path) != nullptr) return;
  marks_.emplace(path, mark);
}

bool YamlLocations::IsOverridden(absl::string_view path) const {
  return OverrideFor(path) != nullptr;
}

const std::string* YamlLocations::OverrideFor(absl::string_view path) const {
  for (absl::string_view prefix = path;; prefix = ParentPath(prefix)) {
    if (const auto it = overrides_.find(prefix); it != overrides_.end()) return &it->second;
    if (prefix.empty()) return nullptr;
  }
}

std::string YamlLocations::FileLocation(const YAML::Mark& mark) const {
  // yaml-cpp counts lines and columns from 0; editors count from 1.
  return absl::StrCat(source_name_, ":", mark.line + 1, ":", mark.column + 1);
}

std::string YamlLocations::Where(absl::string_view path) const {
  for (absl::string_view prefix = path;; prefix = ParentPath(prefix)) {
    if (const auto it = overrides_.find(prefix); it != overrides_.end()) {
      return absl::StrCat("override '", it->second, "'");
    }
    if (const auto it = marks_.find(prefix); it != marks_.end()) return FileLocation(it->second);
    if (prefix.empty()) return source_name_;
  }
}

absl::Status YamlLocations::Error(absl::string_view path, absl::string_view problem) const {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(Where(path), ": ", problem));
  return absl::InvalidArgumentError(absl::StrCat(Where(path), ": ", path, ": ", problem));
}

absl::Status YamlLocations::ErrorAt(const YAML::Mark& mark, absl::string_view path,
                                    absl::string_view problem) const {
  if (mark.is_null() || OverrideFor(path) != nullptr) return Error(path, problem);
  return absl::InvalidArgumentError(absl::StrCat(FileLocation(mark), ": ", path, ": ", problem));
}

absl::StatusOr<YAML::Node> ParseYamlDocument(absl::string_view text, absl::string_view source) {
  try {
    std::vector<YAML::Node> documents = YAML::LoadAll(std::string(text));
    if (documents.empty()) return YAML::Node();
    if (documents.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": holds ", documents.size(),
                       " YAML documents (separated by '---'); put the whole configuration in one"));
    }
    return documents.front();
  } catch (const YAML::Exception& error) {
    if (error.mark.is_null()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": invalid YAML: ", error.msg));
    }
    return absl::InvalidArgumentError(absl::StrCat(source, ":", error.mark.line + 1, ":",
                                                   error.mark.column + 1,
                                                   ": invalid YAML: ", error.msg));
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat(source, ": reading YAML failed: ", error.what()));
  }
}

absl::StatusOr<std::string> ReadString(const YamlValue& value, const YamlLocations& locations) {
  return ScalarText(value, "a string", locations);
}

absl::StatusOr<int64_t> ReadInt64(const YamlValue& value, const YamlLocations& locations) {
  absl::StatusOr<std::string> text = ScalarText(value, "an integer", locations);
  if (!text.ok()) return text.status();
  absl::string_view digits = *text;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
  const bool digits_only = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
  int64_t number = 0;
  if (!digits_only || !absl::SimpleAtoi(*text, &number)) {
    return locations.Error(value.path, absl::StrCat("expected an integer, got ", Quoted(*text),
                                                    digits_only ? " (out of range)" : ""));
  }
  return number;
}

absl::StatusOr<int> ReadInt(const YamlValue& value, const YamlLocations& locations) {
  absl::StatusOr<int64_t> number = ReadInt64(value, locations);
  if (!number.ok()) return number.status();
  if (*number < INT_MIN || *number > INT_MAX) {
    return locations.Error(value.path, absl::StrCat("expected an integer from ", INT_MIN, " to ",
                                                    INT_MAX, ", got ", *number));
  }
  return static_cast<int>(*number);
}

absl::StatusOr<bool> ReadBool(const YamlValue& value, const YamlLocations& locations) {
  absl::StatusOr<std::string> text = ScalarText(value, "true or false", locations);
  if (!text.ok()) return text.status();
  const std::string lower = absl::AsciiStrToLower(*text);
  if (lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "no" || lower == "off") return false;
  return locations.Error(value.path, absl::StrCat("expected true or false, got ", Quoted(*text)));
}

absl::StatusOr<absl::Duration> ReadDuration(const YamlValue& value,
                                            const YamlLocations& locations) {
  absl::StatusOr<std::string> text = ScalarText(value, "a duration such as '30s'", locations);
  if (!text.ok()) return text.status();
  absl::Duration duration;
  if (!absl::ParseDuration(*text, &duration)) {
    double unused;
    const bool bare_number = absl::SimpleAtod(*text, &unused);
    return locations.Error(
        value.path,
        absl::StrCat("expected a duration such as '250ms' or '30s', got ", Quoted(*text),
                     bare_number ? " (a unit is required: ns, us, ms, s, m or h)" : ""));
  }
  if (duration == absl::InfiniteDuration() || duration == -absl::InfiniteDuration()) {
    return locations.Error(value.path, "must be a finite duration such as '30s'");
  }
  return duration;
}

absl::StatusOr<int> ReadByteSize(const YamlValue& value, const YamlLocations& locations) {
  absl::StatusOr<std::string> text =
      ScalarText(value, "a size such as 16MiB or a byte count", locations);
  if (!text.ok()) return text.status();
  absl::string_view rest = absl::StripAsciiWhitespace(*text);
  int64_t scale = 1;
  for (const auto& [suffix, factor] :
       {std::pair<absl::string_view, int64_t>{"KiB", int64_t{1} << 10},
        {"MiB", int64_t{1} << 20},
        {"GiB", int64_t{1} << 30}}) {
    if (absl::EndsWith(rest, suffix)) {
      scale = factor;
      rest = absl::StripTrailingAsciiWhitespace(rest.substr(0, rest.size() - suffix.size()));
      break;
    }
  }
  int64_t count = 0;
  const bool digits_only = !rest.empty() && std::all_of(rest.begin(), rest.end(), [](char c) {
    return absl::ascii_isdigit(c);
  });
  if (!digits_only || !absl::SimpleAtoi(rest, &count)) {
    return locations.Error(value.path,
                           absl::StrCat("expected a byte count or a size with a KiB, MiB or GiB "
                                        "suffix (e.g. 16MiB), got ",
                                        Quoted(*text)));
  }
  if (count > INT_MAX / scale) {
    return locations.Error(value.path, absl::StrCat(Quoted(*text), " is too large: the limit is ",
                                                    INT_MAX, " bytes (2 GiB - 1)"));
  }
  return static_cast<int>(count * scale);
}

absl::StatusOr<size_t> ReadChoiceIndex(const YamlValue& value,
                                       absl::Span<const absl::string_view> names,
                                       const YamlLocations& locations) {
  const std::string expected = absl::StrCat("one of ", absl::StrJoin(names, ", "));
  absl::StatusOr<std::string> text = ScalarText(value, expected, locations);
  if (!text.ok()) return text.status();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == *text) return i;
  }
  std::string problem = absl::StrCat("expected ", expected, ", got ", Quoted(*text));
  if (const std::optional<absl::string_view> match = ClosestMatch(*text, names)) {
    absl::StrAppend(&problem, "; did you mean '", *match, "'?");
  }
  return locations.Error(value.path, problem);
}

absl::StatusOr<std::vector<YamlValue>> ReadList(const YamlValue& value,
                                                const YamlLocations& locations) {
  std::vector<YamlValue> items;
  if (value.node.IsNull()) return items;
  if (value.node.IsScalar()) {
    items.push_back(value);
    return items;
  }
  if (!value.node.IsSequence()) {
    return locations.Error(
        value.path, absl::StrCat("expected a list or a single value, got ", Describe(value.node)));
  }
  size_t index = 0;
  for (const YAML::Node& element : value.node) {
    items.push_back(YamlValue{element, ElementPath(value.path, index++)});
  }
  return items;
}

absl::StatusOr<YamlMap> YamlMap::Open(const YamlValue& value,
                                      absl::Span<const absl::string_view> keys,
                                      YamlLocations& locations,
                                      absl::Span<const YamlSection> sections) {
  YamlMap map(value.path, &locations);
  if (value.node.IsNull()) return map;
  if (!value.node.IsMap()) {
    return locations.Error(
        value.path, absl::StrCat("expected a map of 'key: value' entries (keys: ",
                                 absl::StrJoin(keys, ", "), "), got ", Describe(value.node)));
  }
  for (const auto& entry : value.node) {
    const YAML::Node& key_node = entry.first;
    if (!key_node.IsScalar()) {
      return locations.ErrorAt(key_node.Mark(), value.path,
                               "keys must be plain names, not lists or maps");
    }
    const std::string& key = key_node.Scalar();
    const std::string path = ChildPath(value.path, key);
    // yaml-cpp keeps every duplicate and lookups see only the first, so a repeated key would
    // silently lose its second value.
    for (const auto& seen : map.entries_) {
      if (seen.first == key) {
        return locations.ErrorAt(key_node.Mark(), path,
                                 absl::StrCat("duplicate key '", key, "' (first at ",
                                              locations.Where(path), "); keep only one"));
      }
    }
    locations.Record(path, key_node.Mark());
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      std::string problem = absl::StrCat("unknown key '", key, "'");
      if (const std::optional<absl::string_view> match = ClosestMatch(key, keys)) {
        absl::StrAppend(&problem, "; did you mean '", *match, "'?");
      } else {
        const auto section = std::find_if(sections.begin(), sections.end(), [&](const auto& s) {
          return std::find(s.keys.begin(), s.keys.end(), key) != s.keys.end();
        });
        if (section != sections.end()) {
          absl::StrAppend(&problem, "; it belongs under '", section->name, ":' (",
                          ChildPath(ChildPath(value.path, section->name), key), ")");
        } else {
          absl::StrAppend(&problem, "; valid keys here: ", absl::StrJoin(keys, ", "));
        }
      }
      return locations.Error(path, problem);
    }
    map.entries_.emplace_back(key, entry.second);
  }
  return map;
}

bool YamlMap::Contains(absl::string_view key) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const auto& entry) { return entry.first == key; });
}

std::optional<YamlValue> YamlMap::Find(absl::string_view key) const {
  for (const auto& [name, node] : entries_) {
    if (name == key) {
      if (node.IsNull()) return std::nullopt;
      return YamlValue{node, ChildPath(path_, key)};
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::string> YamlMap::String(absl::string_view key,
                                            absl::string_view fallback) const {
  const std::optional<YamlValue> value = Find(key);
  if (!value) return std::string(fallback);
  return ReadString(*value, *locations_);
}

absl::StatusOr<int> YamlMap::Int(absl::string_view key, int fallback) const {
  const std::optional<YamlValue> value = Find(key);
  if (!value) return fallback;
  return ReadInt(*value, *locations_);
}

absl::StatusOr<int64_t> YamlMap::Int64(absl::string_view key, int64_t fallback) const {
  const std::optional<YamlValue> value = Find(key);
  if (!value) return fallback;
  return ReadInt64(*value, *locations_);
}

absl::StatusOr<bool> YamlMap::Bool(absl::string_view key, bool fallback) const {
  const std::optional<YamlValue> value = Find(key);
  if (!value) return fallback;
  return ReadBool(*value, *locations_);
}

absl::StatusOr<absl::Duration> YamlMap::Duration(absl::string_view key,
                                                 absl::Duration fallback) const {
  const std::optional<YamlValue> value = Find(key);
  if (!value) return fallback;
  return ReadDuration(*value, *locations_);
}

absl::StatusOr<int> YamlMap::ByteSize(absl::string_view key, int fallback) const {
  const std::optional<YamlValue> value = Find(key);
  if (!value) return fallback;
  return ReadByteSize(*value, *locations_);
}

absl::StatusOr<std::vector<YamlValue>> YamlMap::List(absl::string_view key) const {
  const std::optional<YamlValue> value = Find(key);
  if (!value) return std::vector<YamlValue>();
  absl::StatusOr<std::vector<YamlValue>> items = ReadList(*value, *locations_);
  if (!items.ok()) return items.status();
  for (const YamlValue& item : *items) locations_->Record(item.path, item.node.Mark());
  return items;
}

absl::StatusOr<YamlMap> YamlMap::Map(absl::string_view key,
                                     absl::Span<const absl::string_view> keys,
                                     absl::Span<const YamlSection> sections) const {
  const std::optional<YamlValue> value = Find(key);
  if (!value) return YamlMap(ChildPath(path_, key), locations_);
  return Open(*value, keys, *locations_, sections);
}

}  // namespace dflash::serving
