#include "server/config/server_config_validation.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace dflash::serving {
namespace {

constexpr absl::string_view kLogLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
constexpr absl::string_view kPriorities[] = {"low", "normal", "high"};
constexpr absl::string_view kTokenizers[] = {"auto", "tokenizer_json", "sentencepiece"};

struct ListenAddress {
  std::string host;
  int port = 0;
  std::string problem;  // Empty when the address is well-formed.
};

ListenAddress ParseListenAddress(absl::string_view address) {
  ListenAddress parsed;
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    parsed.problem = "the ':<port>' part is missing";
    return parsed;
  }
  parsed.host = std::string(address.substr(0, colon));
  const absl::string_view port = address.substr(colon + 1);
  const std::string& host = parsed.host;
  if (host.empty()) {
    parsed.problem = "the host is missing (0.0.0.0 listens on every interface)";
  } else if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') parsed.problem = "the IPv6 address lacks its ']'";
  } else if (absl::StrContains(host, ':')) {
    parsed.problem = "an IPv6 address must be in brackets, as in [::]:50051";
  } else if (std::any_of(host.begin(), host.end(), [](char c) {
               return !absl::ascii_isgraph(static_cast<unsigned char>(c));
             })) {
    parsed.problem = "the host contains spaces or control characters";
  }
  if (parsed.problem.empty() &&
      (port.empty() || port.size() > 5 ||
       !std::all_of(port.begin(), port.end(), [](char c) { return absl::ascii_isdigit(c); }) ||
       !absl::SimpleAtoi(port, &parsed.port) || parsed.port > 65535)) {
    parsed.problem = "the port must be a number from 0 to 65535 (0 picks a free port)";
  }
  return parsed;
}

bool IsWildcardHost(absl::string_view host) { return host == "0.0.0.0" || host == "[::]"; }

// "must be at least 1, got 0"; with minimum 0 the message says what 0 means.
absl::Status CheckAtLeast(const YamlLocations& locations, absl::string_view path, int64_t value,
                          int64_t minimum, absl::string_view zero_means = "") {
  if (value >= minimum) return absl::OkStatus();
  if (minimum == 0) {
    return locations.Error(path, absl::StrCat("must be 0 (", zero_means, ") or more, got ", value));
  }
  return locations.Error(path, absl::StrCat("must be at least ", minimum, ", got ", value));
}

absl::Status CheckOneOf(const YamlLocations& locations, absl::string_view path,
                        absl::string_view value, absl::Span<const absl::string_view> allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return absl::OkStatus();
  std::string problem =
      absl::StrCat("expected one of ", absl::StrJoin(allowed, ", "), ", got '", value, "'");
  if (const std::optional<absl::string_view> match = ClosestMatch(value, allowed)) {
    absl::StrAppend(&problem, "; did you mean '", *match, "'?");
  }
  return locations.Error(path, problem);
}

absl::Status CheckListen(const YamlLocations& locations, absl::string_view path,
                         absl::string_view address) {
  if (const std::optional<std::string> problem = ListenAddressProblem(address)) {
    return locations.Error(path, *problem);
  }
  return absl::OkStatus();
}

absl::Status CheckServer(const ServerConfig& config, const YamlLocations& locations) {
  DFLASH_RETURN_IF_ERROR(CheckListen(locations, "server.listen", config.listen));
  if (!config.metrics_listen.empty()) {
    DFLASH_RETURN_IF_ERROR(CheckListen(locations, "server.metrics_listen", config.metrics_listen));
    const ListenAddress grpc = ParseListenAddress(config.listen);
    const ListenAddress metrics = ParseListenAddress(config.metrics_listen);
    if (grpc.port != 0 && grpc.port == metrics.port &&
        (grpc.host == metrics.host || IsWildcardHost(grpc.host) || IsWildcardHost(metrics.host))) {
      return locations.Error(
          "server.metrics_listen",
          absl::StrCat("uses port ", metrics.port, " of server.listen (", config.listen,
                       "); give the metrics endpoint another port, or \"\" to disable it"));
    }
  }
  if (!config.http_listen.empty()) {
    DFLASH_RETURN_IF_ERROR(CheckListen(locations, "server.http_listen", config.http_listen));
    const ListenAddress http = ParseListenAddress(config.http_listen);
    for (const std::string* other : {&config.listen, &config.metrics_listen}) {
      if (other->empty()) continue;
      const ListenAddress taken = ParseListenAddress(*other);
      if (http.port != 0 && http.port == taken.port &&
          (http.host == taken.host || IsWildcardHost(http.host) || IsWildcardHost(taken.host))) {
        return locations.Error("server.http_listen",
                               absl::StrCat("uses port ", http.port, " of ", *other,
                                            "; give the HTTP routes a port of their own"));
      }
    }
  }
  if (config.http_idle_timeout < absl::Seconds(1)) {
    return locations.Error(
        "server.http_idle_timeout",
        absl::StrCat("must be at least 1s, got ", absl::FormatDuration(config.http_idle_timeout)));
  }
  if (config.drain_grace_period < absl::ZeroDuration()) {
    return locations.Error("server.drain_grace_period",
                           absl::StrCat("must not be negative, got ",
                                        absl::FormatDuration(config.drain_grace_period)));
  }
  DFLASH_RETURN_IF_ERROR(
      CheckAtLeast(locations, "server.max_message_bytes", config.max_message_bytes, 1));
  if (config.max_metadata_bytes < kDefaultMaxMetadataBytes ||
      config.max_metadata_bytes > kMaxMaxMetadataBytes) {
    return locations.Error(
        "server.max_metadata_bytes",
        absl::StrCat("must be between ", kDefaultMaxMetadataBytes, " (8KiB, gRPC's default) and ",
                     kMaxMaxMetadataBytes, " (1MiB), got ", config.max_metadata_bytes));
  }
  DFLASH_RETURN_IF_ERROR(
      CheckAtLeast(locations, "server.worker_threads", config.worker_threads, 0, "one per core"));
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, "server.max_inflight_requests",
                                      config.max_inflight_requests, 0, "no limit"));
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, "server.max_concurrent_streams",
                                      config.max_concurrent_streams, 0, "no limit"));

  const TlsConfig& tls = config.tls;
  if (!tls.cert_file.empty() && tls.key_file.empty()) {
    return locations.Error("server.tls.cert_file",
                           "is set but server.tls.key_file is not: TLS needs both the certificate "
                           "and its private key (PEM files), or neither");
  }
  if (tls.cert_file.empty() && !tls.key_file.empty()) {
    return locations.Error("server.tls.key_file",
                           "is set but server.tls.cert_file is not: TLS needs both the certificate "
                           "and its private key (PEM files), or neither");
  }
  if (!tls.client_ca_file.empty() && tls.cert_file.empty()) {
    return locations.Error("server.tls.client_ca_file",
                           "requires server TLS: set server.tls.cert_file and server.tls.key_file "
                           "too (mutual TLS authenticates both ends)");
  }

  const AuthConfig& auth = config.auth;
  const bool header_ok =
      !auth.header.empty() && !absl::EndsWith(auth.header, "-bin") &&
      !absl::StartsWith(auth.header, "grpc-") &&
      std::all_of(auth.header.begin(), auth.header.end(), [](char c) {
        return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_' || c == '.';
      });
  if (!header_ok) {
    return locations.Error(
        "server.auth.header",
        absl::StrCat("'", auth.header,
                     "' is not a usable gRPC metadata key: use lowercase letters, digits, '-', '_' "
                     "and '.', not starting with 'grpc-' nor ending in '-bin' (e.g. authorization "
                     "or x-api-key)"));
  }
  for (size_t i = 0; i < auth.api_keys.size(); ++i) {
    if (const std::optional<std::string> problem = ApiKeyProblem(auth.api_keys[i])) {
      return locations.Error(ElementPath("server.auth.api_keys", i), *problem);
    }
  }

  return CheckOneOf(locations, "server.logging.level", config.logging.level, kLogLevels);
}

bool IsValidModelName(absl::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

absl::Status CheckModel(const ModelEntry& model, const std::string& path,
                        const YamlLocations& locations) {
  if (model.name.empty()) {
    return locations.Error(ChildPath(path, "name"),
                           "is required: the id clients use to select this model");
  }
  if (!IsValidModelName(model.name)) {
    return locations.Error(
        ChildPath(path, "name"),
        absl::StrCat("'", model.name, "' may only use letters, digits, '.', '_' and '-'"));
  }
  if (model.path.empty()) {
    return locations.Error(ChildPath(path, "path"),
                           "is required: the checkpoint directory (config.json, model weights, "
                           "tokenizer files)");
  }
  if (model.tuning_profile.empty()) {
    return locations.Error(ChildPath(path, "tuning_profile"),
                           "must be 'auto', 'none' or the path of a tuning profile file");
  }
  DFLASH_RETURN_IF_ERROR(
      CheckOneOf(locations, ChildPath(path, "priority_cap"), model.priority_cap, kPriorities));
  DFLASH_RETURN_IF_ERROR(
      CheckOneOf(locations, ChildPath(path, "tokenizer"), model.tokenizer, kTokenizers));

  for (size_t i = 0; i < model.devices.size(); ++i) {
    const std::string device_path = ElementPath(ChildPath(path, "devices"), i);
    if (model.devices[i] < 0) {
      return locations.Error(
          device_path, absl::StrCat("CUDA device ordinals start at 0, got ", model.devices[i]));
    }
    if (std::find(model.devices.begin(), model.devices.begin() + static_cast<std::ptrdiff_t>(i),
                  model.devices[i]) != model.devices.begin() + static_cast<std::ptrdiff_t>(i)) {
      return locations.Error(device_path,
                             absl::StrCat("device ", model.devices[i], " is listed twice"));
    }
  }
  if (model.backend == EngineBackend::kCpu && !model.devices.empty()) {
    return locations.Error(ChildPath(path, "devices"),
                           "lists CUDA devices but backend is cpu: remove devices, or set "
                           "backend: cuda (or auto)");
  }
  if (model.backend == EngineBackend::kCpu &&
      (model.dtype == EngineDtype::kFloat16 || model.dtype == EngineDtype::kBfloat16)) {
    return locations.Error(
        ChildPath(path, "dtype"),
        absl::StrCat("the CPU backend computes in float32, not ", EngineDtypeName(model.dtype),
                     ": set dtype: float32 (or auto), or backend: cuda"));
  }
  if (model.allow_tf32 && model.dtype != EngineDtype::kFloat32) {
    return locations.Error(
        ChildPath(path, "allow_tf32"),
        absl::StrCat("applies to dtype float32 only, not ", EngineDtypeName(model.dtype),
                     ": set dtype: float32, or remove allow_tf32"));
  }
  DFLASH_RETURN_IF_ERROR(
      CheckAtLeast(locations, ChildPath(path, "cpu_threads"), model.cpu_threads, 0, "all cores"));
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, ChildPath(path, "max_input_length"),
                                      model.max_input_length, 0, "the model's own maximum"));

  const std::string batching = ChildPath(path, "batching");
  const BatchingConfig& b = model.batching;
  DFLASH_RETURN_IF_ERROR(
      CheckAtLeast(locations, ChildPath(batching, "max_batch_tokens"), b.max_batch_tokens, 1));
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, ChildPath(batching, "max_batch_sequences"),
                                      b.max_batch_sequences, 1));
  if (model.max_input_length > 0 && b.max_batch_tokens < model.max_input_length) {
    return locations.Error(
        ChildPath(batching, "max_batch_tokens"),
        absl::StrCat(b.max_batch_tokens, " is less than max_input_length (", model.max_input_length,
                     "): a batch must hold one whole input; raise max_batch_tokens or lower "
                     "max_input_length"));
  }
  if (b.max_queue_delay < absl::ZeroDuration()) {
    return locations.Error(
        ChildPath(batching, "max_queue_delay"),
        absl::StrCat("must not be negative, got ", absl::FormatDuration(b.max_queue_delay),
                     " (0 runs batches as soon as a worker is free)"));
  }
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, ChildPath(batching, "max_queued_requests"),
                                      b.max_queued_requests, 0, "no limit"));
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, ChildPath(batching, "max_queued_sequences"),
                                      b.max_queued_sequences, 0, "no limit"));
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, ChildPath(batching, "max_queued_tokens"),
                                      b.max_queued_tokens, 0, "no limit"));
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, ChildPath(batching, "host_threads"),
                                      b.host_threads, 0, "two per engine"));

  const std::string limits = ChildPath(path, "limits");
  const RequestLimitsConfig& l = model.limits;
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, ChildPath(limits, "max_inputs"), l.max_inputs, 1));
  DFLASH_RETURN_IF_ERROR(CheckAtLeast(locations, ChildPath(limits, "max_candidate_labels"),
                                      l.max_candidate_labels, 1));
  DFLASH_RETURN_IF_ERROR(
      CheckAtLeast(locations, ChildPath(limits, "max_sequences"), l.max_sequences, 1));
  DFLASH_RETURN_IF_ERROR(
      CheckAtLeast(locations, ChildPath(limits, "max_text_bytes"), l.max_text_bytes, 1));
  return CheckAtLeast(locations, ChildPath(limits, "max_request_tokens"), l.max_request_tokens, 0,
                      "no limit");
}

}  // namespace

std::optional<std::string> ListenAddressProblem(absl::string_view address) {
  const ListenAddress parsed = ParseListenAddress(address);
  if (parsed.problem.empty()) return std::nullopt;
  return absl::StrCat("'", address, "' is not a host:port address: ", parsed.problem,
                      "; write e.g. 0.0.0.0:50051, 127.0.0.1:50051 or [::]:50051");
}

std::optional<std::string> ApiKeyProblem(absl::string_view key) {
  if (!std::all_of(key.begin(), key.end(),
                   [](char c) { return absl::ascii_isgraph(static_cast<unsigned char>(c)); })) {
    return "an API key must be printable ASCII without spaces";
  }
  if (key.size() < kMinApiKeyLength) {
    return absl::StrCat("an API key of ", key.size(),
                        " characters is too easy to guess: use at least ", kMinApiKeyLength,
                        " (generate one with 'openssl rand -hex 32')");
  }
  return std::nullopt;
}

absl::Status ValidateServerConfig(const ServerConfig& config, const YamlLocations& locations) {
  DFLASH_RETURN_IF_ERROR(CheckServer(config, locations));
  if (config.models.empty()) {
    return locations.Error("models",
                           "no models to serve: add an entry with at least 'name:' and 'path:' "
                           "(see config/server.yaml)");
  }
  std::map<std::string, size_t> first_index;
  for (size_t i = 0; i < config.models.size(); ++i) {
    const std::string path = ElementPath("models", i);
    DFLASH_RETURN_IF_ERROR(CheckModel(config.models[i], path, locations));
    const auto [it, inserted] = first_index.emplace(config.models[i].name, i);
    if (!inserted) {
      return locations.Error(
          ChildPath(path, "name"),
          absl::StrCat("'", config.models[i].name, "' is already the name of ",
                       ElementPath("models", it->second), "; model names must be unique"));
    }
  }
  return absl::OkStatus();
}

}  // namespace dflash::serving
