// dflash-cli's connection: the channel (plaintext, TLS or mutual TLS) and each call's context
// (deadline and API key).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli_flags.h"

namespace dflash::client {

// The environment variable holding the API key when --api_key is not given.
inline constexpr char kApiKeyEnv[] = "DFLASH_API_KEY";

// A channel to args.target: TLS when args.tls, verified with --tls_ca (else the system's roots)
// and presenting --tls_cert/--tls_key when given. Unreadable PEM files are INVALID_ARGUMENT.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(const CliArgs& args);

// The API key: --api_key, else $DFLASH_API_KEY; nullopt when neither is set (or it is empty).
// A key that cannot travel in an HTTP/2 header (non-printable characters) is INVALID_ARGUMENT.
absl::StatusOr<std::optional<std::string>> ResolveApiKey(const CliArgs& args);

// Sets a call's deadline (--timeout from now) and its "authorization: Bearer <key>" metadata.
void PrepareContext(const CliArgs& args, const std::optional<std::string>& api_key,
                    grpc::ClientContext& context);

}  // namespace dflash::client
