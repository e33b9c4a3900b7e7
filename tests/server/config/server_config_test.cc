#include "server/config/server_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "tests/server/scratch_directory.h"

namespace dflash::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Line 1 "models:", line 2 "  - name: m", line 3 "    path: /models/m"; `entry_lines` start on
// line 4, column 5, inside the model entry.
std::string ModelYaml(absl::string_view entry_lines = "") {
  std::string yaml = "models:\n  - name: m\n    path: /models/m\n";
  if (!entry_lines.empty()) {
    absl::StrAppend(&yaml, "    ", absl::StrReplaceAll(entry_lines, {{"\n", "\n    "}}), "\n");
  }
  return yaml;
}

// `server_lines` start on line 2, column 3, inside `server:`; a minimal model follows.
std::string ServerYaml(absl::string_view server_lines) {
  return absl::StrCat("server:\n  ", absl::StrReplaceAll(server_lines, {{"\n", "\n  "}}), "\n",
                      ModelYaml());
}

absl::StatusOr<ServerConfig> Parse(absl::string_view yaml,
                                   const std::vector<std::string>& overrides = {}) {
  return ParseServerConfig(yaml, "/etc/dflash", "test.yaml", overrides);
}

// INVALID_ARGUMENT whose message holds every one of `parts`.
void ExpectInvalid(const absl::StatusOr<ServerConfig>& result,
                   std::initializer_list<absl::string_view> parts) {
  ASSERT_FALSE(result.ok()) << "expected an error containing " << *parts.begin();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
  const std::string message(result.status().message());
  for (absl::string_view part : parts) EXPECT_THAT(message, HasSubstr(std::string(part)));
}

// The end-to-end tests' certificates (tests/e2e/certs): the config parses and matches them.
std::filesystem::path TestCertsDir() {
  return std::filesystem::path(DFLASH_SOURCE_DIR) / "tests/e2e/certs";
}

// cert.pem and key.pem (the test server's certificate and key) and ca.pem (the test CA).
void CopyTestCertificates(const ScratchDirectory& dir) {
  const auto copy = [&](absl::string_view from, absl::string_view to) {
    std::filesystem::copy_file(TestCertsDir() / std::string(from), dir.path() / std::string(to),
                               std::filesystem::copy_options::overwrite_existing);
  };
  copy("server.pem", "cert.pem");
  copy("server.key", "key.pem");
  copy("ca.pem", "ca.pem");
}

// PEM armour around bytes that are no DER: passes a look for '-----BEGIN', fails a parse.
constexpr char kGarbageKey[] = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";
constexpr char kGarbageCertificate[] =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
constexpr char kKeyA[] = "0123456789abcdef0123456789abcdef";
constexpr char kKeyB[] = "fedcba9876543210fedcba9876543210";

// --- Defaults, fields, the shipped example -------------------------------------------------------

TEST(ServerConfigTest, MinimalConfigGetsEveryDefault) {
  const absl::StatusOr<ServerConfig> config = Parse(ModelYaml());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, "0.0.0.0:50051");
  EXPECT_EQ(config->metrics_listen, "0.0.0.0:9464");
  EXPECT_EQ(config->http_listen, "");  // The HTTP routes are off unless configured.
  EXPECT_EQ(config->http_idle_timeout, absl::Seconds(30));
  EXPECT_EQ(config->drain_grace_period, absl::Seconds(30));
  EXPECT_EQ(config->max_message_bytes, 16 << 20);
  EXPECT_EQ(config->worker_threads, 0);
  EXPECT_EQ(config->max_inflight_requests, 4096);
  EXPECT_EQ(config->max_concurrent_streams, 256);
  EXPECT_FALSE(config->tls.enabled());
  EXPECT_FALSE(config->auth.enabled());
  EXPECT_EQ(config->auth.header, "authorization");
  EXPECT_EQ(config->logging.level, "info");
  EXPECT_FALSE(config->logging.log_request_content);
  EXPECT_EQ(config->source, "test.yaml");
  ASSERT_EQ(config->models.size(), 1u);
  const ModelEntry& model = config->models[0];
  EXPECT_EQ(model.name, "m");
  EXPECT_EQ(model.path, "/models/m");
  EXPECT_THAT(model.tasks, IsEmpty());
  EXPECT_EQ(model.backend, EngineBackend::kAuto);
  EXPECT_EQ(model.dtype, EngineDtype::kAuto);
  EXPECT_FALSE(model.allow_tf32);  // float32 is strict unless the operator opts in.
  EXPECT_THAT(model.devices, IsEmpty());
  EXPECT_EQ(model.cpu_threads, 0);
  EXPECT_EQ(model.max_input_length, 0);
  EXPECT_TRUE(model.truncate);
  EXPECT_EQ(model.tuning_profile, "auto");
  EXPECT_EQ(model.tuning_mode, TuningMode::kProfile);
  EXPECT_EQ(model.priority_cap, "high");
  EXPECT_EQ(model.tokenizer, "auto");
  EXPECT_EQ(model.batching.max_batch_tokens, 16384);
  EXPECT_EQ(model.batching.max_batch_sequences, 256);
  EXPECT_EQ(model.batching.max_queue_delay, absl::ZeroDuration());
  EXPECT_EQ(model.batching.max_queued_requests, 1024);
  EXPECT_EQ(model.batching.max_queued_sequences, 0);
  EXPECT_EQ(model.batching.max_queued_tokens, 0);
  EXPECT_EQ(model.batching.host_threads, 0);
  EXPECT_EQ(model.limits.max_inputs, 256);
  EXPECT_EQ(model.limits.max_candidate_labels, 64);
  EXPECT_EQ(model.limits.max_sequences, 4096);
  EXPECT_EQ(model.limits.max_text_bytes, 65536);
  EXPECT_EQ(model.limits.max_request_tokens, 262144);
}

TEST(ServerConfigTest, ReadsEveryField) {
  ScratchDirectory dir;
  CopyTestCertificates(dir);
  dir.Write("keys.txt", absl::StrCat("# operators\n\n", kKeyA, "\n"));
  const std::string yaml = absl::StrCat(R"(
server:
  listen: "[::]:7000"
  metrics_listen: 127.0.0.1:7001
  drain_grace_period: 1m30s
  max_message_bytes: 4MiB
  worker_threads: 3
  max_inflight_requests: 0
  max_concurrent_streams: 0
  tls:
    cert_file: cert.pem
    key_file: key.pem
    client_ca_file: ca.pem
  auth:
    api_keys_file: keys.txt
    api_keys: [")",
                                        kKeyB, R"("]
    header: x-api-key
  logging:
    level: debug
    log_request_content: true
models:
  - name: deberta.v3-base_1
    path: /models/base
    task: [classify, zero_shot]
    backend: cuda
    dtype: bfloat16
    devices: [1, 0]
    cpu_threads: 2
    max_input_length: 384
    truncate: false
    tuning_mode: autotune
    tuning_profile: none
    priority_cap: normal
    tokenizer: sentencepiece
    batching:
      max_batch_tokens: 8192
      max_batch_sequences: 64
      max_queue_delay: 2ms
      max_queued_requests: 10
      max_queued_sequences: 1000
      max_queued_tokens: 100000
      host_threads: 6
    limits:
      max_inputs: 8
      max_candidate_labels: 4
      max_sequences: 32
      max_text_bytes: 1KiB
      max_request_tokens: 5000
  - name: second
    path: /models/second
    backend: "null"
)");
  const absl::StatusOr<ServerConfig> config = ParseServerConfig(yaml, dir.path(), "test.yaml", {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, "[::]:7000");
  EXPECT_EQ(config->metrics_listen, "127.0.0.1:7001");
  EXPECT_EQ(config->drain_grace_period, absl::Seconds(90));
  EXPECT_EQ(config->max_message_bytes, 4 << 20);
  EXPECT_EQ(config->worker_threads, 3);
  EXPECT_EQ(config->max_inflight_requests, 0);
  EXPECT_EQ(config->max_concurrent_streams, 0);
  EXPECT_EQ(config->tls.cert_file, (dir.path() / "cert.pem").string());
  EXPECT_EQ(config->tls.key_file, (dir.path() / "key.pem").string());
  EXPECT_EQ(config->tls.client_ca_file, (dir.path() / "ca.pem").string());
  EXPECT_EQ(config->auth.api_keys_file, (dir.path() / "keys.txt").string());
  EXPECT_THAT(config->auth.api_keys, ElementsAre(kKeyB));
  EXPECT_EQ(config->auth.header, "x-api-key");
  EXPECT_EQ(config->logging.level, "debug");
  EXPECT_TRUE(config->logging.log_request_content);
  ASSERT_EQ(config->models.size(), 2u);
  const ModelEntry& model = config->models[0];
  EXPECT_EQ(model.name, "deberta.v3-base_1");
  EXPECT_THAT(model.tasks, ElementsAre(ModelTask::kClassify, ModelTask::kZeroShot));
  EXPECT_EQ(model.backend, EngineBackend::kCuda);
  EXPECT_EQ(model.dtype, EngineDtype::kBfloat16);
  EXPECT_THAT(model.devices, ElementsAre(1, 0));
  EXPECT_EQ(model.cpu_threads, 2);
  EXPECT_EQ(model.max_input_length, 384);
  EXPECT_FALSE(model.truncate);
  EXPECT_EQ(model.tuning_profile, "none");
  EXPECT_EQ(model.tuning_mode, TuningMode::kAutotune);
  EXPECT_EQ(model.priority_cap, "normal");
  EXPECT_EQ(model.tokenizer, "sentencepiece");
  EXPECT_EQ(model.batching.max_batch_tokens, 8192);
  EXPECT_EQ(model.batching.max_batch_sequences, 64);
  EXPECT_EQ(model.batching.max_queue_delay, absl::Milliseconds(2));
  EXPECT_EQ(model.batching.max_queued_requests, 10);
  EXPECT_EQ(model.batching.max_queued_sequences, 1000);
  EXPECT_EQ(model.batching.max_queued_tokens, 100000);
  EXPECT_EQ(model.batching.host_threads, 6);
  EXPECT_EQ(model.limits.max_inputs, 8);
  EXPECT_EQ(model.limits.max_candidate_labels, 4);
  EXPECT_EQ(model.limits.max_sequences, 32);
  EXPECT_EQ(model.limits.max_text_bytes, 1024);
  EXPECT_EQ(model.limits.max_request_tokens, 5000);
  EXPECT_EQ(config->models[1].backend, EngineBackend::kNull);
}

TEST(ServerConfigTest, ShippedExampleParsesAndValidatesWithTheDocumentedDefaults) {
  const std::filesystem::path file =
      std::filesystem::path(DFLASH_SOURCE_DIR) / "config/server.yaml";
  const absl::StatusOr<ServerConfig> config = LoadServerConfig(file);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(ValidateServerConfig(*config).ok());
  ASSERT_EQ(config->models.size(), 1u);
  EXPECT_EQ(config->models[0].name, "demo");
  // Relative to the file: config/../build/demo-model.
  EXPECT_EQ(config->models[0].path,
            (std::filesystem::path(DFLASH_SOURCE_DIR) / "build/demo-model").lexically_normal());
  // The example states the defaults; it must not drift from the struct.
  const ServerConfig defaults;
  EXPECT_EQ(config->listen, defaults.listen);
  EXPECT_EQ(config->metrics_listen, defaults.metrics_listen);
  EXPECT_EQ(config->drain_grace_period, defaults.drain_grace_period);
  EXPECT_EQ(config->max_message_bytes, defaults.max_message_bytes);
  EXPECT_EQ(config->worker_threads, defaults.worker_threads);
  EXPECT_EQ(config->max_inflight_requests, defaults.max_inflight_requests);
  EXPECT_FALSE(config->tls.enabled());
  EXPECT_FALSE(config->auth.enabled());
  EXPECT_EQ(config->auth.header, defaults.auth.header);
  EXPECT_EQ(config->logging.level, defaults.logging.level);
  const ModelEntry model_defaults;
  const ModelEntry& model = config->models[0];
  EXPECT_THAT(model.tasks, IsEmpty());
  EXPECT_EQ(model.backend, model_defaults.backend);
  EXPECT_EQ(model.dtype, model_defaults.dtype);
  EXPECT_EQ(model.allow_tf32, model_defaults.allow_tf32);
  EXPECT_THAT(model.devices, IsEmpty());
  EXPECT_EQ(model.cpu_threads, model_defaults.cpu_threads);
  EXPECT_EQ(model.max_input_length, model_defaults.max_input_length);
  EXPECT_EQ(model.truncate, model_defaults.truncate);
  EXPECT_EQ(model.tuning_profile, model_defaults.tuning_profile);
  EXPECT_EQ(model.priority_cap, model_defaults.priority_cap);
  EXPECT_EQ(model.tokenizer, model_defaults.tokenizer);
  EXPECT_EQ(model.batching.max_batch_tokens, model_defaults.batching.max_batch_tokens);
  EXPECT_EQ(model.batching.max_batch_sequences, model_defaults.batching.max_batch_sequences);
  EXPECT_EQ(model.batching.max_queue_delay, model_defaults.batching.max_queue_delay);
  EXPECT_EQ(model.batching.max_queued_requests, model_defaults.batching.max_queued_requests);
  EXPECT_EQ(model.batching.max_queued_sequences, model_defaults.batching.max_queued_sequences);
  EXPECT_EQ(model.batching.max_queued_tokens, model_defaults.batching.max_queued_tokens);
  EXPECT_EQ(model.batching.host_threads, model_defaults.batching.host_threads);
  EXPECT_EQ(model.limits.max_inputs, model_defaults.limits.max_inputs);
  EXPECT_EQ(model.limits.max_candidate_labels, model_defaults.limits.max_candidate_labels);
  EXPECT_EQ(model.limits.max_sequences, model_defaults.limits.max_sequences);
  EXPECT_EQ(model.limits.max_text_bytes, model_defaults.limits.max_text_bytes);
  EXPECT_EQ(model.limits.max_request_tokens, model_defaults.limits.max_request_tokens);
}

// allow_tf32, the operator's opt-in to TF32 tensor cores for a float32 model.
TEST(ServerConfigTest, AllowTf32IsReadForFloat32Models) {
  const absl::StatusOr<ServerConfig> config = Parse(ModelYaml("dtype: float32\nallow_tf32: true"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->models[0].allow_tf32);
  EXPECT_TRUE(ValidateServerConfig(*config).ok());
}

TEST(ServerConfigTest, TaskTakesOneValueOrAList) {
  absl::StatusOr<ServerConfig> config = Parse(ModelYaml("task: rerank"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->models[0].tasks, ElementsAre(ModelTask::kRerank));
  config = Parse(ModelYaml("task:\n  - embed\n  - classify"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->models[0].tasks, ElementsAre(ModelTask::kEmbed, ModelTask::kClassify));
  config = Parse(ModelYaml("task: auto"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->models[0].tasks, IsEmpty());
  ExpectInvalid(Parse(ModelYaml("task: [auto, embed]")),
                {"test.yaml:4:", "models[0].task[0]", "cannot be combined"});
  ExpectInvalid(Parse(ModelYaml("task: [embed, embed]")), {"models[0].task[1]", "twice"});
  ExpectInvalid(Parse(ModelYaml("task: zero-shot")),
                {"test.yaml:4:5", "models[0].task", "did you mean 'zero_shot'?"});
}

TEST(ServerConfigTest, NullValuesMeanTheDefault) {
  const absl::StatusOr<ServerConfig> config =
      Parse("server:\n  listen:\n  tls:\n  auth: ~\n  logging:\n    level: null\n" +
            ModelYaml("truncate:\nbatching:"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, "0.0.0.0:50051");
  EXPECT_EQ(config->logging.level, "info");
  EXPECT_TRUE(config->models[0].truncate);
  EXPECT_EQ(config->models[0].batching.max_batch_tokens, 16384);
}

TEST(ServerConfigTest, BooleansAcceptYamlSpellings) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, bool>>{{"true", true},
                                                                                {"True", true},
                                                                                {"yes", true},
                                                                                {"on", true},
                                                                                {"false", false},
                                                                                {"FALSE", false},
                                                                                {"no", false},
                                                                                {"off", false}}) {
    const absl::StatusOr<ServerConfig> config = Parse(ModelYaml("truncate: " + text));
    ASSERT_TRUE(config.ok()) << text << ": " << config.status();
    EXPECT_EQ(config->models[0].truncate, expected) << text;
  }
  ExpectInvalid(Parse(ModelYaml("truncate: maybe")),
                {"test.yaml:4:5", "models[0].truncate", "expected true or false, got 'maybe'"});
}

TEST(ServerConfigTest, DurationsUseAbslSyntaxWithAUnit) {
  absl::StatusOr<ServerConfig> config = Parse(ServerYaml("drain_grace_period: 1.5s") +
                                              "    batching:\n      max_queue_delay: 250us\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->drain_grace_period, absl::Milliseconds(1500));
  EXPECT_EQ(config->models[0].batching.max_queue_delay, absl::Microseconds(250));
  config = Parse(ServerYaml("drain_grace_period: 0"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->drain_grace_period, absl::ZeroDuration());

  ExpectInvalid(Parse(ServerYaml("drain_grace_period: 30")),
                {"test.yaml:2:3", "server.drain_grace_period", "a unit is required"});
  ExpectInvalid(Parse(ServerYaml("drain_grace_period: soon")),
                {"server.drain_grace_period", "expected a duration such as '250ms' or '30s'"});
  ExpectInvalid(Parse(ServerYaml("drain_grace_period: inf")), {"finite"});
  ExpectInvalid(Parse(ServerYaml("drain_grace_period: -1s")),
                {"test.yaml:2:3", "server.drain_grace_period", "must not be negative"});
  ExpectInvalid(Parse(ModelYaml("batching:\n  max_queue_delay: -5ms")),
                {"test.yaml:5:", "models[0].batching.max_queue_delay", "must not be negative"});
}

TEST(ServerConfigTest, SizesAreByteCountsOrBinarySuffixes) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, int>>{
           {"1048576", 1 << 20}, {"16MiB", 16 << 20}, {"64 KiB", 64 << 10}, {"1GiB", 1 << 30}}) {
    const absl::StatusOr<ServerConfig> config = Parse(ServerYaml("max_message_bytes: " + text));
    ASSERT_TRUE(config.ok()) << text << ": " << config.status();
    EXPECT_EQ(config->max_message_bytes, expected) << text;
  }
  ExpectInvalid(Parse(ServerYaml("max_message_bytes: 16MB")),
                {"test.yaml:2:3", "server.max_message_bytes", "KiB, MiB or GiB", "'16MB'"});
  ExpectInvalid(Parse(ServerYaml("max_message_bytes: 2GiB")), {"too large"});
  ExpectInvalid(Parse(ServerYaml("max_message_bytes: 0")),
                {"server.max_message_bytes", "must be at least 1"});
  ExpectInvalid(Parse(ModelYaml("limits:\n  max_text_bytes: lots")),
                {"test.yaml:5:", "models[0].limits.max_text_bytes"});
}

TEST(ServerConfigTest, RelativePathsResolveAgainstTheConfigFileDirectory) {
  ScratchDirectory dir;
  std::filesystem::create_directories(dir.path() / "etc");
  dir.Write("etc/server.yaml",
            "models:\n"
            "  - name: a\n    path: ../models/a\n    tuning_profile: profiles/a.json\n"
            "  - name: b\n    path: /abs/b/./c\n    tuning_profile: auto\n");
  const absl::StatusOr<ServerConfig> config = LoadServerConfig(dir.path() / "etc/server.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->source, dir.path() / "etc/server.yaml");
  EXPECT_EQ(config->models[0].path, dir.path() / "models/a");
  EXPECT_EQ(config->models[0].tuning_profile, (dir.path() / "etc/profiles/a.json").string());
  EXPECT_EQ(config->models[1].path, "/abs/b/c");
  EXPECT_EQ(config->models[1].tuning_profile, "auto");
}

TEST(ServerConfigTest, OverriddenPathsResolveAgainstTheWorkingDirectory) {
  const absl::StatusOr<ServerConfig> config =
      Parse(ModelYaml(), {"models.0.path=rel/model", "models.0.tuning_profile=p.json"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->models[0].path, std::filesystem::current_path() / "rel/model");
  EXPECT_EQ(config->models[0].tuning_profile,
            (std::filesystem::current_path() / "p.json").string());
}

// --- Errors: each names the file, line, column and key path --------------------------------------

TEST(ServerConfigErrorsTest, YamlSyntaxErrorNamesLineAndColumn) {
  ExpectInvalid(Parse("server:\n  listen: [1, 2\nmodels: []\n"), {"test.yaml:3:", "invalid YAML"});
  ExpectInvalid(Parse("server:\n\tlisten: x\n"), {"test.yaml:2:", "invalid YAML"});
}

TEST(ServerConfigErrorsTest, UnknownKeySuggestsTheClosestValidKey) {
  ExpectInvalid(Parse(ServerYaml("lisen: 0.0.0.0:1")),
                {"test.yaml:2:3: server.lisen: unknown key 'lisen'; did you mean 'listen'?"});
  ExpectInvalid(
      Parse(ModelYaml("batching:\n  max_batch_token: 5")),
      {"test.yaml:5:7: models[0].batching.max_batch_token", "did you mean 'max_batch_tokens'?"});
  ExpectInvalid(Parse(ModelYaml("tasks: embed")), {"test.yaml:4:5", "did you mean 'task'?"});
}

TEST(ServerConfigErrorsTest, UnknownKeyWithoutCloseMatchListsTheValidKeys) {
  ExpectInvalid(Parse(ServerYaml("tls:\n  certificate: x")),
                {"test.yaml:3:5: server.tls.certificate: unknown key 'certificate'",
                 "valid keys here: cert_file, key_file, client_ca_file"});
}

TEST(ServerConfigErrorsTest, KeyAtTheWrongLevelNamesItsSection) {
  ExpectInvalid(
      Parse(ModelYaml("max_batch_tokens: 4096")),
      {"test.yaml:4:5", "it belongs under 'batching:' (models[0].batching.max_batch_tokens)"});
  ExpectInvalid(Parse("listen: 1.2.3.4:5\n" + ModelYaml()),
                {"test.yaml:1:1", "it belongs under 'server:' (server.listen)"});
  ExpectInvalid(Parse(ServerYaml("cert_file: a.pem")),
                {"test.yaml:2:3", "it belongs under 'tls:' (server.tls.cert_file)"});
}

TEST(ServerConfigErrorsTest, WrongTypesSayWhatWasExpected) {
  ExpectInvalid(
      Parse(ModelYaml("batching:\n  max_batch_tokens: abc")),
      {"test.yaml:5:", "models[0].batching.max_batch_tokens: expected an integer, got 'abc'"});
  ExpectInvalid(Parse(ModelYaml("cpu_threads: '-'")),
                {"models[0].cpu_threads: expected an integer, got '-'"});
  ExpectInvalid(Parse(ModelYaml("cpu_threads: 1.5")),
                {"models[0].cpu_threads", "expected an integer"});
  ExpectInvalid(Parse(ModelYaml("cpu_threads: 99999999999")),
                {"models[0].cpu_threads", "to 2147483647"});
  ExpectInvalid(Parse(ModelYaml("batching:\n  max_queued_tokens: 99999999999999999999")),
                {"models[0].batching.max_queued_tokens", "out of range"});
  // A list element is located at the element itself.
  ExpectInvalid(Parse(ModelYaml("backend: cuda\ndevices: [0, x]")),
                {"test.yaml:5:18: models[0].devices[1]: expected an integer, got 'x'"});
  ExpectInvalid(Parse(ModelYaml("priority_cap: [a, b]")),
                {"models[0].priority_cap: expected a string, got a list"});
  ExpectInvalid(Parse("server: [1]\n" + ModelYaml()), {"server: expected a map"});
  ExpectInvalid(Parse("models:\n  name: m\n  path: /m\n"),
                {"test.yaml:1:1: models: expected a list of model entries"});
  ExpectInvalid(Parse("- a\n- b\n"), {"test.yaml:1:1: expected a map"});
  ExpectInvalid(Parse(ModelYaml("batching: 5")), {"models[0].batching: expected a map"});
}

TEST(ServerConfigErrorsTest, OutOfRangeValuesNameTheKeyAndHowToFixThem) {
  struct Case {
    std::string yaml;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {ModelYaml("batching:\n  max_batch_tokens: 0"),
       {"test.yaml:5:7: models[0].batching.max_batch_tokens: must be at least 1, got 0"}},
      {ModelYaml("batching:\n  max_batch_sequences: 0"),
       {"test.yaml:5:7", "models[0].batching.max_batch_sequences", "at least 1"}},
      {ModelYaml("max_input_length: 1024\nbatching:\n  max_batch_tokens: 512"),
       {"test.yaml:6:7", "models[0].batching.max_batch_tokens", "less than max_input_length",
        "raise max_batch_tokens or lower max_input_length"}},
      {ModelYaml("batching:\n  max_queued_requests: -1"),
       {"models[0].batching.max_queued_requests", "must be 0 (no limit) or more"}},
      {ModelYaml("batching:\n  host_threads: -2"),
       {"test.yaml:5:7", "models[0].batching.host_threads", "must be 0 (two per engine) or more"}},
      {ModelYaml("limits:\n  max_inputs: 0"), {"test.yaml:5:7", "models[0].limits.max_inputs"}},
      {ModelYaml("limits:\n  max_candidate_labels: -3"), {"models[0].limits.max_candidate_labels"}},
      {ModelYaml("limits:\n  max_sequences: 0"), {"models[0].limits.max_sequences"}},
      {ModelYaml("limits:\n  max_request_tokens: -1"),
       {"test.yaml:5:7", "models[0].limits.max_request_tokens", "must be 0 (no limit) or more"}},
      {ModelYaml("cpu_threads: -1"), {"test.yaml:4:5", "models[0].cpu_threads", "all cores"}},
      {ModelYaml("max_input_length: -1"), {"models[0].max_input_length"}},
      {ModelYaml("priority_cap: urgent"),
       {"test.yaml:4:5", "models[0].priority_cap", "expected one of low, normal, high"}},
      {ModelYaml("priority_cap: nromal"), {"did you mean 'normal'?"}},
      {ModelYaml("tokenizer: spm"),
       {"test.yaml:4:5", "models[0].tokenizer",
        "expected one of auto, tokenizer_json, sentencepiece"}},
      {ModelYaml("backend: gpu"),
       {"test.yaml:4:5", "models[0].backend", "expected one of auto, cpu, cuda, null",
        "did you mean 'cpu'?"}},
      {ModelYaml("backend: null"), {"test.yaml:4:5", "models[0].backend", "in quotes"}},
      {ModelYaml("dtype: fp16"), {"models[0].dtype", "float32, float16, bfloat16"}},
      {ModelYaml("backend: cpu\ndtype: float16"),
       {"test.yaml:5:5", "models[0].dtype", "computes in float32"}},
      {ModelYaml("backend: cpu\ndevices: [0]"),
       {"test.yaml:5:5", "models[0].devices", "backend is cpu"}},
      {ModelYaml("dtype: float16\nallow_tf32: true"),
       {"test.yaml:5:5", "models[0].allow_tf32", "dtype float32 only, not float16"}},
      {ModelYaml("allow_tf32: true"), {"models[0].allow_tf32", "dtype float32 only, not auto"}},
      {ModelYaml("devices: [0, -1]"), {"test.yaml:4:18", "models[0].devices[1]", "start at 0"}},
      {ModelYaml("devices: [1, 1]"), {"models[0].devices[1]", "listed twice"}},
      {ModelYaml("tuning_profile: ''"), {"models[0].tuning_profile", "'auto', 'none'"}},
      {ModelYaml("tuning_mode: fastest"),
       {"models[0].tuning_mode", "heuristic, profile, profile_only, autotune"}},
      {"models:\n  - name: my model\n    path: /m\n",
       {"test.yaml:2:5", "models[0].name", "letters, digits"}},
      {"models:\n  - path: /m\n", {"test.yaml:2:5", "models[0].name: is required"}},
      {"models:\n  - name: m\n", {"test.yaml:2:5", "models[0].path: is required"}},
      {ServerYaml("listen: 50051"),
       {"test.yaml:2:3", "server.listen", "':<port>' part is missing"}},
      {ServerYaml("listen: ':50051'"), {"server.listen", "host is missing"}},
      {ServerYaml("listen: ::1:50051"), {"server.listen", "in brackets"}},
      {ServerYaml("listen: localhost:70000"), {"server.listen", "0 to 65535"}},
      {ServerYaml("listen: 'localhost:http'"), {"server.listen", "0 to 65535"}},
      {ServerYaml("metrics_listen: 0.0.0.0:50051"),
       {"test.yaml:2:3", "server.metrics_listen", "uses port 50051 of server.listen"}},
      {ServerYaml("http_listen: 0.0.0.0:9464"),
       {"test.yaml:2:3", "server.http_listen", "uses port 9464 of 0.0.0.0:9464"}},
      {ServerYaml("http_listen: 8080"), {"server.http_listen", "':<port>' part is missing"}},
      {ServerYaml("http_idle_timeout: 0s"), {"server.http_idle_timeout", "at least 1s"}},
      {ServerYaml("worker_threads: -2"), {"server.worker_threads", "one per core"}},
      {ServerYaml("max_inflight_requests: -1"), {"server.max_inflight_requests", "no limit"}},
      {ServerYaml("max_concurrent_streams: -1"), {"server.max_concurrent_streams", "no limit"}},
      {ServerYaml("logging:\n  level: verbose"),
       {"test.yaml:3:5", "server.logging.level", "trace, debug, info, warn, error, off"}},
      {ServerYaml("logging:\n  level: INFO"), {"did you mean 'info'?"}},
      {ServerYaml("auth:\n  header: Authorization"),
       {"test.yaml:3:5", "server.auth.header", "lowercase"}},
      {ServerYaml("auth:\n  header: key-bin"), {"server.auth.header", "-bin"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    const absl::StatusOr<ServerConfig> config = Parse(c.yaml);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(config.status().message());
    for (const std::string& part : c.expected) EXPECT_THAT(message, HasSubstr(part));
  }
}

TEST(ServerConfigErrorsTest, DuplicateYamlKeysAreRejected) {
  // yaml-cpp keeps both and lookups see the first: the second value would be lost silently.
  ExpectInvalid(Parse(ServerYaml("listen: 1.2.3.4:1\nlisten: 1.2.3.4:2")),
                {"test.yaml:3:3: server.listen: duplicate key 'listen' (first at test.yaml:2:3)"});
  ExpectInvalid(Parse(ModelYaml() + "models: []\n"), {"test.yaml:4:1", "duplicate key 'models'"});
  ExpectInvalid(Parse(ModelYaml("batching:\n  max_batch_tokens: 1\n  max_batch_tokens: 2")),
                {"test.yaml:6:7", "models[0].batching.max_batch_tokens", "duplicate key"});
}

TEST(ServerConfigErrorsTest, DuplicateModelNamesAreRejected) {
  ExpectInvalid(Parse("models:\n  - name: m\n    path: /a\n  - name: m\n    path: /b\n"),
                {"test.yaml:4:5: models[1].name", "already the name of models[0]", "unique"});
}

TEST(ServerConfigErrorsTest, NoModelsIsAnError) {
  ExpectInvalid(Parse(""), {"test.yaml:1:1: models: no models to serve"});
  ExpectInvalid(Parse("server:\n  listen: 1.2.3.4:5\n"), {"test.yaml:1:1", "no models to serve"});
  ExpectInvalid(Parse("models: []\n"), {"test.yaml:1:1: models: no models to serve"});
}

TEST(ServerConfigErrorsTest, SeveralYamlDocumentsAreRejected) {
  ExpectInvalid(Parse(ModelYaml() + "---\n" + ModelYaml()), {"test.yaml", "2 YAML documents"});
}

TEST(ServerConfigErrorsTest, TlsNeedsCertificateAndKeyTogether) {
  ScratchDirectory dir;
  CopyTestCertificates(dir);
  dir.Write("plain.txt", "not a certificate\n");
  const auto parse = [&](absl::string_view tls_lines) {
    return ParseServerConfig(
        ServerYaml(absl::StrCat("tls:\n  ", absl::StrReplaceAll(tls_lines, {{"\n", "\n  "}}))),
        dir.path(), "test.yaml", {});
  };
  ASSERT_TRUE(parse("cert_file: cert.pem\nkey_file: key.pem").ok());
  ExpectInvalid(parse("cert_file: cert.pem"), {"test.yaml:3:5: server.tls.cert_file",
                                               "server.tls.key_file is not", "or neither"});
  ExpectInvalid(parse("key_file: key.pem"),
                {"test.yaml:3:5: server.tls.key_file", "cert_file is not"});
  ExpectInvalid(parse("client_ca_file: cert.pem"),
                {"test.yaml:3:5: server.tls.client_ca_file", "requires server TLS"});
  ExpectInvalid(parse("cert_file: missing.pem\nkey_file: key.pem"),
                {"test.yaml:3:5: server.tls.cert_file", "cannot read", "missing.pem"});
  ExpectInvalid(parse("cert_file: cert.pem\nkey_file: plain.txt"),
                {"test.yaml:4:5: server.tls.key_file", "not a PEM file"});
}

// gRPC parses these files only when it starts listening, after every model loaded, and reports a
// bad one as failing to listen: loading the configuration parses them and names the bad file.
TEST(ServerConfigErrorsTest, TlsCertificateAndKeyAreParsedAndMatchedAtLoad) {
  ScratchDirectory dir;
  CopyTestCertificates(dir);
  std::filesystem::copy_file(TestCertsDir() / "client.key", dir.path() / "client.key");
  dir.Write("garbage.key", kGarbageKey);
  dir.Write("garbage.pem", kGarbageCertificate);
  const auto parse = [&](absl::string_view tls_lines) {
    return ParseServerConfig(
        ServerYaml(absl::StrCat("tls:\n  ", absl::StrReplaceAll(tls_lines, {{"\n", "\n  "}}))),
        dir.path(), "test.yaml", {});
  };
  const absl::StatusOr<ServerConfig> good =
      parse("cert_file: cert.pem\nkey_file: key.pem\nclient_ca_file: ca.pem");
  ASSERT_TRUE(good.ok()) << good.status();

  ExpectInvalid(parse("cert_file: cert.pem\nkey_file: garbage.key"),
                {"test.yaml:4:5: server.tls.key_file", "garbage.key", "no private key"});
  ExpectInvalid(parse("cert_file: cert.pem\nkey_file: client.key"),
                {"test.yaml:4:5: server.tls.key_file", "client.key",
                 "is not the private key of the certificate in", "cert.pem"});
  ExpectInvalid(parse("cert_file: cert.pem\nkey_file: missing.key"),
                {"test.yaml:4:5: server.tls.key_file", "cannot read", "missing.key"});
  ExpectInvalid(parse("cert_file: garbage.pem\nkey_file: key.pem"),
                {"test.yaml:3:5: server.tls.cert_file", "garbage.pem", "no PEM certificate"});
  ExpectInvalid(parse("cert_file: key.pem\nkey_file: key.pem"),
                {"test.yaml:3:5: server.tls.cert_file", "no PEM certificate"});
  ExpectInvalid(parse("cert_file: cert.pem\nkey_file: key.pem\nclient_ca_file: garbage.pem"),
                {"test.yaml:5:5: server.tls.client_ca_file", "garbage.pem", "no PEM certificate"});
  ExpectInvalid(parse("cert_file: cert.pem\nkey_file: key.pem\nclient_ca_file: missing.pem"),
                {"test.yaml:5:5: server.tls.client_ca_file", "cannot read", "missing.pem"});
}

TEST(ServerConfigTest, MaxMetadataBytesIsReadAndRangeChecked) {
  const absl::StatusOr<ServerConfig> defaults = Parse(ModelYaml());
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->max_metadata_bytes, 8 << 10);
  const absl::StatusOr<ServerConfig> config = Parse(ServerYaml("max_metadata_bytes: 64KiB"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_metadata_bytes, 64 << 10);
  const absl::StatusOr<ServerConfig> overridden =
      Parse(ModelYaml(), {"server.max_metadata_bytes=1MiB"});
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_EQ(overridden->max_metadata_bytes, 1 << 20);
  ExpectInvalid(Parse(ServerYaml("max_metadata_bytes: 4KiB")),
                {"test.yaml:2:3", "server.max_metadata_bytes", "between 8192", "got 4096"});
  ExpectInvalid(Parse(ServerYaml("max_metadata_bytes: 2MiB")),
                {"server.max_metadata_bytes", "1048576 (1MiB)"});
}

TEST(ServerConfigErrorsTest, ApiKeysFileIsReadAndCheckedAtLoad) {
  ScratchDirectory dir;
  dir.Write("good.txt", absl::StrCat("# comment\n\n  ", kKeyA, "  \n", kKeyB, "\r\n"));
  dir.Write("comments.txt", "# nothing here\n\n");
  dir.Write("weak.txt", absl::StrCat(kKeyA, "\n# next one is weak\nhunter2\n"));
  const auto parse = [&](absl::string_view file) {
    return ParseServerConfig(ServerYaml(absl::StrCat("auth:\n  api_keys_file: ", file)), dir.path(),
                             "test.yaml", {});
  };
  const absl::StatusOr<ServerConfig> config = parse("good.txt");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->auth.enabled());
  const absl::StatusOr<std::vector<std::string>> keys = ReadApiKeysFile(config->auth.api_keys_file);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, ElementsAre(kKeyA, kKeyB));

  ExpectInvalid(parse("missing.txt"),
                {"test.yaml:3:5: server.auth.api_keys_file", "missing.txt", "no such file"});
  ExpectInvalid(parse("comments.txt"), {"test.yaml:3:5", "holds no API keys", "openssl rand"});
  const absl::StatusOr<ServerConfig> weak = parse("weak.txt");
  ExpectInvalid(weak, {"test.yaml:3:5", "weak.txt:3:", "7 characters", "at least 16"});
  EXPECT_THAT(weak.status().message(), Not(HasSubstr("hunter2")));
}

TEST(ServerConfigErrorsTest, WeakInlineApiKeyIsRejectedWithoutEchoingIt) {
  const absl::StatusOr<ServerConfig> config =
      Parse(ServerYaml(absl::StrCat("auth:\n  api_keys:\n    - ", kKeyA, "\n    - hunter2")));
  ExpectInvalid(config, {"test.yaml:5:9: server.auth.api_keys[1]", "at least 16"});
  EXPECT_THAT(config.status().message(), Not(HasSubstr("hunter2")));
  ExpectInvalid(Parse(ServerYaml("auth:\n  api_keys: ['0123456789 abcdef0123']")),
                {"server.auth.api_keys[0]", "without spaces"});
}

TEST(LoadServerConfigTest, UnreadableFileKeepsItsErrorCode) {
  const absl::StatusOr<ServerConfig> config = LoadServerConfig("/nonexistent/dflash/server.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("/nonexistent/dflash/server.yaml"));
}

TEST(LoadServerConfigTest, ErrorsNameTheFileAsGiven) {
  ScratchDirectory dir;
  dir.Write("server.yaml", ModelYaml("batching:\n  max_batch_tokens: -4"));
  const std::filesystem::path file = dir.path() / "server.yaml";
  ExpectInvalid(LoadServerConfig(file),
                {absl::StrCat(file.string(), ":5:7: models[0].batching.max_batch_tokens")});
}

// --- Overrides -----------------------------------------------------------------------------------

TEST(ServerConfigOverridesTest, SetValuesAtAnyDepth) {
  const absl::StatusOr<ServerConfig> config =
      Parse(ModelYaml("backend: cuda"),
            {"server.listen=127.0.0.1:0", "server.logging.level=debug",
             "models.0.batching.max_batch_tokens=4096", "models.m.devices=[0, 1]",
             "models.m.task=embed", "models[0].truncate=false", " server.worker_threads = 2"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, "127.0.0.1:0");
  EXPECT_EQ(config->logging.level, "debug");
  EXPECT_EQ(config->worker_threads, 2);
  const ModelEntry& model = config->models[0];
  EXPECT_EQ(model.batching.max_batch_tokens, 4096);
  EXPECT_THAT(model.devices, ElementsAre(0, 1));
  EXPECT_THAT(model.tasks, ElementsAre(ModelTask::kEmbed));
  EXPECT_FALSE(model.truncate);
  // Untouched values keep what the file says.
  EXPECT_EQ(model.backend, EngineBackend::kCuda);
}

TEST(ServerConfigOverridesTest, LaterOverridesWinAndReplaceFileValues) {
  const absl::StatusOr<ServerConfig> config = Parse(
      ServerYaml("listen: 1.1.1.1:1"), {"server.listen=2.2.2.2:2", "server.listen=3.3.3.3:3"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, "3.3.3.3:3");
}

TEST(ServerConfigOverridesTest, SelectModelsByNameEvenWithDots) {
  const absl::StatusOr<ServerConfig> config = Parse(
      "models:\n  - name: deberta.v3\n    path: /a\n  - name: deberta.v3.large\n    path: /b\n",
      {"models.deberta.v3.large.backend=cpu", "models.deberta.v3.backend=cuda"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->models[0].backend, EngineBackend::kCuda);
  EXPECT_EQ(config->models[1].backend, EngineBackend::kCpu);
}

TEST(ServerConfigOverridesTest, IndexOnePastTheEndAppendsAModel) {
  const absl::StatusOr<ServerConfig> config =
      Parse(ModelYaml(), {"models.1.name=second", "models.1.path=/models/second"});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->models.size(), 2u);
  EXPECT_EQ(config->models[1].name, "second");
  EXPECT_EQ(config->models[1].path, "/models/second");
}

TEST(ServerConfigTest, HttpKeys) {
  const absl::StatusOr<ServerConfig> config =
      Parse(ServerYaml("http_listen: 127.0.0.1:8080\nhttp_idle_timeout: 5s"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->http_listen, "127.0.0.1:8080");
  EXPECT_EQ(config->http_idle_timeout, absl::Seconds(5));
  EXPECT_THAT(DescribeServerConfig(*config), HasSubstr("HTTP routes 127.0.0.1:8080"));
}

TEST(ServerConfigOverridesTest, EmptyValueIsTheEmptyStringAndNullIsTheWord) {
  const absl::StatusOr<ServerConfig> config =
      Parse(ModelYaml(), {"server.metrics_listen=", "models.0.backend=null"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->metrics_listen, "");
  EXPECT_EQ(config->models[0].backend, EngineBackend::kNull);
  const absl::StatusOr<ServerConfig> quoted = Parse(ModelYaml(), {"server.metrics_listen=\"\""});
  ASSERT_TRUE(quoted.ok()) << quoted.status();
  EXPECT_EQ(quoted->metrics_listen, "");
}

TEST(ServerConfigOverridesTest, ErrorsNameTheOverride) {
  ExpectInvalid(Parse(ModelYaml(), {"server.lisen=1.2.3.4:5"}),
                {"override 'server.lisen=1.2.3.4:5': server.lisen: unknown key 'lisen'",
                 "did you mean 'listen'?"});
  ExpectInvalid(Parse(ModelYaml(), {"serve.listen=1.2.3.4:5"}),
                {"override 'serve.listen=1.2.3.4:5': serve: unknown key 'serve'"});
  ExpectInvalid(Parse(ModelYaml(), {"models.0.batching.max_batch_tokens=many"}),
                {"override 'models.0.batching.max_batch_tokens=many': "
                 "models[0].batching.max_batch_tokens: expected an integer, got 'many'"});
  ExpectInvalid(Parse(ModelYaml(), {"models.m.batching.max_batch_tokens=0"}),
                {"override 'models.m.batching.max_batch_tokens=0'", "at least 1"});
  ExpectInvalid(Parse(ModelYaml(), {"server.tls.cert_file=/x.pem"}),
                {"override 'server.tls.cert_file=/x.pem': server.tls.cert_file",
                 "server.tls.key_file is not"});
  ExpectInvalid(Parse(ModelYaml(), {"server.listen"}),
                {"override 'server.listen'", "expected <dotted.path>=<value>"});
  ExpectInvalid(Parse(ModelYaml(), {"=5"}), {"override '=5'"});
  ExpectInvalid(Parse(ModelYaml(), {"server..listen=x"}), {"empty segment"});
  ExpectInvalid(Parse(ModelYaml(), {"models.5.backend=cpu"}),
                {"override 'models.5.backend=cpu'", "models has 1 entry"});
  ExpectInvalid(Parse(ModelYaml(), {"models.nope.backend=cpu"}),
                {"override 'models.nope.backend=cpu'", "no entry named 'nope'", "(m)"});
  ExpectInvalid(Parse(ModelYaml(), {"models.0.name.x=1"}),
                {"override 'models.0.name.x=1'", "models[0].name is a single value"});
  ExpectInvalid(Parse(ModelYaml(), {"server.listen=[1"}),
                {"override 'server.listen=[1'", "not valid YAML"});
  // An override that may hold API keys is never quoted with its value.
  const absl::StatusOr<ServerConfig> weak = Parse(ModelYaml(), {"server.auth.api_keys=[hunter2]"});
  ExpectInvalid(weak, {"override 'server.auth.api_keys=<hidden>': server.auth.api_keys[0]"});
  EXPECT_THAT(std::string(weak.status().message()), Not(HasSubstr("hunter2")));
  ExpectInvalid(Parse(ModelYaml(), {"server.auth={api_keys: [hunter2]}"}),
                {"override 'server.auth=<hidden>'"});
  ExpectInvalid(Parse(ModelYaml(), {"server.auth.api_keys_file=/no/such/keys"}),
                {"override 'server.auth.api_keys_file=/no/such/keys'"});
  ExpectInvalid(Parse(ModelYaml(), {"server.listen=[1, 2]"}),
                {"override 'server.listen=[1, 2]': server.listen: expected a string, got a list"});
}

// --- One model without a file; validation after changes; the summary -----------------------------

TEST(ServerConfigForModelTest, ServesOneDirectoryWithDefaults) {
  absl::StatusOr<ServerConfig> config = ServerConfigForModel("checkpoints/deberta-v3-base/", "");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->models.size(), 1u);
  EXPECT_EQ(config->models[0].name, "deberta-v3-base");
  EXPECT_EQ(config->models[0].path,
            (std::filesystem::current_path() / "checkpoints/deberta-v3-base/").lexically_normal());
  EXPECT_EQ(config->listen, "0.0.0.0:50051");
  EXPECT_TRUE(config->source.empty());

  config =
      ServerConfigForModel("/m", "demo", {"server.listen=127.0.0.1:0", "models.demo.backend=cpu"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->models[0].name, "demo");
  EXPECT_EQ(config->listen, "127.0.0.1:0");
  EXPECT_EQ(config->models[0].backend, EngineBackend::kCpu);

  ExpectInvalid(ServerConfigForModel("/m", "bad name"), {"models[0].name", "letters, digits"});
  ExpectInvalid(ServerConfigForModel("/m", "demo", {"models.0.backend=gpu"}),
                {"override 'models.0.backend=gpu'", "did you mean 'cpu'?"});
}

TEST(ValidateServerConfigTest, ChecksFieldsChangedAfterLoading) {
  absl::StatusOr<ServerConfig> config = Parse(ModelYaml());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(ValidateServerConfig(*config).ok());

  ServerConfig changed = *config;
  changed.models[0].batching.max_batch_tokens = 0;
  absl::Status status = ValidateServerConfig(changed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("test.yaml: models[0].batching.max_batch_tokens: must be at least 1"));

  changed = *config;
  changed.tls.key_file = "/k.pem";
  EXPECT_THAT(ValidateServerConfig(changed).message(), HasSubstr("server.tls.key_file"));

  changed = *config;
  changed.models.push_back(changed.models[0]);
  EXPECT_THAT(ValidateServerConfig(changed).message(), HasSubstr("models[1].name"));

  changed = *config;
  changed.models.clear();
  EXPECT_THAT(ValidateServerConfig(changed).message(), HasSubstr("no models"));
}

TEST(DescribeServerConfigTest, SummarizesWithoutKeyMaterial) {
  ScratchDirectory dir;
  dir.Write("keys.txt", absl::StrCat(kKeyA, "\n"));
  const absl::StatusOr<ServerConfig> config = ParseServerConfig(
      ServerYaml(absl::StrCat("auth:\n  api_keys_file: keys.txt\n  api_keys: [", kKeyB, "]")),
      dir.path(), "test.yaml", {});
  ASSERT_TRUE(config.ok()) << config.status();
  const std::string text = DescribeServerConfig(*config);
  EXPECT_THAT(text, Not(HasSubstr(kKeyA)));
  EXPECT_THAT(text, Not(HasSubstr(kKeyB)));
  EXPECT_THAT(text, HasSubstr("test.yaml"));
  EXPECT_THAT(text, HasSubstr("0.0.0.0:50051"));
  EXPECT_THAT(text, HasSubstr((dir.path() / "keys.txt").string()));
  EXPECT_THAT(text, HasSubstr("1 inline key"));
  EXPECT_THAT(text, HasSubstr("model 'm': /models/m"));
  EXPECT_THAT(text, HasSubstr("16 MiB"));
  EXPECT_THAT(text, HasSubstr("16384 tokens / 256 sequences per batch"));
  EXPECT_THAT(text, HasSubstr("at most 262144 tokens"));
  // One screen.
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 25);
}

}  // namespace
}  // namespace dflash::serving
