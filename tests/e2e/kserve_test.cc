// End-to-end KServe v2 (inference.GRPCInferenceService) on the same server and port as dflash.v1:
// readiness and metadata describe the served models truthfully, every ModelInfer task answers
// what dflash.v1 answers for the same input (raw and typed tensors alike), malformed tensors are
// INVALID_ARGUMENT naming the input, API keys and the request metrics apply as for dflash.v1, and
// the protocol's RPCs this server does not serve are UNIMPLEMENTED.
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inference/grpc_service.grpc.pb.h"
#include "server/kserve/tensor_codec.h"
#include "tests/e2e/e2e_harness.h"

namespace dflash::e2e {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Infer = inference::ModelInferRequest;

constexpr char kKey[] = "kserve-test-key-0123456789";

const std::vector<std::string> kTexts = {"A soccer game with multiple males playing.",
                                         "The weather is lovely today.", "short"};
const std::vector<std::string> kPairs = {"Some men are playing a sport.", "It is raining.", ""};

// Adds a BYTES input of shape [elements], raw (appended to raw_input_contents) or typed.
void AddBytesInput(Infer& request, const std::string& name, const std::vector<std::string>& values,
                   bool raw) {
  auto* input = request.add_inputs();
  input->set_name(name);
  input->set_datatype("BYTES");
  input->add_shape(static_cast<int64_t>(values.size()));
  if (raw) {
    request.add_raw_input_contents(kserve::EncodeRawBytes(values));
  } else {
    for (const std::string& value : values) input->mutable_contents()->add_bytes_contents(value);
  }
}

// The output called `name` of `response`, checked to have `shape`.
std::vector<float> Output(const inference::ModelInferResponse& response, const std::string& name,
                          const std::vector<int64_t>& shape) {
  for (int i = 0; i < response.outputs_size(); ++i) {
    if (response.outputs(i).name() != name) continue;
    EXPECT_EQ(std::vector<int64_t>(response.outputs(i).shape().begin(),
                                   response.outputs(i).shape().end()),
              shape)
        << name;
    absl::StatusOr<std::vector<float>> values = kserve::DecodeFp32Output(response, i);
    EXPECT_TRUE(values.ok()) << values.status();
    return values.ok() ? *values : std::vector<float>();
  }
  ADD_FAILURE() << "no output " << name;
  return {};
}

class KserveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<TinyModels>> models = WriteTinyModels();
    ASSERT_TRUE(models.ok()) << models.status();
    models_ = std::move(*models).release();
    ServerConfig config = TestServerConfig({TestModelEntry("demo", DemoModelDir()),
                                            TestModelEntry("rerank", models_->rerank),
                                            TestModelEntry("embed", models_->embed)});
    absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete models_;
    models_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    kserve_ = inference::GRPCInferenceService::NewStub(server_->channel());
  }

  grpc::Status ModelInfer(const Infer& request, inference::ModelInferResponse& response) {
    return kserve_->ModelInfer(NewContext().get(), request, &response);
  }
  // ModelInfer that must fail with INVALID_ARGUMENT; its message.
  std::string InvalidInfer(const Infer& request) {
    inference::ModelInferResponse response;
    const grpc::Status status = ModelInfer(request, response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    return status.error_message();
  }

  static TinyModels* models_;
  static TestServer* server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
};
TinyModels* KserveTest::models_ = nullptr;
TestServer* KserveTest::server_ = nullptr;

TEST_F(KserveTest, ReadinessAndServerMetadata) {
  inference::ServerLiveResponse live;
  ASSERT_TRUE(kserve_->ServerLive(NewContext().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(kserve_->ServerReady(NewContext().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  for (const auto& [name, version, expected] :
       std::vector<std::tuple<std::string, std::string, bool>>{{"demo", "", true},
                                                               {"embed", "1", true},
                                                               {"demo", "2", false},
                                                               {"no-such-model", "", false},
                                                               {"", "", false}}) {
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse model_ready;
    ASSERT_TRUE(kserve_->ModelReady(NewContext().get(), request, &model_ready).ok());
    EXPECT_EQ(model_ready.ready(), expected) << name << " version '" << version << "'";
  }
  inference::ServerMetadataResponse metadata;
  ASSERT_TRUE(kserve_->ServerMetadata(NewContext().get(), {}, &metadata).ok());
  EXPECT_EQ(metadata.name(), "dflash-server");
  EXPECT_EQ(metadata.version(), kTestVersion);
  // Health and reflection list the service too.
  EXPECT_EQ(CheckHealth(server_->health(), "inference.GRPCInferenceService").serving,
            grpc::health::v1::HealthCheckResponse::SERVING);
  absl::StatusOr<std::vector<std::string>> services = ReflectionListServices(server_->channel());
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, ::testing::Contains(std::string("inference.GRPCInferenceService")));
}

TEST_F(KserveTest, ModelMetadataDescribesEachModelsTensors) {
  auto metadata_of = [&](const std::string& name) {
    inference::ModelMetadataRequest request;
    request.set_name(name);
    inference::ModelMetadataResponse response;
    const grpc::Status status = kserve_->ModelMetadata(NewContext().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::vector<std::string> tensors;
    for (const auto* list : {&response.inputs(), &response.outputs()}) {
      for (const auto& tensor : *list) {
        tensors.push_back(absl::StrCat(tensor.name(), " ", tensor.datatype(), " [",
                                       absl::StrJoin(tensor.shape(), ","), "]"));
      }
    }
    EXPECT_EQ(response.name(), name);
    EXPECT_THAT(response.versions(), ElementsAre("1"));
    return tensors;
  };
  // The demo model is a 3-label NLI classifier: classify and zero-shot.
  EXPECT_THAT(
      metadata_of("demo"),
      ElementsAre("text BYTES [-1]", "text_pair BYTES [-1]", "candidate_labels BYTES [-1]",
                  "scores FP32 [-1,3]", "logits FP32 [-1,3]", "candidate_scores FP32 [-1,-1]"));
  // A one-label cross-encoder: classify and rerank.
  EXPECT_THAT(metadata_of("rerank"),
              ElementsAre("text BYTES [-1]", "text_pair BYTES [-1]", "query BYTES [1]",
                          "scores FP32 [-1,1]", "logits FP32 [-1,1]", "score FP32 [-1]"));
  EXPECT_THAT(metadata_of("embed"), ElementsAre("text BYTES [-1]", "embedding FP32 [-1,32]"));

  inference::ModelMetadataRequest unknown;
  unknown.set_name("no-such-model");
  inference::ModelMetadataResponse response;
  EXPECT_EQ(kserve_->ModelMetadata(NewContext().get(), unknown, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  unknown.set_name("demo");
  unknown.set_version("7");
  EXPECT_EQ(kserve_->ModelMetadata(NewContext().get(), unknown, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(KserveTest, ModelConfigCarriesTheLabels) {
  inference::ModelConfigRequest request;
  request.set_name("demo");
  inference::ModelConfigResponse response;
  ASSERT_TRUE(kserve_->ModelConfig(NewContext().get(), request, &response).ok());
  const inference::ModelConfig& config = response.config();
  EXPECT_EQ(config.name(), "demo");
  EXPECT_EQ(config.max_batch_size(), 0);
  ASSERT_EQ(config.input_size(), 3);
  EXPECT_EQ(config.input(0).name(), "text");
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_STRING);
  EXPECT_FALSE(config.input(0).optional());
  EXPECT_TRUE(config.input(1).optional());
  ASSERT_EQ(config.output_size(), 3);
  EXPECT_EQ(config.output(0).data_type(), inference::TYPE_FP32);

  v1::InfoRequest info_request;
  info_request.set_model("demo");
  v1::InfoResponse info;
  ASSERT_TRUE(server_->stub().Info(NewContext().get(), info_request, &info).ok());
  std::vector<std::string> labels;
  for (const v1::Label& label : info.models(0).labels()) labels.push_back(label.name());
  ASSERT_EQ(config.parameters().count("labels"), 1u);
  EXPECT_EQ(nlohmann::json::parse(config.parameters().at("labels").string_value()),
            nlohmann::json(labels));
  EXPECT_EQ(config.parameters().at("tasks").string_value(), "classify,zero_shot");
}

TEST_F(KserveTest, ClassifyMatchesDflashV1RawAndTyped) {
  v1::ClassifyRequest classify;
  classify.set_model("demo");
  for (size_t i = 0; i < kTexts.size(); ++i) {
    v1::TextInput* input = classify.add_inputs();
    input->set_text(kTexts[i]);
    input->set_text_pair(kPairs[i]);
  }
  v1::ClassifyResponse expected;
  ASSERT_TRUE(server_->stub().Classify(NewContext().get(), classify, &expected).ok());
  classify.set_score_function(v1::SCORE_FUNCTION_RAW);
  v1::ClassifyResponse expected_logits;
  ASSERT_TRUE(server_->stub().Classify(NewContext().get(), classify, &expected_logits).ok());

  for (const bool raw : {true, false}) {
    SCOPED_TRACE(raw ? "raw tensors" : "typed tensors");
    Infer request;
    request.set_model_name("demo");
    request.set_id("req-7");
    AddBytesInput(request, "text", kTexts, raw);
    AddBytesInput(request, "text_pair", kPairs, raw);
    request.add_outputs()->set_name("scores");
    request.add_outputs()->set_name("logits");
    inference::ModelInferResponse response;
    const grpc::Status status = ModelInfer(request, response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.model_name(), "demo");
    EXPECT_EQ(response.id(), "req-7");
    EXPECT_EQ(response.raw_output_contents_size(), raw ? 2 : 0);
    EXPECT_GT(response.parameters().at("tokens").int64_param(), 0);
    const std::vector<float> scores = Output(response, "scores", {3, 3});
    const std::vector<float> logits = Output(response, "logits", {3, 3});
    ASSERT_EQ(scores.size(), 9u);
    ASSERT_EQ(logits.size(), 9u);
    for (int i = 0; i < 3; ++i) {
      for (const v1::LabelScore& label : expected.results(i).scores()) {
        EXPECT_TRUE(Near(scores[static_cast<size_t>(i * 3 + label.id())], label.score()))
            << "text " << i << " label " << label.id();
      }
      for (const v1::LabelScore& label : expected_logits.results(i).scores()) {
        EXPECT_TRUE(Near(logits[static_cast<size_t>(i * 3 + label.id())], label.score()))
            << "text " << i << " label " << label.id();
      }
    }
  }

  // No outputs named: `scores`; a score_function parameter applies to them.
  Infer request;
  request.set_model_name("demo");
  AddBytesInput(request, "text", {kTexts[0]}, true);
  (*request.mutable_parameters())["score_function"].set_string_param("sigmoid");
  inference::ModelInferResponse response;
  ASSERT_TRUE(ModelInfer(request, response).ok());
  ASSERT_EQ(response.outputs_size(), 1);
  const std::vector<float> sigmoid = Output(response, "scores", {1, 3});
  classify.Clear();
  classify.set_model("demo");
  classify.add_inputs()->set_text(kTexts[0]);
  classify.set_score_function(v1::SCORE_FUNCTION_SIGMOID);
  v1::ClassifyResponse expected_sigmoid;
  ASSERT_TRUE(server_->stub().Classify(NewContext().get(), classify, &expected_sigmoid).ok());
  for (const v1::LabelScore& label : expected_sigmoid.results(0).scores()) {
    EXPECT_TRUE(Near(sigmoid[static_cast<size_t>(label.id())], label.score()));
  }
}

TEST_F(KserveTest, ZeroShotRerankAndEmbedMatchDflashV1) {
  const std::vector<std::string> candidates = {"sports", "weather", "politics"};
  {
    Infer request;
    request.set_model_name("demo");
    AddBytesInput(request, "text", kTexts, true);
    AddBytesInput(request, "candidate_labels", candidates, true);
    (*request.mutable_parameters())["multi_label"].set_bool_param(true);
    inference::ModelInferResponse response;
    const grpc::Status status = ModelInfer(request, response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const std::vector<float> scores = Output(response, "candidate_scores", {3, 3});
    v1::ZeroShotRequest zero_shot;
    zero_shot.set_model("demo");
    for (const std::string& text : kTexts) zero_shot.add_texts(text);
    for (const std::string& label : candidates) zero_shot.add_candidate_labels(label);
    zero_shot.set_multi_label(true);
    v1::ZeroShotResponse expected;
    ASSERT_TRUE(server_->stub().ZeroShot(NewContext().get(), zero_shot, &expected).ok());
    ASSERT_EQ(scores.size(), 9u);
    for (int i = 0; i < 3; ++i) {
      for (const v1::LabelScore& label : expected.results(i).scores()) {
        EXPECT_TRUE(Near(scores[static_cast<size_t>(i * 3 + label.id())], label.score()));
      }
    }
  }
  {
    Infer request;
    request.set_model_name("rerank");
    AddBytesInput(request, "query", {"who is playing?"}, false);
    AddBytesInput(request, "text", kTexts, false);
    inference::ModelInferResponse response;
    const grpc::Status status = ModelInfer(request, response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const std::vector<float> scores = Output(response, "score", {3});
    v1::RerankRequest rerank;
    rerank.set_model("rerank");
    rerank.set_query("who is playing?");
    for (const std::string& text : kTexts) rerank.add_documents(text);
    v1::RerankResponse expected;
    ASSERT_TRUE(server_->stub().Rerank(NewContext().get(), rerank, &expected).ok());
    ASSERT_EQ(scores.size(), 3u);
    for (const v1::RerankResult& result : expected.results()) {
      EXPECT_TRUE(Near(scores[result.index()], result.score())) << "document " << result.index();
    }
  }
  {
    Infer request;
    request.set_model_name("embed");
    AddBytesInput(request, "text", kTexts, true);
    inference::ModelInferResponse response;
    const grpc::Status status = ModelInfer(request, response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const std::vector<float> values = Output(response, "embedding", {3, 32});
    v1::EmbedRequest embed;
    embed.set_model("embed");
    for (const std::string& text : kTexts) embed.add_inputs(text);
    v1::EmbedResponse expected;
    ASSERT_TRUE(server_->stub().Embed(NewContext().get(), embed, &expected).ok());
    ASSERT_EQ(values.size(), 96u);
    for (int i = 0; i < 3; ++i) {
      for (int d = 0; d < 32; ++d) {
        EXPECT_TRUE(Near(values[static_cast<size_t>(i * 32 + d)],
                         expected.embeddings(i).float32_values(d), 1e-5, 1e-6));
      }
    }
  }
}

TEST_F(KserveTest, MalformedTensorsAreInvalidArgumentNamingTheInput) {
  auto request_with = [](auto edit) {
    Infer request;
    request.set_model_name("demo");
    AddBytesInput(request, "text", kTexts, false);
    edit(request);
    return request;
  };
  EXPECT_THAT(
      InvalidInfer(request_with([](Infer& r) { r.mutable_inputs(0)->set_datatype("FP32"); })),
      HasSubstr("input 'text': datatype 'FP32', expected BYTES"));
  EXPECT_THAT(InvalidInfer(request_with([](Infer& r) { r.mutable_inputs(0)->set_shape(0, 5); })),
              HasSubstr("input 'text': shape [5] holds 5 elements, but 3 were sent"));
  EXPECT_THAT(InvalidInfer(request_with([](Infer& r) { r.mutable_inputs(0)->add_shape(1); })),
              HasSubstr("input 'text': shape [3,1], expected [-1]"));
  EXPECT_THAT(InvalidInfer(request_with([](Infer& r) { AddBytesInput(r, "image", {"x"}, false); })),
              HasSubstr("input 'image': model 'demo' has no such input"));
  EXPECT_THAT(InvalidInfer(request_with([](Infer& r) { r.mutable_inputs(0)->set_name("query"); })),
              HasSubstr("input 'query': model 'demo' has no such input"));
  EXPECT_THAT(InvalidInfer(request_with(
                  [](Infer& r) { AddBytesInput(r, "text_pair", {"only one"}, false); })),
              HasSubstr("input 'text_pair': 1 elements for 3 texts"));
  EXPECT_THAT(
      InvalidInfer(request_with([](Infer& r) { r.add_outputs()->set_name("candidate_scores"); })),
      HasSubstr("input 'candidate_labels': missing"));
  EXPECT_THAT(InvalidInfer(request_with([](Infer& r) {
                r.add_outputs()->set_name("scores");
                r.add_outputs()->set_name("candidate_scores");
              })),
              HasSubstr("ask for the outputs of one task per request"));
  EXPECT_THAT(InvalidInfer(request_with(
                  [](Infer& r) { (*r.mutable_parameters())["truncate"].set_string_param("yes"); })),
              HasSubstr("parameters.truncate: expected a bool parameter"));
  EXPECT_THAT(InvalidInfer(request_with(
                  [](Infer& r) { (*r.mutable_parameters())["normalize"].set_bool_param(true); })),
              HasSubstr("parameters.normalize: not an option of the classify task"));
  // Raw data: a length prefix running past the end, and a missing raw entry.
  Infer raw;
  raw.set_model_name("demo");
  AddBytesInput(raw, "text", {"abc"}, true);
  raw.mutable_raw_input_contents(0)->pop_back();
  EXPECT_THAT(InvalidInfer(raw), HasSubstr("input 'text': raw BYTES element 0 declares 3 bytes"));
  AddBytesInput(raw, "text_pair", {"x"}, false);
  EXPECT_THAT(InvalidInfer(raw), HasSubstr("raw_input_contents has 1 entries for 2 inputs"));
  // A pipeline error names the tensor element.
  Infer too_long;
  too_long.set_model_name("demo");
  AddBytesInput(too_long, "text", {"fine", std::string(3000, 'a')}, true);
  (*too_long.mutable_parameters())["truncate"].set_bool_param(false);
  EXPECT_THAT(InvalidInfer(too_long), HasSubstr("text[1]"));

  inference::ModelInferResponse response;
  Infer unknown_model = request_with([](Infer& r) { r.set_model_name("nope"); });
  EXPECT_EQ(ModelInfer(unknown_model, response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(KserveTest, RequestsAreCountedUnderTheKserveProtocol) {
  const double before = ScrapeRegistry(
      server_->runtime(), "dflash_requests_total",
      {{"protocol", "kserve_grpc"}, {"rpc", "Classify"}, {"model", "demo"}, {"code", "OK"}});
  Infer request;
  request.set_model_name("demo");
  AddBytesInput(request, "text", {kTexts[0]}, true);
  inference::ModelInferResponse response;
  ASSERT_TRUE(ModelInfer(request, response).ok());
  EXPECT_EQ(
      ScrapeRegistry(
          server_->runtime(), "dflash_requests_total",
          {{"protocol", "kserve_grpc"}, {"rpc", "Classify"}, {"model", "demo"}, {"code", "OK"}}),
      before + 1);
  const double refused = ScrapeRegistry(
      server_->runtime(), "dflash_requests_total",
      {{"protocol", "kserve_grpc"}, {"rpc", "ModelInfer"}, {"code", "INVALID_ARGUMENT"}});
  request.mutable_inputs(0)->set_datatype("INT32");
  EXPECT_FALSE(ModelInfer(request, response).ok());
  EXPECT_EQ(ScrapeRegistry(
                server_->runtime(), "dflash_requests_total",
                {{"protocol", "kserve_grpc"}, {"rpc", "ModelInfer"}, {"code", "INVALID_ARGUMENT"}}),
            refused + 1);
}

TEST_F(KserveTest, ProtocolMethodsNotServedAreUnimplemented) {
  grpc::GenericStub generic(server_->channel());
  for (const char* method : {"/inference.GRPCInferenceService/ModelStatistics",
                             "/inference.GRPCInferenceService/RepositoryIndex"}) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWaitLimit));
    grpc::Slice nothing("");  // An empty request message.
    grpc::ByteBuffer empty(&nothing, 1);
    grpc::ByteBuffer answer;
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    grpc::Status status;
    generic.UnaryCall(&context, method, grpc::StubOptions(), &empty, &answer,
                      [&](grpc::Status result) {
                        std::lock_guard<std::mutex> lock(mutex);
                        status = std::move(result);
                        done = true;
                        done_cv.notify_all();
                      });
    std::unique_lock<std::mutex> lock(mutex);
    done_cv.wait(lock, [&] { return done; });
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << method;
  }
}

TEST(KserveApiKeyTest, InferenceNeedsTheKeyProbesDoNot) {
  ServerConfig config = TestServerConfig({TestModelEntry("demo", DemoModelDir())});
  config.auth.api_keys = {kKey};
  absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto kserve = inference::GRPCInferenceService::NewStub((*server)->channel());
  inference::ServerReadyResponse ready;
  EXPECT_TRUE(kserve->ServerReady(NewContext().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  Infer request;
  request.set_model_name("demo");
  AddBytesInput(request, "text", {"hello"}, true);
  inference::ModelInferResponse response;
  EXPECT_EQ(kserve->ModelInfer(NewContext().get(), request, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name("demo");
  inference::ModelMetadataResponse metadata;
  EXPECT_EQ(kserve->ModelMetadata(NewContext().get(), metadata_request, &metadata).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto keyed = NewContext();
  keyed->AddMetadata("authorization", absl::StrCat("Bearer ", kKey));
  EXPECT_TRUE(kserve->ModelInfer(keyed.get(), request, &response).ok());
}

}  // namespace
}  // namespace dflash::e2e
