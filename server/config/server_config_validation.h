// The range and cross-field rules of a ServerConfig, checked on the typed struct so that they also
// hold for a config changed in code after loading.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/config/server_config.h"
#include "server/config/yaml_fields.h"

namespace dflash::serving {

// Checks every rule; the first violation is INVALID_ARGUMENT located through `locations` (the
// line of the offending key when the config was read from YAML).
absl::Status ValidateServerConfig(const ServerConfig& config, const YamlLocations& locations);

// Why `key` is not acceptable as an API key (too short, spaces or control characters), or nullopt.
// The text never repeats the key.
std::optional<std::string> ApiKeyProblem(absl::string_view key);

// Why `address` is not a "host:port" listening address, or nullopt. Port 0 picks a free port.
std::optional<std::string> ListenAddressProblem(absl::string_view address);

}  // namespace dflash::serving
