// DescribeServerConfig: the startup log's summary of a ServerConfig.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/config/server_config.h"

namespace dflash::serving {
namespace {

std::string Bytes(int64_t bytes) {
  for (const auto& [unit, size] : {std::pair<const char*, int64_t>{"GiB", int64_t{1} << 30},
                                   {"MiB", int64_t{1} << 20},
                                   {"KiB", int64_t{1} << 10}}) {
    if (bytes >= size && bytes % size == 0) return absl::StrCat(bytes / size, " ", unit);
  }
  return absl::StrCat(bytes, " bytes");
}

std::string Limit(int64_t count, absl::string_view what) {
  return count == 0 ? absl::StrCat("unlimited ", what) : absl::StrCat("at most ", count, " ", what);
}

std::string DescribeTls(const TlsConfig& tls) {
  if (!tls.enabled()) return "TLS off (plaintext)";
  std::string text = absl::StrCat("TLS on (cert ", tls.cert_file, ", key ", tls.key_file);
  if (!tls.client_ca_file.empty()) {
    absl::StrAppend(&text, "; mutual TLS, client certificates signed by ", tls.client_ca_file);
  }
  return absl::StrCat(text, ")");
}

// Counts and file names only: key values must never reach a log.
std::string DescribeAuth(const AuthConfig& auth) {
  if (!auth.enabled()) return "auth off (no API keys)";
  std::vector<std::string> sources;
  if (!auth.api_keys_file.empty())
    sources.push_back(absl::StrCat("keys file ", auth.api_keys_file));
  if (!auth.api_keys.empty()) {
    sources.push_back(
        absl::StrCat(auth.api_keys.size(), " inline key", auth.api_keys.size() == 1 ? "" : "s"));
  }
  return absl::StrCat("API keys required (", absl::StrJoin(sources, " + "), ", metadata '",
                      auth.header, "')");
}

std::string DescribeModel(const ModelEntry& model) {
  std::vector<absl::string_view> tasks;
  for (ModelTask task : model.tasks) tasks.push_back(ModelTaskName(task));
  std::string text = absl::StrCat("model '", model.name, "': ", model.path.string(), "\n");
  absl::StrAppend(
      &text, "    tasks ", tasks.empty() ? "from the checkpoint" : absl::StrJoin(tasks, ", "),
      ", backend ", EngineBackendName(model.backend), ", dtype ", EngineDtypeName(model.dtype),
      model.allow_tf32 ? " (TF32 allowed)" : "", ", devices ",
      model.devices.empty() ? "[0]" : absl::StrCat("[", absl::StrJoin(model.devices, ", "), "]"),
      ", CPU threads ", model.cpu_threads == 0 ? "all cores" : absl::StrCat(model.cpu_threads),
      "\n");
  absl::StrAppend(&text, "    max input length ",
                  model.max_input_length == 0 ? "from the model"
                                              : absl::StrCat(model.max_input_length, " tokens"),
                  ", over-long inputs ", model.truncate ? "truncated" : "rejected",
                  " by default, tuning ", TuningModeName(model.tuning_mode), " (profile ",
                  model.tuning_profile, ")", ", priority cap ", model.priority_cap, ", tokenizer ",
                  model.tokenizer, "\n");
  const BatchingConfig& b = model.batching;
  absl::StrAppend(&text, "    batching: ", b.max_batch_tokens, " tokens / ", b.max_batch_sequences,
                  " sequences per batch, queue delay ", absl::FormatDuration(b.max_queue_delay),
                  ", queue: ", Limit(b.max_queued_requests, "requests"), ", ",
                  Limit(b.max_queued_sequences, "sequences"), ", ",
                  Limit(b.max_queued_tokens, "tokens"), "\n");
  const RequestLimitsConfig& l = model.limits;
  absl::StrAppend(&text, "    per request: ", l.max_inputs, " inputs, ", l.max_candidate_labels,
                  " candidate labels, ", l.max_sequences, " sequences, ",
                  Limit(l.max_request_tokens, "tokens"), ", ", Bytes(l.max_text_bytes),
                  " per text\n");
  return text;
}

}  // namespace

std::string DescribeServerConfig(const ServerConfig& config) {
  std::string text =
      absl::StrCat("configuration from ",
                   config.source.empty() ? "the command line" : config.source.string(), "\n");
  absl::StrAppend(&text, "  listen ", config.listen, ", ", DescribeTls(config.tls), "\n");
  absl::StrAppend(&text, "  ", DescribeAuth(config.auth), "\n");
  absl::StrAppend(&text, "  metrics ",
                  config.metrics_listen.empty() ? "off" : config.metrics_listen, ", drain grace ",
                  absl::FormatDuration(config.drain_grace_period), ", max message ",
                  Bytes(config.max_message_bytes), ", max metadata ",
                  Bytes(config.max_metadata_bytes), ", worker threads ",
                  config.worker_threads == 0 ? "one per core" : absl::StrCat(config.worker_threads),
                  ", ", Limit(config.max_inflight_requests, "requests in flight"), ", ",
                  Limit(config.max_concurrent_streams, "gRPC calls per connection"), "\n");
  absl::StrAppend(&text, "  HTTP routes ",
                  config.http_listen.empty()
                      ? std::string("off")
                      : absl::StrCat(config.http_listen, ", idle timeout ",
                                     absl::FormatDuration(config.http_idle_timeout)),
                  "\n");
  absl::StrAppend(&text, "  log level ", config.logging.level, ", request content ",
                  config.logging.log_request_content ? "logged" : "not logged", "\n");
  for (const ModelEntry& model : config.models) absl::StrAppend(&text, "  ", DescribeModel(model));
  return text;
}

}  // namespace dflash::serving
