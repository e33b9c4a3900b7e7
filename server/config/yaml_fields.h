// Strict, typed reading of a YAML configuration tree (yaml-cpp). Every error is INVALID_ARGUMENT
// and names where the value came from (file:line:column, or the command-line override that set
// it), its key path (models[0].batching.max_batch_tokens) and what to write instead. Unknown and
// duplicate keys are errors. No yaml-cpp exception leaves these functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace dflash::serving {

// "parent.key" ("key" at the top level) and "parent[index]": the key paths of error messages.
std::string ChildPath(absl::string_view parent, absl::string_view key);
std::string ElementPath(absl::string_view parent, size_t index);

// The candidate closest to `word` by edit distance when it is close enough to be a likely typo.
std::optional<absl::string_view> ClosestMatch(absl::string_view word,
                                              absl::Span<const absl::string_view> candidates);

// Where each key path of one configuration came from, so that errors found after the tree is read
// (range and cross-field checks on the typed struct) still point at a line.
class YamlLocations {
 public:
  explicit YamlLocations(std::string source_name) : source_name_(std::move(source_name)) {}

  // `path` and everything under it were set by the command-line override `text`.
  void SetOverride(const std::string& path, std::string text);
  // `path` is at `mark` in the source. Ignored for a null mark and under an override (whose nodes
  // carry marks into the override's text, not into the file).
  void Record(const std::string& path, const YAML::Mark& mark);
  bool IsOverridden(absl::string_view path) const;

  // "server.yaml:12:5" or "override 'server.listen=x'" for `path` or its nearest recorded
  // ancestor; the source name alone when there is none.
  std::string Where(absl::string_view path) const;
  // INVALID_ARGUMENT "<Where(path)>: <path>: <problem>".
  absl::Status Error(absl::string_view path, absl::string_view problem) const;
  // As Error, at `mark` (a duplicate key, a list element) unless `path` is under an override.
  absl::Status ErrorAt(const YAML::Mark& mark, absl::string_view path,
                       absl::string_view problem) const;

  const std::string& source_name() const { return source_name_; }

 private:
  std::string FileLocation(const YAML::Mark& mark) const;
  // The override covering `path`, or nullptr.
  const std::string* OverrideFor(absl::string_view path) const;

  std::string source_name_;
  std::map<std::string, std::string, std::less<>> overrides_;
  std::map<std::string, YAML::Mark, std::less<>> marks_;
};

// Parses one YAML document. A syntax error reads "<source>:<line>:<column>: invalid YAML: ...";
// several documents in one text are refused; an empty text is a null node.
absl::StatusOr<YAML::Node> ParseYamlDocument(absl::string_view text, absl::string_view source);

// A node of the tree with its key path.
struct YamlValue {
  YAML::Node node;
  std::string path;
};

// Scalar reads. Quoted and plain scalars are read alike ("8" and 8 are both the integer 8).
absl::StatusOr<std::string> ReadString(const YamlValue& value, const YamlLocations& locations);
absl::StatusOr<int64_t> ReadInt64(const YamlValue& value, const YamlLocations& locations);
absl::StatusOr<int> ReadInt(const YamlValue& value, const YamlLocations& locations);
// true/false (also yes/no, on/off, any case).
absl::StatusOr<bool> ReadBool(const YamlValue& value, const YamlLocations& locations);
// absl::ParseDuration syntax with a unit ("0", "250ms", "30s", "1m30s"); infinity is refused.
absl::StatusOr<absl::Duration> ReadDuration(const YamlValue& value, const YamlLocations& locations);
// An integer count of bytes, or a number with a KiB, MiB or GiB suffix ("16MiB", "64 KiB"); must
// fit in an int.
absl::StatusOr<int> ReadByteSize(const YamlValue& value, const YamlLocations& locations);
// The index in `names` of the scalar's text; an error lists the names and suggests the closest.
absl::StatusOr<size_t> ReadChoiceIndex(const YamlValue& value,
                                       absl::Span<const absl::string_view> names,
                                       const YamlLocations& locations);
// A sequence's elements, or a single scalar as a list of one; null is the empty list.
absl::StatusOr<std::vector<YamlValue>> ReadList(const YamlValue& value,
                                                const YamlLocations& locations);

// `choices` maps the accepted spellings to enum values.
template <typename Enum, size_t N>
absl::StatusOr<Enum> ReadChoice(const YamlValue& value,
                                const std::array<std::pair<absl::string_view, Enum>, N>& choices,
                                const YamlLocations& locations) {
  std::array<absl::string_view, N> names;
  for (size_t i = 0; i < N; ++i) names[i] = choices[i].first;
  absl::StatusOr<size_t> index = ReadChoiceIndex(value, names, locations);
  if (!index.ok()) return index.status();
  return choices[*index].second;
}

// The keys of a section nested one level down, so that a key written at the wrong level gets the
// suggestion "write it under <section>:".
struct YamlSection {
  absl::string_view name;
  absl::Span<const absl::string_view> keys;
};

// The entries of one YAML map, checked when opened. Getters take the value to use when the key is
// absent or null, so a struct's defaults stay in the struct.
class YamlMap {
 public:
  // A null node opens as an empty map. Errors: not a map, a key that is not a scalar, a duplicate
  // key, a key not in `keys` (suggesting the closest valid key, or the section of `sections` it
  // belongs to). Records the location of every key in `locations`.
  static absl::StatusOr<YamlMap> Open(const YamlValue& value,
                                      absl::Span<const absl::string_view> keys,
                                      YamlLocations& locations,
                                      absl::Span<const YamlSection> sections = {});

  // Whether `key` is present, even with a null value.
  bool Contains(absl::string_view key) const;
  // The value of `key`, or nullopt when the key is absent or its value is null.
  std::optional<YamlValue> Find(absl::string_view key) const;

  absl::StatusOr<std::string> String(absl::string_view key, absl::string_view fallback) const;
  absl::StatusOr<int> Int(absl::string_view key, int fallback) const;
  absl::StatusOr<int64_t> Int64(absl::string_view key, int64_t fallback) const;
  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const;
  absl::StatusOr<absl::Duration> Duration(absl::string_view key, absl::Duration fallback) const;
  absl::StatusOr<int> ByteSize(absl::string_view key, int fallback) const;
  template <typename Enum, size_t N>
  absl::StatusOr<Enum> Choice(absl::string_view key,
                              const std::array<std::pair<absl::string_view, Enum>, N>& choices,
                              Enum fallback) const {
    const std::optional<YamlValue> value = Find(key);
    if (!value) return fallback;
    return ReadChoice(*value, choices, *locations_);
  }
  // One value or a list of them; empty when absent.
  absl::StatusOr<std::vector<YamlValue>> List(absl::string_view key) const;
  // The nested map under `key` (empty when absent).
  absl::StatusOr<YamlMap> Map(absl::string_view key, absl::Span<const absl::string_view> keys,
                              absl::Span<const YamlSection> sections = {}) const;

  const std::string& path() const { return path_; }
  const YamlLocations& locations() const { return *locations_; }

 private:
  YamlMap(std::string path, YamlLocations* locations)
      : path_(std::move(path)), locations_(locations) {}

  std::string path_;
  std::vector<std::pair<std::string, YAML::Node>> entries_;
  YamlLocations* locations_;
};

}  // namespace dflash::serving
