#include "client/cli_channel.h"

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace dflash::client {
namespace {

absl::StatusOr<std::string> ReadPem(absl::string_view flag, const std::string& path) {
  absl::StatusOr<std::string> pem = ReadFile(path, size_t{1} << 20);
  if (!pem.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": ", pem.status().message()));
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(const CliArgs& args) {
  grpc::ChannelArguments channel_args;
  channel_args.SetUserAgentPrefix("dflash-cli");
  // The server's answers (embeddings, token lists of a large --batch) may exceed gRPC's 4 MiB
  // default; the client trusts the server it asked.
  channel_args.SetMaxReceiveMessageSize(-1);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (args.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!args.tls_ca.empty()) {
      DFLASH_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem("tls_ca", args.tls_ca));
    }
    if (!args.tls_cert.empty()) {
      DFLASH_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem("tls_cert", args.tls_cert));
      DFLASH_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem("tls_key", args.tls_key));
    }
    if (!args.tls_server_name.empty()) {
      channel_args.SetSslTargetNameOverride(args.tls_server_name);
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  return grpc::CreateCustomChannel(args.target, credentials, channel_args);
}

absl::StatusOr<std::optional<std::string>> ResolveApiKey(const CliArgs& args) {
  std::string key;
  absl::string_view source = "--api_key";
  if (args.api_key.has_value()) {
    key = *args.api_key;
  } else if (const char* env = std::getenv(kApiKeyEnv); env != nullptr) {
    key = env;
    source = kApiKeyEnv;
  }
  if (key.empty()) return std::nullopt;
  for (const char c : key) {
    // HTTP/2 header values are visible ASCII; gRPC would fail every call otherwise.
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": the API key has a character that cannot be sent in a header"));
    }
  }
  return key;
}

void PrepareContext(const CliArgs& args, const std::optional<std::string>& api_key,
                    grpc::ClientContext& context) {
  if (args.timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + args.timeout));
  }
  if (api_key.has_value()) context.AddMetadata("authorization", absl::StrCat("Bearer ", *api_key));
}

}  // namespace dflash::client
