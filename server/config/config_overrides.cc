#include "server/config/config_overrides.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace dflash::serving {
namespace {

absl::Status OverrideError(absl::string_view text, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("override '", text, "': ", problem));
}

// The `name:` of a list entry, when it is a map with a scalar name.
std::optional<std::string> EntryName(const YAML::Node& entry) {
  if (!entry.IsMap()) return std::nullopt;
  for (const auto& field : entry) {
    if (field.first.IsScalar() && field.first.Scalar() == "name" && field.second.IsScalar()) {
      return field.second.Scalar();
    }
  }
  return std::nullopt;
}

bool HasKey(const YAML::Node& map, absl::string_view key) {
  if (!map.IsMap()) return false;
  for (const auto& field : map) {
    if (field.first.IsScalar() && field.first.Scalar() == key) return true;
  }
  return false;
}

// `value` wrapped in one map per segment: {a: {b: value}} for segments {a, b}.
YAML::Node NestUnder(absl::Span<const std::string> segments, const YAML::Node& value) {
  YAML::Node nested = value;
  for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
    YAML::Node map(YAML::NodeType::Map);
    map[*it] = nested;
    nested.reset(map);
  }
  return nested;
}

absl::StatusOr<YAML::Node> ParseOverrideValue(absl::string_view text, absl::string_view value) {
  // A command line has no use for YAML's "no value" (leaving the override out says that): "key="
  // is the empty string (e.g. to disable metrics_listen) and "key=null" the word (backend=null).
  const absl::string_view stripped = absl::StripAsciiWhitespace(value);
  if (stripped.empty()) return YAML::Node(std::string());
  if (stripped == "~" || stripped == "null" || stripped == "Null" || stripped == "NULL") {
    return YAML::Node(std::string(stripped));
  }
  try {
    return YAML::Load(std::string(value));
  } catch (const YAML::Exception& error) {
    return OverrideError(text, absl::StrCat("the value is not valid YAML: ", error.msg));
  }
}

// Whether a value set at `path` can contain server.auth.api_keys (the path is it, under it, or one
// of the maps above it).
bool MayHoldApiKeys(absl::string_view path) {
  constexpr absl::string_view kApiKeys = "server.auth.api_keys";
  const auto contains = [](absl::string_view outer, absl::string_view inner) {
    return absl::StartsWith(inner, outer) &&
           (inner.size() == outer.size() || inner[outer.size()] == '.');
  };
  return contains(path, kApiKeys) || contains(kApiKeys, path);
}

// Applies one override whose path has been split into `segments`. `text` is the override as error
// messages show it.
absl::Status ApplyOverride(YAML::Node& root, const std::string& text,
                           const std::vector<std::string>& segments, const YAML::Node& value,
                           YamlLocations& locations) {
  if (root.IsNull()) root.reset(YAML::Node(YAML::NodeType::Map));
  // yaml-cpp's `node = other` writes through to the node's place in the tree, so the walk moves
  // with reset() and only the final assignment uses operator=.
  YAML::Node current = root;
  std::string path;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& segment = segments[i];
    if (current.IsSequence()) {
      const size_t size = current.size();
      size_t index = 0;
      if (absl::SimpleAtoi(segment, &index) &&
          std::all_of(segment.begin(), segment.end(), absl::ascii_isdigit)) {
        if (index > size) {
          return OverrideError(
              text,
              absl::StrCat(path, " has ", size, size == 1 ? " entry" : " entries",
                           ": use an index from 0 to ", size, " (", size, " appends an entry)"));
        }
        if (index == size) {
          current.push_back(NestUnder(absl::MakeConstSpan(segments).subspan(i + 1), value));
          locations.SetOverride(ElementPath(path, index), text);
          return absl::OkStatus();
        }
      } else {
        // Names may contain dots: the longest run of segments naming an entry wins.
        std::optional<size_t> match;
        size_t consumed = 0;
        for (size_t count = segments.size() - i; count >= 1 && !match; --count) {
          const std::string name =
              absl::StrJoin(segments.begin() + static_cast<std::ptrdiff_t>(i),
                            segments.begin() + static_cast<std::ptrdiff_t>(i + count), ".");
          for (size_t j = 0; j < size; ++j) {
            if (EntryName(current[j]) == name) {
              match = j;
              consumed = count;
              break;
            }
          }
        }
        if (!match) {
          std::vector<std::string> names;
          for (size_t j = 0; j < size; ++j) names.push_back(EntryName(current[j]).value_or("?"));
          return OverrideError(
              text, absl::StrCat(path, " has no entry named '", segment,
                                 "': select an entry by index (0 to ", size, ") or by name (",
                                 names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
        }
        index = *match;
        i += consumed - 1;
      }
      path = ElementPath(path, index);
      current.reset(current[index]);
    } else if (current.IsMap() || current.IsNull()) {
      if (!HasKey(current, segment)) {
        current[segment] = NestUnder(absl::MakeConstSpan(segments).subspan(i + 1), value);
        locations.SetOverride(ChildPath(path, segment), text);
        return absl::OkStatus();
      }
      path = ChildPath(path, segment);
      current.reset(current[segment]);
    } else {
      return OverrideError(text, absl::StrCat(path, " is a single value, not a map or a list: ",
                                              "cannot set '", segment, "' under it"));
    }
  }
  current = value;
  locations.SetOverride(path, text);
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyConfigOverrides(YAML::Node& root, absl::Span<const std::string> overrides,
                                  YamlLocations& locations) {
  for (const std::string& text : overrides) {
    const size_t equals = text.find('=');
    const absl::string_view key_path =
        absl::StripAsciiWhitespace(absl::string_view(text).substr(0, equals));
    if (equals == std::string::npos || key_path.empty()) {
      return OverrideError(text, "expected <dotted.path>=<value>, e.g. server.listen=127.0.0.1:0");
    }
    // "models[0].backend" is accepted as a spelling of "models.0.backend".
    const std::string dotted = absl::StrReplaceAll(key_path, {{"[", "."}, {"]", ""}});
    std::vector<std::string> segments = absl::StrSplit(dotted, '.');
    for (std::string& segment : segments) {
      absl::StripAsciiWhitespace(&segment);
      if (segment.empty()) {
        return OverrideError(text, "the path has an empty segment (two dots in a row?)");
      }
    }
    // Error messages quote the override; API keys must not reach a log that way.
    const std::string normalized = absl::StrJoin(segments, ".");
    const std::string label =
        MayHoldApiKeys(normalized) ? absl::StrCat(normalized, "=<hidden>") : text;
    DFLASH_ASSIGN_OR_RETURN(const YAML::Node value,
                            ParseOverrideValue(label, absl::string_view(text).substr(equals + 1)));
    if (!root.IsNull() && !root.IsMap()) {
      return OverrideError(label, "the configuration's top level is not a map");
    }
    try {
      DFLASH_RETURN_IF_ERROR(ApplyOverride(root, label, segments, value, locations));
    } catch (const std::exception& error) {
      return OverrideError(label, absl::StrCat("cannot apply: ", error.what()));
    }
  }
  return absl::OkStatus();
}

}  // namespace dflash::serving
