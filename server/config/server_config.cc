#include "server/config/server_config.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <array>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/choice_names.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "server/config/config_overrides.h"
#include "server/config/server_config_validation.h"
#include "server/config/yaml_fields.h"

namespace dflash::serving {
namespace {

// Keys of each level, in the order config/server.yaml documents them.
constexpr absl::string_view kTopLevelKeys[] = {"server", "models"};
constexpr absl::string_view kServerKeys[] = {"listen",
                                             "metrics_listen",
                                             "http_listen",
                                             "http_idle_timeout",
                                             "drain_grace_period",
                                             "max_message_bytes",
                                             "max_metadata_bytes",
                                             "worker_threads",
                                             "max_inflight_requests",
                                             "max_concurrent_streams",
                                             "tls",
                                             "auth",
                                             "logging"};
constexpr absl::string_view kTlsKeys[] = {"cert_file", "key_file", "client_ca_file"};
constexpr absl::string_view kAuthKeys[] = {"api_keys_file", "api_keys", "header"};
constexpr absl::string_view kLoggingKeys[] = {"level", "log_request_content"};
constexpr absl::string_view kModelKeys[] = {
    "name",        "path",           "task",         "backend",          "dtype",
    "allow_tf32",  "devices",        "cpu_threads",  "max_input_length", "truncate",
    "tuning_mode", "tuning_profile", "priority_cap", "tokenizer",        "batching",
    "limits"};
constexpr absl::string_view kBatchingKeys[] = {
    "max_batch_tokens",     "max_batch_sequences", "max_queue_delay", "max_queued_requests",
    "max_queued_sequences", "max_queued_tokens",   "host_threads"};
constexpr absl::string_view kLimitsKeys[] = {"max_inputs", "max_candidate_labels", "max_sequences",
                                             "max_text_bytes", "max_request_tokens"};

constexpr YamlSection kTopLevelSections[] = {{"server", kServerKeys}};
constexpr YamlSection kServerSections[] = {
    {"tls", kTlsKeys}, {"auth", kAuthKeys}, {"logging", kLoggingKeys}};
constexpr YamlSection kModelSections[] = {{"batching", kBatchingKeys}, {"limits", kLimitsKeys}};

constexpr std::array<std::pair<absl::string_view, ModelTask>, 6> kTasks = {{
    {"auto", ModelTask::kAuto},
    {"classify", ModelTask::kClassify},
    {"zero_shot", ModelTask::kZeroShot},
    {"rerank", ModelTask::kRerank},
    {"embed", ModelTask::kEmbed},
    {"token_classify", ModelTask::kTokenClassify},
}};

// Turns the YAML tree into the struct: types, unknown and duplicate keys, path resolution. Range
// and cross-field checks come after, on the struct (server_config_validation.h).
class ConfigReader {
 public:
  ConfigReader(std::filesystem::path base_dir, std::filesystem::path working_dir,
               YamlLocations& locations)
      : base_dir_(std::move(base_dir)),
        working_dir_(std::move(working_dir)),
        locations_(locations) {}

  absl::StatusOr<ServerConfig> Read(const YAML::Node& root) {
    // An empty document has no position; its errors point at its start.
    locations_.Record("", root.Mark().is_null() ? YAML::Mark() : root.Mark());
    DFLASH_ASSIGN_OR_RETURN(
        const YamlMap top, YamlMap::Open({root, ""}, kTopLevelKeys, locations_, kTopLevelSections));
    ServerConfig config;
    DFLASH_ASSIGN_OR_RETURN(const YamlMap server, top.Map("server", kServerKeys, kServerSections));
    DFLASH_RETURN_IF_ERROR(ReadServer(server, config));
    const std::optional<YamlValue> models = top.Find("models");
    if (models && models->node.IsMap()) {
      return locations_.Error("models",
                              "expected a list of model entries, each starting with '- name:', "
                              "got a map");
    }
    DFLASH_ASSIGN_OR_RETURN(const std::vector<YamlValue> entries, top.List("models"));
    for (const YamlValue& entry : entries) {
      DFLASH_ASSIGN_OR_RETURN(ModelEntry model, ReadModel(entry));
      config.models.push_back(std::move(model));
    }
    return config;
  }

 private:
  absl::Status ReadServer(const YamlMap& server, ServerConfig& config) {
    DFLASH_ASSIGN_OR_RETURN(config.listen, server.String("listen", config.listen));
    DFLASH_ASSIGN_OR_RETURN(config.metrics_listen,
                            server.String("metrics_listen", config.metrics_listen));
    DFLASH_ASSIGN_OR_RETURN(config.http_listen, server.String("http_listen", config.http_listen));
    DFLASH_ASSIGN_OR_RETURN(config.http_idle_timeout,
                            server.Duration("http_idle_timeout", config.http_idle_timeout));
    DFLASH_ASSIGN_OR_RETURN(config.drain_grace_period,
                            server.Duration("drain_grace_period", config.drain_grace_period));
    DFLASH_ASSIGN_OR_RETURN(config.max_message_bytes,
                            server.ByteSize("max_message_bytes", config.max_message_bytes));
    DFLASH_ASSIGN_OR_RETURN(config.max_metadata_bytes,
                            server.ByteSize("max_metadata_bytes", config.max_metadata_bytes));
    DFLASH_ASSIGN_OR_RETURN(config.worker_threads,
                            server.Int("worker_threads", config.worker_threads));
    DFLASH_ASSIGN_OR_RETURN(config.max_inflight_requests,
                            server.Int("max_inflight_requests", config.max_inflight_requests));
    DFLASH_ASSIGN_OR_RETURN(config.max_concurrent_streams,
                            server.Int("max_concurrent_streams", config.max_concurrent_streams));

    DFLASH_ASSIGN_OR_RETURN(const YamlMap tls, server.Map("tls", kTlsKeys));
    DFLASH_ASSIGN_OR_RETURN(config.tls.cert_file, FilePath(tls, "cert_file"));
    DFLASH_ASSIGN_OR_RETURN(config.tls.key_file, FilePath(tls, "key_file"));
    DFLASH_ASSIGN_OR_RETURN(config.tls.client_ca_file, FilePath(tls, "client_ca_file"));

    DFLASH_ASSIGN_OR_RETURN(const YamlMap auth, server.Map("auth", kAuthKeys));
    DFLASH_ASSIGN_OR_RETURN(config.auth.api_keys_file, FilePath(auth, "api_keys_file"));
    DFLASH_ASSIGN_OR_RETURN(const std::vector<YamlValue> keys, auth.List("api_keys"));
    for (const YamlValue& key : keys) {
      DFLASH_ASSIGN_OR_RETURN(std::string text, ReadString(key, locations_));
      config.auth.api_keys.push_back(std::move(text));
    }
    DFLASH_ASSIGN_OR_RETURN(config.auth.header, auth.String("header", config.auth.header));

    DFLASH_ASSIGN_OR_RETURN(const YamlMap logging, server.Map("logging", kLoggingKeys));
    DFLASH_ASSIGN_OR_RETURN(config.logging.level, logging.String("level", config.logging.level));
    DFLASH_ASSIGN_OR_RETURN(
        config.logging.log_request_content,
        logging.Bool("log_request_content", config.logging.log_request_content));
    return absl::OkStatus();
  }

  absl::StatusOr<ModelEntry> ReadModel(const YamlValue& entry) {
    DFLASH_ASSIGN_OR_RETURN(const YamlMap map,
                            YamlMap::Open(entry, kModelKeys, locations_, kModelSections));
    ModelEntry model;
    DFLASH_ASSIGN_OR_RETURN(model.name, map.String("name", ""));
    DFLASH_ASSIGN_OR_RETURN(const std::string path, FilePath(map, "path"));
    model.path = path;

    DFLASH_ASSIGN_OR_RETURN(const std::vector<YamlValue> tasks, map.List("task"));
    for (const YamlValue& task_value : tasks) {
      DFLASH_ASSIGN_OR_RETURN(const ModelTask task, ReadChoice(task_value, kTasks, locations_));
      // "auto" means "derive from the checkpoint", which the empty list already says.
      if (task == ModelTask::kAuto) {
        if (tasks.size() > 1) {
          return locations_.Error(task_value.path,
                                  "'auto' cannot be combined with other tasks: list the tasks to "
                                  "serve, or write 'task: auto' alone");
        }
        continue;
      }
      if (std::find(model.tasks.begin(), model.tasks.end(), task) != model.tasks.end()) {
        return locations_.Error(task_value.path,
                                absl::StrCat("task '", ModelTaskName(task), "' is listed twice"));
      }
      model.tasks.push_back(task);
    }
    if (map.Contains("backend") && !map.Find("backend")) {
      // `backend: null` would otherwise silently mean auto.
      return locations_.Error(ChildPath(map.path(), "backend"),
                              "has no value (a bare null is YAML's 'nothing'): write auto, cpu or "
                              "cuda, or \"null\" in quotes for the null engine");
    }
    DFLASH_ASSIGN_OR_RETURN(model.backend,
                            map.Choice("backend", kEngineBackendNames, model.backend));
    DFLASH_ASSIGN_OR_RETURN(model.dtype, map.Choice("dtype", kEngineDtypeNames, model.dtype));
    DFLASH_ASSIGN_OR_RETURN(model.allow_tf32, map.Bool("allow_tf32", model.allow_tf32));
    DFLASH_ASSIGN_OR_RETURN(const std::vector<YamlValue> devices, map.List("devices"));
    for (const YamlValue& device : devices) {
      DFLASH_ASSIGN_OR_RETURN(const int ordinal, ReadInt(device, locations_));
      model.devices.push_back(ordinal);
    }
    DFLASH_ASSIGN_OR_RETURN(model.cpu_threads, map.Int("cpu_threads", model.cpu_threads));
    DFLASH_ASSIGN_OR_RETURN(model.max_input_length,
                            map.Int("max_input_length", model.max_input_length));
    DFLASH_ASSIGN_OR_RETURN(model.truncate, map.Bool("truncate", model.truncate));
    DFLASH_ASSIGN_OR_RETURN(model.tuning_mode,
                            map.Choice("tuning_mode", kTuningModeNames, model.tuning_mode));
    DFLASH_ASSIGN_OR_RETURN(model.tuning_profile,
                            map.String("tuning_profile", model.tuning_profile));
    if (model.tuning_profile != "auto" && model.tuning_profile != "none") {
      model.tuning_profile = Resolve(model.tuning_profile, ChildPath(map.path(), "tuning_profile"));
    }
    DFLASH_ASSIGN_OR_RETURN(model.priority_cap, map.String("priority_cap", model.priority_cap));
    DFLASH_ASSIGN_OR_RETURN(model.tokenizer, map.String("tokenizer", model.tokenizer));

    DFLASH_ASSIGN_OR_RETURN(const YamlMap batching, map.Map("batching", kBatchingKeys));
    BatchingConfig& b = model.batching;
    DFLASH_ASSIGN_OR_RETURN(b.max_batch_tokens,
                            batching.Int("max_batch_tokens", b.max_batch_tokens));
    DFLASH_ASSIGN_OR_RETURN(b.max_batch_sequences,
                            batching.Int("max_batch_sequences", b.max_batch_sequences));
    DFLASH_ASSIGN_OR_RETURN(b.max_queue_delay,
                            batching.Duration("max_queue_delay", b.max_queue_delay));
    DFLASH_ASSIGN_OR_RETURN(b.max_queued_requests,
                            batching.Int("max_queued_requests", b.max_queued_requests));
    DFLASH_ASSIGN_OR_RETURN(b.max_queued_sequences,
                            batching.Int64("max_queued_sequences", b.max_queued_sequences));
    DFLASH_ASSIGN_OR_RETURN(b.max_queued_tokens,
                            batching.Int64("max_queued_tokens", b.max_queued_tokens));
    DFLASH_ASSIGN_OR_RETURN(b.host_threads, batching.Int("host_threads", b.host_threads));

    DFLASH_ASSIGN_OR_RETURN(const YamlMap limits, map.Map("limits", kLimitsKeys));
    RequestLimitsConfig& l = model.limits;
    DFLASH_ASSIGN_OR_RETURN(l.max_inputs, limits.Int("max_inputs", l.max_inputs));
    DFLASH_ASSIGN_OR_RETURN(l.max_candidate_labels,
                            limits.Int("max_candidate_labels", l.max_candidate_labels));
    DFLASH_ASSIGN_OR_RETURN(l.max_sequences, limits.Int("max_sequences", l.max_sequences));
    DFLASH_ASSIGN_OR_RETURN(l.max_text_bytes, limits.ByteSize("max_text_bytes", l.max_text_bytes));
    DFLASH_ASSIGN_OR_RETURN(l.max_request_tokens,
                            limits.Int64("max_request_tokens", l.max_request_tokens));
    return model;
  }

  // A file path field, resolved; empty when absent.
  absl::StatusOr<std::string> FilePath(const YamlMap& map, absl::string_view key) {
    DFLASH_ASSIGN_OR_RETURN(const std::string text, map.String(key, ""));
    return Resolve(text, ChildPath(map.path(), key));
  }

  // Relative paths in the file are relative to the file, wherever the server is started from; a
  // path typed on the command line is relative to where it was typed.
  std::string Resolve(const std::string& text, const std::string& key_path) const {
    if (text.empty()) return text;
    const std::filesystem::path path(text);
    if (path.is_absolute()) return path.lexically_normal().string();
    const std::filesystem::path& base =
        locations_.IsOverridden(key_path) ? working_dir_ : base_dir_;
    return (base / path).lexically_normal().string();
  }

  std::filesystem::path base_dir_;
  std::filesystem::path working_dir_;
  YamlLocations& locations_;
};

absl::StatusOr<std::filesystem::path> AbsolutePath(const std::filesystem::path& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) {
    return absl::InternalError(absl::StrCat(path.string(), ": ", error.message()));
  }
  return absolute.lexically_normal();
}

// A PEM file the server will read at startup: checked now so the error can name the config line.
absl::StatusOr<std::string> ReadPemFile(const std::string& file, absl::string_view key_path,
                                        const YamlLocations& locations) {
  absl::StatusOr<std::string> text = ReadFile(file, size_t{1} << 20);
  if (!text.ok()) {
    return locations.Error(key_path,
                           absl::StrCat("cannot read the file: ", text.status().message()));
  }
  if (!absl::StrContains(*text, "-----BEGIN ")) {
    return locations.Error(key_path, absl::StrCat(file,
                                                  " is not a PEM file (no '-----BEGIN' "
                                                  "line); give the PEM-encoded file"));
  }
  return text;
}

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* certificate) const { X509_free(certificate); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using UniqueBio = std::unique_ptr<BIO, BioFree>;
using UniqueX509 = std::unique_ptr<X509, X509Free>;
using UniquePkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

UniqueBio MemoryBio(const std::string& text) {
  return UniqueBio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// OpenSSL's reason for the last failure (its error queue is left empty), for messages.
std::string OpenSslReason() {
  const unsigned long error = ERR_peek_last_error();  // NOLINT(runtime/int): OpenSSL's type.
  const char* reason = error != 0 ? ERR_reason_error_string(error) : nullptr;
  ERR_clear_error();
  return reason != nullptr ? reason : "unknown error";
}

// Refuses a passphrase: without this OpenSSL would prompt for one on the terminal.
int NoPassphrase(char* /*buffer*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) { return 0; }

// The certificates of a PEM file (at least one), or the error naming the file.
absl::StatusOr<std::vector<UniqueX509>> ParseCertificates(const std::string& file,
                                                          absl::string_view key_path,
                                                          const YamlLocations& locations) {
  DFLASH_ASSIGN_OR_RETURN(const std::string text, ReadPemFile(file, key_path, locations));
  const UniqueBio bio = MemoryBio(text);
  std::vector<UniqueX509> certificates;
  while (X509* certificate = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    certificates.emplace_back(certificate);
  }
  ERR_clear_error();  // The loop ends on "no start line", which is no error once one was read.
  if (certificates.empty()) {
    return locations.Error(key_path, absl::StrCat(file,
                                                  " holds no PEM certificate ('-----BEGIN "
                                                  "CERTIFICATE-----' block) that OpenSSL can "
                                                  "parse"));
  }
  return certificates;
}

// The server's certificate, its private key and the client CA, parsed as gRPC will parse them:
// a bad file otherwise surfaces only after every model loaded, as gRPC failing to listen.
absl::Status CheckTlsFiles(const TlsConfig& tls, const YamlLocations& locations) {
  if (!tls.enabled()) return absl::OkStatus();
  DFLASH_ASSIGN_OR_RETURN(const std::vector<UniqueX509> chain,
                          ParseCertificates(tls.cert_file, "server.tls.cert_file", locations));
  DFLASH_ASSIGN_OR_RETURN(const std::string key_text,
                          ReadPemFile(tls.key_file, "server.tls.key_file", locations));
  const UniqueBio key_bio = MemoryBio(key_text);
  const UniquePkey key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
  if (key == nullptr) {
    return locations.Error(
        "server.tls.key_file",
        absl::StrCat(tls.key_file, " holds no private key OpenSSL can parse (", OpenSslReason(),
                     "); give the unencrypted PEM private key of server.tls.cert_file"));
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    return locations.Error(
        "server.tls.key_file",
        absl::StrCat(tls.key_file, " is not the private key of the certificate in ", tls.cert_file,
                     " (", OpenSslReason(), "); give the key the certificate was issued for"));
  }
  if (!tls.client_ca_file.empty()) {
    DFLASH_RETURN_IF_ERROR(
        ParseCertificates(tls.client_ca_file, "server.tls.client_ca_file", locations).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerConfig> ParseTree(YAML::Node root, const std::filesystem::path& base_dir,
                                       absl::string_view source_name,
                                       const std::vector<std::string>& overrides) {
  DFLASH_ASSIGN_OR_RETURN(const std::filesystem::path absolute_base, AbsolutePath(base_dir));
  DFLASH_ASSIGN_OR_RETURN(const std::filesystem::path working_dir, AbsolutePath("."));
  YamlLocations locations{std::string(source_name)};
  DFLASH_RETURN_IF_ERROR(ApplyConfigOverrides(root, overrides, locations));
  ConfigReader reader(absolute_base, working_dir, locations);
  DFLASH_ASSIGN_OR_RETURN(ServerConfig config, reader.Read(root));
  config.source = std::string(source_name);
  DFLASH_RETURN_IF_ERROR(ValidateServerConfig(config, locations));

  DFLASH_RETURN_IF_ERROR(CheckTlsFiles(config.tls, locations));
  if (!config.auth.api_keys_file.empty()) {
    if (absl::Status keys = ReadApiKeysFile(config.auth.api_keys_file).status(); !keys.ok()) {
      return locations.Error("server.auth.api_keys_file", keys.message());
    }
  }
  return config;
}

absl::StatusOr<ServerConfig> ParseTreeCatching(YAML::Node root,
                                               const std::filesystem::path& base_dir,
                                               absl::string_view source_name,
                                               const std::vector<std::string>& overrides) {
  // yaml-cpp reports misuse by throwing; nothing here should, but no exception may leave.
  try {
    return ParseTree(std::move(root), base_dir, source_name, overrides);
  } catch (const std::exception& error) {
    return absl::InternalError(
        absl::StrCat(source_name, ": reading the configuration failed: ", error.what()));
  }
}

}  // namespace

absl::string_view ModelTaskName(ModelTask task) { return ChoiceName(kTasks, task); }

absl::StatusOr<ServerConfig> ParseServerConfig(absl::string_view yaml,
                                               const std::filesystem::path& base_dir,
                                               absl::string_view source_name,
                                               const std::vector<std::string>& overrides) {
  DFLASH_ASSIGN_OR_RETURN(YAML::Node root, ParseYamlDocument(yaml, source_name));
  return ParseTreeCatching(std::move(root), base_dir, source_name, overrides);
}

absl::StatusOr<ServerConfig> LoadServerConfig(const std::filesystem::path& file,
                                              const std::vector<std::string>& overrides) {
  DFLASH_ASSIGN_OR_RETURN(const std::string text, ReadFile(file, size_t{1} << 20));
  DFLASH_ASSIGN_OR_RETURN(const std::filesystem::path absolute, AbsolutePath(file));
  return ParseServerConfig(text, absolute.parent_path(), file.string(), overrides);
}

absl::StatusOr<ServerConfig> ServerConfigForModel(const std::filesystem::path& model_dir,
                                                  std::string name,
                                                  const std::vector<std::string>& overrides) {
  DFLASH_ASSIGN_OR_RETURN(const std::filesystem::path absolute_dir, AbsolutePath(model_dir));
  if (name.empty()) {
    // "/models/deberta-v3-base/" names the model "deberta-v3-base".
    name = absolute_dir.has_filename() ? absolute_dir.filename().string()
                                       : absolute_dir.parent_path().filename().string();
  }
  YAML::Node entry(YAML::NodeType::Map);
  entry["name"] = name;
  entry["path"] = absolute_dir.string();
  YAML::Node root(YAML::NodeType::Map);
  root["models"].push_back(entry);
  DFLASH_ASSIGN_OR_RETURN(ServerConfig config,
                          ParseTreeCatching(root, ".", "command line", overrides));
  config.source.clear();
  return config;
}

absl::Status ValidateServerConfig(const ServerConfig& config) {
  const YamlLocations locations(config.source.empty() ? std::string("configuration")
                                                      : config.source.string());
  return ValidateServerConfig(config, locations);
}

absl::StatusOr<std::vector<std::string>> ReadApiKeysFile(const std::filesystem::path& file) {
  DFLASH_ASSIGN_OR_RETURN(const std::string text, ReadFile(file, size_t{1} << 20));
  std::vector<std::string> keys;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    if (const std::optional<std::string> problem = ApiKeyProblem(line)) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.string(), ":", line_number, ": ", *problem));
    }
    keys.emplace_back(line);
  }
  if (keys.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.string(),
                     ": holds no API keys; write one key per line (generate one with "
                     "'openssl rand -hex 32')"));
  }
  return keys;
}

}  // namespace dflash::serving
