// The server's configuration: what it listens on, how clients authenticate, and which models it
// serves with which batching and request limits. Read from a YAML file (config/server.yaml is the
// commented example) or built for a single checkpoint directory, then changed by
// "dotted.path=value" overrides from the command line. Every error is INVALID_ARGUMENT naming the
// file, line and column (or the override), the key path, and how to fix it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/engine_spec.h"

namespace dflash::serving {

struct TlsConfig {
  // PEM files; both or neither.
  std::string cert_file;
  std::string key_file;
  // When set, mutual TLS: clients must present a certificate signed by this CA.
  std::string client_ca_file;

  bool enabled() const { return !cert_file.empty(); }
};

// API keys shorter than this are refused as guessable.
inline constexpr size_t kMinApiKeyLength = 16;

struct AuthConfig {
  // One key per line; lines starting with '#' and blank lines are ignored. Read with
  // ReadApiKeysFile (checked when the config is loaded).
  std::string api_keys_file;
  // Keys written in the config itself (discouraged: config files get copied and committed).
  std::vector<std::string> api_keys;
  // The request metadata key carrying the key, as "Bearer <key>" or the bare key.
  std::string header = "authorization";

  // Authentication is required when any key source is configured.
  bool enabled() const { return !api_keys_file.empty() || !api_keys.empty(); }
};

struct LoggingConfig {
  std::string level = "info";  // trace|debug|info|warn|error|off
  bool log_request_content = false;
};

struct BatchingConfig {
  int max_batch_tokens = 16384;
  int max_batch_sequences = 256;
  absl::Duration max_queue_delay = absl::ZeroDuration();
  // Admission limits of the model's queue; 0: no limit.
  int max_queued_requests = 1024;
  int64_t max_queued_sequences = 0;
  int64_t max_queued_tokens = 0;
  // Host threads that pack batches and build and send the answers beside the engine runners; 0:
  // two per engine.
  int host_threads = 0;
};

// Per-request limits.
struct RequestLimitsConfig {
  int max_inputs = 256;
  int max_candidate_labels = 64;
  int max_sequences = 4096;  // Model sequences one request expands to (inputs x labels).
  int max_text_bytes = 65536;
  // Model tokens one request expands to after tokenization; 0: no limit. Bounds the engine time
  // one request may take (ZeroShot's sequence limit alone allows 4096 x 512 tokens); the default
  // admits 256 inputs of 512 tokens.
  int64_t max_request_tokens = 262144;
};

enum class ModelTask { kAuto, kClassify, kZeroShot, kRerank, kEmbed, kTokenClassify };

// The spellings used in the YAML file ("zero_shot"); those of the engine's choices (backend,
// dtype, tuning_mode) are the engine's own (engine/engine_spec.h).
absl::string_view ModelTaskName(ModelTask task);

struct ModelEntry {
  std::string name;              // Served model id: [A-Za-z0-9._-]+, unique.
  std::filesystem::path path;    // Checkpoint directory; absolute once loaded.
  std::vector<ModelTask> tasks;  // Empty: derived from the checkpoint.
  EngineBackend backend = EngineBackend::kAuto;
  EngineDtype dtype = EngineDtype::kAuto;
  std::vector<int> devices;  // CUDA device ordinals; empty: device 0.
  // dtype float32 on CUDA only: TF32 tensor cores for the GEMMs and attention (about 1e-3
  // relative error) instead of strict float32 (CudaEngine::Options::allow_tf32).
  bool allow_tf32 = false;
  int cpu_threads = 0;       // BLAS threads of the CPU backend; 0: all cores.
  int max_input_length = 0;  // Tokens including specials; 0: the model's own maximum.
  bool truncate = true;      // Used when a request leaves `truncate` unset.
  TuningMode tuning_mode = TuningMode::kProfile;
  std::string tuning_profile = "auto";  // "auto", "none" or a file path (absolute once loaded).
  std::string priority_cap = "high";    // low|normal|high: the highest priority a request gets.
  // auto|tokenizer_json|sentencepiece: the tokenizer file; auto takes tokenizer.json when the
  // directory has one, else spm.model (transformers 5.17 AutoTokenizer's choice).
  std::string tokenizer = "auto";
  BatchingConfig batching;
  RequestLimitsConfig limits;
};

// The range of server.max_metadata_bytes: below gRPC's default of 8 KiB ordinary calls would
// fail; above 1 MiB one connection's headers could hold that much memory per call.
inline constexpr int kDefaultMaxMetadataBytes = 8 << 10;
inline constexpr int kMaxMaxMetadataBytes = 1 << 20;

struct ServerConfig {
  std::string listen = "0.0.0.0:50051";
  std::string metrics_listen = "0.0.0.0:9464";  // "": no metrics endpoint.
  // The HTTP/JSON routes (TEI, OpenAI, Cohere/Jina); "": off.
  std::string http_listen;
  // An HTTP connection idle this long (between requests, or stalled in one) is closed.
  absl::Duration http_idle_timeout = absl::Seconds(30);
  absl::Duration drain_grace_period = absl::Seconds(30);
  int max_message_bytes = 16 << 20;
  // Request headers (metadata) one call may send; gRPC's own default. A call over it fails, and
  // with it every other call in flight on its connection.
  int max_metadata_bytes = kDefaultMaxMetadataBytes;
  int worker_threads = 0;            // Tokenization/validation pool; 0: number of cores.
  int max_inflight_requests = 4096;  // Whole server, across models; 0: no limit.
  // gRPC calls one client connection may have open at once (HTTP/2
  // SETTINGS_MAX_CONCURRENT_STREAMS); gRPC clients hold further calls until one ends. 0: gRPC's
  // default (no limit).
  int max_concurrent_streams = 256;
  TlsConfig tls;
  AuthConfig auth;
  LoggingConfig logging;
  std::vector<ModelEntry> models;
  std::filesystem::path source;  // The file it came from; empty when built for one model.
};

// Reads, parses and validates `file`. Relative paths in the file resolve against the file's
// directory; relative paths given by `overrides` against the current directory. NOT_FOUND (or the
// OS error) when the file cannot be read; INVALID_ARGUMENT for everything else.
absl::StatusOr<ServerConfig> LoadServerConfig(const std::filesystem::path& file,
                                              const std::vector<std::string>& overrides = {});

// As LoadServerConfig for YAML text: relative paths resolve against `base_dir`, and errors name
// `source_name`.
absl::StatusOr<ServerConfig> ParseServerConfig(absl::string_view yaml,
                                               const std::filesystem::path& base_dir,
                                               absl::string_view source_name,
                                               const std::vector<std::string>& overrides = {});

// A configuration serving one checkpoint directory (relative to the current directory) with every
// default, for runs without --config. An empty `name` becomes the directory's name.
absl::StatusOr<ServerConfig> ServerConfigForModel(const std::filesystem::path& model_dir,
                                                  std::string name,
                                                  const std::vector<std::string>& overrides = {});

// The range and cross-field checks of loading, for a config changed in code after loading. Errors
// name the key path (and the source file, but no line: the struct has none).
absl::Status ValidateServerConfig(const ServerConfig& config);

// The keys of an API keys file, each checked (at least kMinApiKeyLength characters, no whitespace);
// errors name the file and line and never echo a key. At least one key is required.
absl::StatusOr<std::vector<std::string>> ReadApiKeysFile(const std::filesystem::path& file);

// A one-screen summary for the startup log. Names key files but never prints a key.
std::string DescribeServerConfig(const ServerConfig& config);

}  // namespace dflash::serving
