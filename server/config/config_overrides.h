// Command-line overrides of a configuration: "dotted.path=value" strings applied to the YAML tree
// before it is read, so that an overridden value gets exactly the checks a value in the file gets.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/config/yaml_fields.h"

namespace dflash::serving {

// Applies `overrides` in order. A path is dot-separated keys ("server.tls.cert_file"); at a list, a
// segment is an index ("models.0.backend") or the `name` of an entry ("models.demo.backend"; names
// may contain dots). Missing maps on the way are created, and the index one past a list's end
// appends an entry. The value is YAML ("8", "[0, 1]", "{a: 1}"), except that an empty value is the
// empty string and null/~ are the words themselves (YAML's "no value" has no use here). Each
// override is registered in `locations` for the paths it set, so a later error in them names the
// override. INVALID_ARGUMENT naming the override for a malformed override, a path through a single
// value, an index past the end or an unknown entry name; keys that do not exist in the schema are
// reported when the tree is read.
absl::Status ApplyConfigOverrides(YAML::Node& root, absl::Span<const std::string> overrides,
                                  YamlLocations& locations);

}  // namespace dflash::serving
