// The project's safety rule for load generation: the harness only ever targets this machine, so a
// mistyped or copied address can never turn it against a remote server.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash::loadtest {

// Returns `target` unchanged when it is a gRPC target on the loopback interface:
//   localhost:PORT, 127.x.y.z:PORT, [::1]:PORT (or a v4-mapped [::ffff:127.x.y.z]:PORT), each
//   optionally behind an ipv4:, ipv6: or dns: scheme (dns:///host:PORT; no DNS server authority);
//   unix:PATH, unix-abstract:NAME (local sockets).
// Anything else, including other host names, 0.0.0.0, address lists and a missing port, is
// INVALID_ARGUMENT with a message that states the rule.
absl::StatusOr<std::string> CheckLoopbackTarget(absl::string_view target);

}  // namespace dflash::loadtest
