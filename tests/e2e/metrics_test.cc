// End-to-end metrics: after a known set of calls, the /metrics endpoint counts exactly those calls
// (by RPC, model and code), the tokens the responses reported and the batches the engine ran; the
// official Python parser (python3-prometheus-client) reads the whole exposition and agrees.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/e2e_harness.h"

namespace dflash::e2e {
namespace {

using Labels = std::map<std::string, std::string>;

class MetricsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<TinyModels>> models = WriteTinyModels();
    ASSERT_TRUE(models.ok()) << models.status();
    models_ = std::move(*models).release();
    control_ = new std::shared_ptr<EngineControl>(std::make_shared<EngineControl>());
    absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(
        TestServerConfig({TestModelEntry("demo", DemoModelDir(), /*max_batch_tokens=*/128),
                          TestModelEntry("embed", models_->embed)},
                         /*metrics_endpoint=*/true),
        GatedLoader({{"demo", *control_}}));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
    batches_at_start_ = (*control_)->batches();  // The warm-up batch is not a served batch.
    sequences_at_start_ = (*control_)->sequences();
    demo_tokens_ = 0;  // Counted afresh for this suite's server (--gtest_repeat starts another).
    embed_tokens_ = 0;
    MakeCalls();
  }

  static void TearDownTestSuite() {
    delete server_;
    delete control_;
    delete models_;
    // --gtest_repeat sets the suite up again: nothing may point at what was just deleted.
    server_ = nullptr;
    control_ = nullptr;
    models_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(server_, nullptr) << "the server did not start"; }

  // The calls whose traces the tests look for, and what their responses reported.
  static void MakeCalls() {
    v1::InferenceService::Stub& stub = server_->stub();
    for (int i = 0; i < 3; ++i) {  // Classify: 3 OK.
      v1::ClassifyRequest request;
      request.set_model("demo");
      for (int k = 0; k <= i; ++k) request.add_inputs()->set_text(absl::StrCat("input ", i, k));
      v1::ClassifyResponse response;
      ASSERT_TRUE(stub.Classify(NewContext().get(), request, &response).ok());
      demo_tokens_ += response.metadata().tokens();
    }
    {  // Classify: 1 INVALID_ARGUMENT, 1 NOT_FOUND (no model resolved: model label "").
      v1::ClassifyRequest empty;
      empty.set_model("demo");
      v1::ClassifyResponse response;
      ASSERT_EQ(stub.Classify(NewContext().get(), empty, &response).error_code(),
                grpc::StatusCode::INVALID_ARGUMENT);
      v1::ClassifyRequest unknown;
      unknown.set_model("no-such-model");
      unknown.add_inputs()->set_text("x");
      ASSERT_EQ(stub.Classify(NewContext().get(), unknown, &response).error_code(),
                grpc::StatusCode::NOT_FOUND);
    }
    for (int i = 0; i < 2; ++i) {  // ZeroShot: 2 OK.
      v1::ZeroShotRequest request;
      request.set_model("demo");
      request.add_texts(absl::StrCat("zero-shot text ", i));
      request.add_candidate_labels("one");
      request.add_candidate_labels("two");
      v1::ZeroShotResponse response;
      ASSERT_TRUE(stub.ZeroShot(NewContext().get(), request, &response).ok());
      demo_tokens_ += response.metadata().tokens();
    }
    for (int i = 0; i < 2; ++i) {  // Tokenize: 2 OK (computes nothing: no model tokens).
      v1::TokenizeRequest request;
      request.set_model("demo");
      request.add_inputs()->set_text("tokenize me");
      v1::TokenizeResponse response;
      ASSERT_TRUE(stub.Tokenize(NewContext().get(), request, &response).ok());
    }
    {  // Embed: 1 OK on the other model.
      v1::EmbedRequest request;
      request.set_model("embed");
      request.add_inputs("embed me");
      request.add_inputs("and me");
      v1::EmbedResponse response;
      ASSERT_TRUE(stub.Embed(NewContext().get(), request, &response).ok());
      embed_tokens_ += response.metadata().tokens();
    }
    {  // ClassifyStream: 2 OK and 1 INVALID_ARGUMENT message, each counted as a Classify.
      auto context = NewContext();
      auto stream = stub.ClassifyStream(context.get());
      for (int i = 0; i < 3; ++i) {
        v1::ClassifyRequest request;
        request.set_model("demo");
        if (i != 1) request.add_inputs()->set_text(absl::StrCat("streamed ", i));
        ASSERT_TRUE(stream->Write(request));
        v1::ClassifyStreamResponse message;
        ASSERT_TRUE(stream->Read(&message));
        ASSERT_EQ(message.has_response(), i != 1);
        if (message.has_response()) demo_tokens_ += message.response().metadata().tokens();
      }
      stream->WritesDone();
      ASSERT_TRUE(stream->Finish().ok());
    }
    {  // Info: counted like any call, under the model label "" (no model named).
      v1::InfoResponse response;
      ASSERT_TRUE(stub.Info(NewContext().get(), v1::InfoRequest(), &response).ok());
    }
  }

  static std::string Exposition() {
    absl::StatusOr<std::string> text = HttpGet(server_->runtime().metrics_port(), "/metrics");
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  static inline TinyModels* models_ = nullptr;
  static inline TestServer* server_ = nullptr;
  static inline std::shared_ptr<EngineControl>* control_ = nullptr;
  static inline int batches_at_start_ = 0;
  static inline int64_t sequences_at_start_ = 0;
  static inline uint64_t demo_tokens_ = 0;
  static inline uint64_t embed_tokens_ = 0;
};

TEST_F(MetricsTest, CountersMatchTheCallsMade) {
  absl::StatusOr<std::vector<Sample>> parsed = ParseExposition(Exposition());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const std::vector<Sample>& samples = *parsed;
  auto value = [&](absl::string_view name, const Labels& labels) {
    return SumSamples(samples, name, labels);
  };

  // Requests, by RPC, model and code: exactly the calls made (stream messages included).
  const std::vector<std::pair<Labels, double>> requests = {
      {{{"rpc", "Classify"}, {"model", "demo"}, {"code", "OK"}}, 5},
      {{{"rpc", "Classify"}, {"model", "demo"}, {"code", "INVALID_ARGUMENT"}}, 2},
      {{{"rpc", "Classify"}, {"model", ""}, {"code", "NOT_FOUND"}}, 1},
      {{{"rpc", "ZeroShot"}, {"model", "demo"}, {"code", "OK"}}, 2},
      {{{"rpc", "Tokenize"}, {"model", "demo"}, {"code", "OK"}}, 2},
      {{{"rpc", "Embed"}, {"model", "embed"}, {"code", "OK"}}, 1},
      {{{"rpc", "Info"}, {"model", ""}, {"code", "OK"}}, 1},
  };
  double total = 0;
  for (const auto& [labels, count] : requests) {
    EXPECT_EQ(value("dflash_requests_total", labels), count)
        << labels.at("rpc") << " " << labels.at("model") << " " << labels.at("code");
    total += count;
  }
  EXPECT_EQ(value("dflash_requests_total", {}), total) << "no other request was counted";
  EXPECT_EQ(value("dflash_requests_total", {{"protocol", "dflash_grpc"}}), total)
      << "every call came through dflash.v1";
  EXPECT_EQ(
      value("dflash_request_duration_seconds_count", {{"rpc", "Classify"}, {"model", "demo"}}), 7);
  EXPECT_EQ(value("dflash_request_duration_seconds_count", {}), total);

  // Tokens: the sum of metadata.tokens of the answered inference requests.
  EXPECT_EQ(value("dflash_tokens_total", {{"model", "demo"}}), static_cast<double>(demo_tokens_));
  EXPECT_EQ(value("dflash_tokens_total", {{"model", "embed"}}), static_cast<double>(embed_tokens_));
  EXPECT_GT(demo_tokens_, 0u);

  // Batches: every batch the engine ran after the warm-up, all successful, holding exactly the
  // sequences and tokens of those requests.
  const double batches = (*control_)->batches() - batches_at_start_;
  EXPECT_GT(batches, 0);
  EXPECT_EQ(value("dflash_batches_total", {{"model", "demo"}}), batches);
  EXPECT_EQ(value("dflash_engine_errors_total", {{"model", "demo"}}), 0);
  EXPECT_EQ(value("dflash_batch_sequences_count", {{"model", "demo"}}), batches);
  EXPECT_EQ(value("dflash_batch_tokens_count", {{"model", "demo"}}), batches);
  EXPECT_EQ(value("dflash_batch_duration_seconds_count", {{"model", "demo"}}), batches);
  EXPECT_EQ(value("dflash_batch_sequences_sum", {{"model", "demo"}}),
            static_cast<double>((*control_)->sequences() - sequences_at_start_));
  EXPECT_EQ(value("dflash_batch_tokens_sum", {{"model", "demo"}}),
            static_cast<double>(demo_tokens_));
  EXPECT_EQ(value("dflash_batch_sequences_bucket", {{"model", "demo"}, {"le", "+Inf"}}), batches);
  // Batch stages are reported once a batch's last answer was handed over, which may come just
  // after its client got that answer: the calls above were made one after another, so at most the
  // last batch may be missing.
  for (const char* stage : {"pack", "run", "deliver"}) {
    const double staged =
        value("dflash_batch_stage_seconds_count", {{"model", "demo"}, {"stage", stage}});
    EXPECT_LE(staged, batches) << stage;
    EXPECT_GE(staged, batches - 1) << stage;
  }
  // The CPU engine measures no device span: its stage stays empty.
  EXPECT_EQ(value("dflash_batch_stage_seconds_count", {{"model", "demo"}, {"stage", "device"}}), 0);
  EXPECT_GE(value("dflash_batches_total", {{"model", "embed"}}), 1);

  // Stages of the 7 inference requests answered by the demo model.
  for (const char* stage :
       {"dflash_tokenization_duration_seconds_count", "dflash_queue_duration_seconds_count",
        "dflash_inference_duration_seconds_count"}) {
    EXPECT_EQ(value(stage, {{"model", "demo"}}), 7) << stage;
  }

  // Gauges at rest, and the identity.
  EXPECT_EQ(value("dflash_inflight_requests", {}), 0);
  EXPECT_EQ(value("dflash_queue_requests", {{"model", "demo"}}), 0);
  EXPECT_EQ(value("dflash_dropped_requests_total", {}), 0);
  EXPECT_EQ(value("dflash_build_info", {{"version", kTestVersion}, {"revision", kTestRevision}}),
            1);
  EXPECT_EQ(value("dflash_model_info",
                  {{"model", "demo"}, {"backend", "cpu"}, {"dtype", "float32"}, {"tuning", ""}}),
            1);
  // The CPU engine's device is the host: its memory, and the model's weights, are exported.
  EXPECT_GT(value("dflash_device_memory_bytes", {{"kind", "total"}}),
            value("dflash_device_memory_bytes", {{"kind", "free"}}));
  EXPECT_GT(value("dflash_device_memory_bytes", {{"kind", "free"}}), 0);
  EXPECT_GT(value("dflash_device_memory_bytes", {{"kind", "weights"}}), 0);
  // Failure counters exist before the first failure (the embed model's engine never failed).
  EXPECT_TRUE(std::any_of(samples.begin(), samples.end(), [](const Sample& sample) {
    return sample.name == "dflash_engine_errors_total" && sample.labels.count("model") == 1 &&
           sample.labels.at("model") == "embed" && sample.value == 0;
  }));
}

TEST_F(MetricsTest, OfficialPythonParserReadsTheExpositionAndAgrees) {
  std::string probe;
  if (RunPython("import prometheus_client.parser\n", "", probe) != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import prometheus_client (install Debian's "
                 << "python3-prometheus-client): " << probe;
  }
  const std::string text = Exposition();
  absl::StatusOr<std::vector<Sample>> parsed = ParseExposition(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();

  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / absl::StrCat("dflash_e2e_metrics_", getpid());
  std::ofstream(path) << text;
  // Prints every sample as name<TAB>sorted labels<TAB>value; fails on any parse error and on a
  // family of the wrong type.
  const std::string script = R"PY(
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
families = {f.name: f for f in parse(open(sys.argv[1]).read())}
expected_types = {'dflash_requests': 'counter', 'dflash_tokens': 'counter',
                  'dflash_batches': 'counter', 'dflash_batch_sequences': 'histogram',
                  'dflash_batch_tokens': 'histogram', 'dflash_request_duration_seconds': 'histogram',
                  'dflash_inflight_requests': 'gauge', 'dflash_build_info': 'gauge'}
for name, kind in expected_types.items():
    assert families[name].type == kind, (name, families[name].type)
for family in families.values():
    for s in family.samples:
        labels = ','.join('%s=%s' % (k, v) for k, v in sorted(s.labels.items()))
        print('%s\t%s\t%r' % (s.name, labels, s.value))
)PY";
  std::string output;
  const int exit_code = RunPython(script, path.string(), output);
  std::filesystem::remove(path);
  ASSERT_EQ(exit_code, 0) << output;

  std::map<std::string, double> from_python;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    ASSERT_EQ(fields.size(), 3u) << line;
    from_python[absl::StrCat(fields[0], "{", fields[1], "}")] = std::stod(fields[2]);
  }
  ASSERT_EQ(from_python.size(), parsed->size()) << "the parsers see different samples";
  for (const Sample& sample : *parsed) {
    std::string labels;
    for (const auto& [key, value] : sample.labels) {
      absl::StrAppend(&labels, labels.empty() ? "" : ",", key, "=", value);
    }
    const std::string key = absl::StrCat(sample.name, "{", labels, "}");
    auto it = from_python.find(key);
    ASSERT_NE(it, from_python.end()) << key;
    EXPECT_EQ(it->second, sample.value) << key;
  }
  EXPECT_EQ(
      from_python.at("dflash_requests_total{code=OK,model=demo,protocol=dflash_grpc,rpc=Classify}"),
      5);
}

}  // namespace
}  // namespace dflash::e2e
