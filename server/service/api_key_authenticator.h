// API-key authentication of inference calls. A call presents its key in one metadata entry
// (default "authorization"), either as "Bearer <key>" or bare. Keys are compared as SHA-256
// digests with a constant-time comparison, against every configured key, so neither the time
// taken nor an early exit reveals how much of a guess was right or which key it was close to.
// The health service is not behind this check (Kubernetes gRPC probes carry no key).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/config/server_config.h"

namespace dflash::serving {

class ApiKeyAuthenticator {
 public:
  // Null when the config enables no keys (authentication off). Reads auth.api_keys_file.
  static absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> FromConfig(const AuthConfig& auth);
  ApiKeyAuthenticator(std::vector<std::string> keys, std::string header);

  // The lower-case metadata key that carries the API key.
  const std::string& header() const { return header_; }
  // OK when `presented` (the metadata value, or absent) matches a key; UNAUTHENTICATED otherwise.
  absl::Status Check(const std::string* presented) const;

 private:
  using Digest = std::array<uint8_t, 32>;
  static Digest Hash(absl::string_view key);

  std::vector<Digest> keys_;
  std::string header_;
};

}  // namespace dflash::serving
