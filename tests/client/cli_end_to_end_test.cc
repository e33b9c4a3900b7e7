// dflash-cli end to end, in process: RunCli against a fake InferenceService and health service on
// 127.0.0.1:<ephemeral>, checking the JSON it prints, its one-line errors, its exit codes, and what
// reached the server (requests, chunking, the API key metadata, the deadline).
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli_channel.h"
#include "client/cli_flags.h"
#include "client/cli_run.h"
#include "dflash/v1/dflash.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace dflash::client {
namespace {

namespace v1 = dflash::v1;
namespace health = grpc::health::v1;
namespace pb = google::protobuf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kKey[] = "s3cret-key";

// What the fake server saw of one call.
struct SeenCall {
  std::string method;
  std::string authorization;  // "" when the metadata was absent
  std::chrono::system_clock::duration time_left;
  bool has_deadline = false;
};

// Canned answers; every call must carry "authorization: Bearer <kKey>" unless allow_anonymous.
class FakeInference final : public v1::InferenceService::Service {
 public:
  grpc::Status Classify(grpc::ServerContext* context, const v1::ClassifyRequest* request,
                        v1::ClassifyResponse* response) override {
    if (grpc::Status status = Admit("Classify", context); !status.ok()) return status;
    Keep(classify_requests_, *request);
    for (const v1::TextInput& input : request->inputs()) {
      if (input.text() == "boom") {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full; retry");
      }
    }
    *response = ClassifyAnswer(*request);
    return grpc::Status::OK;
  }

  grpc::Status ZeroShot(grpc::ServerContext* context, const v1::ZeroShotRequest*,
                        v1::ZeroShotResponse*) override {
    if (grpc::Status status = Admit("ZeroShot", context); !status.ok()) return status;
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "candidate_labels[1]: empty\nlabels must be non-empty");
  }

  grpc::Status Rerank(grpc::ServerContext* context, const v1::RerankRequest* request,
                      v1::RerankResponse* response) override {
    if (grpc::Status status = Admit("Rerank", context); !status.ok()) return status;
    Keep(rerank_requests_, *request);
    response->mutable_metadata()->set_request_id(request->request_id());
    for (int i = request->documents_size() - 1; i >= 0; --i) {  // the last document wins
      v1::RerankResult* result = response->add_results();
      result->set_index(static_cast<uint32_t>(i));
      result->set_score(static_cast<float>(i) / 4.0F);
      if (request->return_documents()) result->set_document(request->documents(i));
    }
    return grpc::Status::OK;
  }

  grpc::Status Embed(grpc::ServerContext* context, const v1::EmbedRequest* request,
                     v1::EmbedResponse* response) override {
    if (grpc::Status status = Admit("Embed", context); !status.ok()) return status;
    for (int i = 0; i < request->inputs_size(); ++i) {
      v1::Embedding* embedding = response->add_embeddings();
      embedding->add_float32_values(0.5F);
      embedding->add_float32_values(-0.5F);
      embedding->set_dimensions(2);
      embedding->set_tokens(3);
    }
    return grpc::Status::OK;
  }

  grpc::Status Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override {
    if (grpc::Status status = Admit("Tokenize", context); !status.ok()) return status;
    Keep(tokenize_requests_, *request);
    v1::Token* token = response->add_encodings()->add_tokens();
    token->set_id(1);
    token->set_piece("[CLS]");
    token->set_special(true);
    return grpc::Status::OK;
  }

  grpc::Status TokenClassify(grpc::ServerContext* context, const v1::TokenClassifyRequest* request,
                             v1::TokenClassifyResponse* response) override {
    if (grpc::Status status = Admit("TokenClassify", context); !status.ok()) return status;
    Keep(token_classify_requests_, *request);
    for (const std::string& text : request->inputs()) {
      v1::TokenEntity* entity = response->add_results()->add_entities();
      entity->set_label("LOC");
      entity->set_word(text);
      entity->set_end(static_cast<uint32_t>(text.size()));
      entity->set_score(0.75F);
    }
    return grpc::Status::OK;
  }

  grpc::Status Info(grpc::ServerContext* context, const v1::InfoRequest* request,
                    v1::InfoResponse* response) override {
    if (grpc::Status status = Admit("Info", context); !status.ok()) return status;
    response->set_version("0.1.0");
    v1::ModelInfo* model = response->add_models();
    model->set_id(request->model().empty() ? "demo" : request->model());
    model->add_tasks(v1::TASK_CLASSIFY);
    return grpc::Status::OK;
  }

  static v1::ClassifyResponse ClassifyAnswer(const v1::ClassifyRequest& request) {
    v1::ClassifyResponse response;
    response.mutable_metadata()->set_request_id(request.request_id());
    response.mutable_metadata()->set_model("demo");
    response.mutable_metadata()->set_tokens(static_cast<uint64_t>(4 * request.inputs_size()));
    for (int i = 0; i < request.inputs_size(); ++i) {
      v1::Classification* result = response.add_results();
      v1::LabelScore* top = result->add_scores();
      top->set_id(1);
      top->set_label("entailment");
      top->set_score(0.75F);
      v1::LabelScore* second = result->add_scores();
      second->set_id(0);
      second->set_label("contradiction");
      second->set_score(0.25F);
      result->set_tokens(4);
    }
    return response;
  }

  std::vector<SeenCall> calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  std::vector<v1::ClassifyRequest> classify_requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return classify_requests_;
  }
  std::vector<v1::RerankRequest> rerank_requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return rerank_requests_;
  }
  std::vector<v1::TokenizeRequest> tokenize_requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return tokenize_requests_;
  }
  std::vector<v1::TokenClassifyRequest> token_classify_requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return token_classify_requests_;
  }

 private:
  // Records the call and checks its API key.
  grpc::Status Admit(const std::string& method, grpc::ServerContext* context) {
    SeenCall call{method, "", context->deadline() - std::chrono::system_clock::now(),
                  context->deadline() != std::chrono::system_clock::time_point::max()};
    const auto& metadata = context->client_metadata();
    if (const auto it = metadata.find("authorization"); it != metadata.end()) {
      call.authorization.assign(it->second.data(), it->second.size());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(call);
    if (call.authorization != absl::StrCat("Bearer ", kKey)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong API key");
    }
    return grpc::Status::OK;
  }

  template <typename Request>
  void Keep(std::vector<Request>& into, const Request& request) {
    std::lock_guard<std::mutex> lock(mutex_);
    into.push_back(request);
  }

  std::mutex mutex_;
  std::vector<SeenCall> calls_;
  std::vector<v1::ClassifyRequest> classify_requests_;
  std::vector<v1::RerankRequest> rerank_requests_;
  std::vector<v1::TokenizeRequest> tokenize_requests_;
  std::vector<v1::TokenClassifyRequest> token_classify_requests_;
};

// The whole server and the inference service serve; "draining" does not; anything else is unknown.
class FakeHealth final : public health::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext*, const health::HealthCheckRequest* request,
                     health::HealthCheckResponse* response) override {
    if (request->service().empty() || request->service() == "dflash.v1.InferenceService") {
      response->set_status(health::HealthCheckResponse::SERVING);
    } else if (request->service() == "draining") {
      response->set_status(health::HealthCheckResponse::NOT_SERVING);
    } else {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
    }
    return grpc::Status::OK;
  }
};

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

class CliEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv(kApiKeyEnv);  // the host's key must not leak into the tests
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&inference_);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    unsetenv(kApiKeyEnv);
  }

  // Runs the CLI against the fake server, with the right key unless the arguments give one.
  CliResult Run(std::vector<std::string> args, const std::string& stdin_text = "",
                bool with_key = true) {
    args.insert(args.begin(), absl::StrCat("--target=127.0.0.1:", port_));
    if (with_key) args.insert(args.begin(), absl::StrCat("--api_key=", kKey));
    std::istringstream in(stdin_text);
    std::ostringstream out;
    std::ostringstream err;
    const int code = RunCli(args, in, out, err);
    return {code, out.str(), err.str()};
  }

  int port_ = 0;
  FakeInference inference_;
  FakeHealth health_;
  std::unique_ptr<grpc::Server> server_;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  EXPECT_TRUE(!lines.empty() && lines.back().empty()) << "output must end with a newline";
  if (!lines.empty()) lines.pop_back();
  return lines;
}

template <typename M>
M FromJson(const std::string& json) {
  M message;
  EXPECT_TRUE(pb::util::JsonStringToMessage(json, &message).ok()) << json;
  return message;
}

TEST_F(CliEndToEnd, ClassifyPrintsTheResponseAsOneJsonLine) {
  const CliResult result =
      Run({"classify", "--text", "A man plays.", "--text_pair", "Music.", "--text", "Solo.",
           "--text_pair=", "--request_id=r1", "--top_k=2", "--priority=high"});
  EXPECT_EQ(result.code, kExitOk) << result.err;
  EXPECT_EQ(result.err, "");
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 1U);
  // Proto field names and every scalar, in field order: a stable shape for scripts.
  EXPECT_THAT(lines[0], StartsWith("{\"metadata\":{\"request_id\":\"r1\",\"model\":\"demo\","
                                   "\"tokens\":\"8\",\"tokenization_us\":\"0\""));
  EXPECT_THAT(lines[0], HasSubstr("{\"scores\":[{\"id\":1,\"label\":\"entailment\",\"score\":0.75},"
                                  "{\"id\":0,\"label\":\"contradiction\",\"score\":0.25}],"
                                  "\"tokens\":4,\"truncated\":false}"));

  const std::vector<v1::ClassifyRequest> requests = inference_.classify_requests();
  ASSERT_EQ(requests.size(), 1U);
  const v1::ClassifyRequest& request = requests[0];
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(FromJson<v1::ClassifyResponse>(lines[0]),
                                                   FakeInference::ClassifyAnswer(request)));
  ASSERT_EQ(request.inputs_size(), 2);
  EXPECT_EQ(request.inputs(0).text_pair(), "Music.");
  EXPECT_TRUE(request.inputs(1).has_text_pair());
  EXPECT_EQ(request.top_k(), 2U);
  EXPECT_EQ(request.priority(), v1::PRIORITY_HIGH);

  const std::vector<SeenCall> calls = inference_.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].authorization, "Bearer s3cret-key");
  // The default deadline: 30 s from the call (gRPC rounds the timeout it sends up, a little).
  EXPECT_TRUE(calls[0].has_deadline);
  EXPECT_GT(calls[0].time_left, std::chrono::seconds(20));
  EXPECT_LE(calls[0].time_left, std::chrono::seconds(31));
}

TEST_F(CliEndToEnd, ApiKeyComesFromTheEnvironmentUnlessTheFlagGivesOne) {
  setenv(kApiKeyEnv, kKey, 1);
  CliResult result = Run({"info"}, "", /*with_key=*/false);
  EXPECT_EQ(result.code, kExitOk) << result.err;
  EXPECT_EQ(result.out,
            "{\"version\":\"0.1.0\",\"revision\":\"\",\"models\":[{\"id\":\"demo\",\"source\":\"\","
            "\"architecture\":\"\",\"tasks\":[\"TASK_CLASSIFY\"],\"labels\":[],"
            "\"default_score_function\":\"SCORE_FUNCTION_UNSPECIFIED\",\"pooling\":\"POOLING_"
            "UNSPECIFIED\",\"embedding_dimensions\":0,\"max_input_length\":0,\"default_truncate\":"
            "false,\"dtype\":\"DATA_TYPE_UNSPECIFIED\",\"backend\":\"BACKEND_UNSPECIFIED\","
            "\"device\":\"\",\"tuning_profile\":\"\",\"tokenizer\":\"\"}]}\n");

  result = Run({"--api_key=wrong", "info"}, "", /*with_key=*/false);
  EXPECT_EQ(result.code, kExitRpcError);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "dflash-cli: Info: UNAUTHENTICATED: missing or wrong API key\n");

  const std::vector<SeenCall> calls = inference_.calls();
  ASSERT_EQ(calls.size(), 2U);
  EXPECT_EQ(calls[0].authorization, "Bearer s3cret-key");
  EXPECT_EQ(calls[1].authorization, "Bearer wrong");
}

TEST_F(CliEndToEnd, NoKeyNoAuthorizationMetadata) {
  const CliResult result = Run({"embed", "--text=a"}, "", /*with_key=*/false);
  EXPECT_EQ(result.code, kExitRpcError);
  EXPECT_THAT(result.err, StartsWith("dflash-cli: Embed: UNAUTHENTICATED: "));
  ASSERT_EQ(inference_.calls().size(), 1U);
  EXPECT_EQ(inference_.calls()[0].authorization, "");
}

TEST_F(CliEndToEnd, AnRpcErrorIsOneLineOnStderrWithTheCodeName) {
  const CliResult result = Run({"zeroshot", "--text=a", "--labels=x,y"});
  EXPECT_EQ(result.code, kExitRpcError);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err,
            "dflash-cli: ZeroShot: INVALID_ARGUMENT: candidate_labels[1]: empty labels must be "
            "non-empty\n");
}

TEST_F(CliEndToEnd, JsonlFromStdinGoesInChunksWithOneLinePerCall) {
  const std::string documents =
      "{\"document\": \"d0\"}\n{\"text\": \"d1\"}\n\n{\"document\": \"d2\"}\n"
      "{\"document\": \"d3\"}\n{\"document\": \"d4\"}\n";
  const CliResult result = Run(
      {"rerank", "--query=q", "--input=-", "--batch=2", "--return_documents", "--request_id=job"},
      documents);
  EXPECT_EQ(result.code, kExitOk) << result.err;
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 3U);
  const std::vector<v1::RerankRequest> requests = inference_.rerank_requests();
  ASSERT_EQ(requests.size(), 3U);
  EXPECT_THAT(requests[0].documents(), ::testing::ElementsAre("d0", "d1"));
  EXPECT_THAT(requests[1].documents(), ::testing::ElementsAre("d2", "d3"));
  EXPECT_THAT(requests[2].documents(), ::testing::ElementsAre("d4"));
  for (const v1::RerankRequest& request : requests) EXPECT_EQ(request.query(), "q");
  const v1::RerankResponse first = FromJson<v1::RerankResponse>(lines[0]);
  ASSERT_EQ(first.results_size(), 2);
  EXPECT_EQ(first.results(0).index(), 1U);
  EXPECT_EQ(first.results(0).document(), "d1");
  EXPECT_EQ(first.metadata().request_id(), "job");
  EXPECT_EQ(FromJson<v1::RerankResponse>(lines[2]).results(0).document(), "d4");
}

TEST_F(CliEndToEnd, AFailedChunkStopsTheRunAfterTheAnswersBeforeIt) {
  const CliResult result = Run({"classify", "--input=-", "--batch=1"},
                               "{\"text\": \"ok\"}\n{\"text\": \"boom\"}\n{\"text\": \"never\"}\n");
  EXPECT_EQ(result.code, kExitRpcError);
  EXPECT_EQ(Lines(result.out).size(), 1U);
  EXPECT_EQ(result.err,
            "dflash-cli: Classify (call 2 of 3): RESOURCE_EXHAUSTED: queue full; retry\n");
  EXPECT_EQ(inference_.classify_requests().size(), 2U);
}

TEST_F(CliEndToEnd, BadInputIsAUsageErrorBeforeAnyCall) {
  CliResult result = Run({"classify", "--input=-"}, "{\"text\": \"a\"}\n{\"text\": 1}\n");
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_EQ(result.err, "dflash-cli: <stdin>:2: \"text\" must be a string\n");
  result = Run({"classify", "--text=a", "--top_n=1"});
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_EQ(result.err,
            "dflash-cli: --top_n is not a flag of 'classify' (see 'dflash-cli classify --help')\n");
  result = Run({"info", "--tls_ca=/nonexistent/ca.pem"});
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, StartsWith("dflash-cli: --tls_ca=/nonexistent/ca.pem: "));
  result = Run({"--api_key=bad\nkey", "info"}, "", /*with_key=*/false);
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_EQ(result.out, "");
  EXPECT_TRUE(inference_.calls().empty());
}

TEST_F(CliEndToEnd, HelpGoesToStdout) {
  const CliResult result = Run({"embed", "--help"});
  EXPECT_EQ(result.code, kExitOk);
  EXPECT_THAT(result.out, HasSubstr("--dimensions=N"));
  EXPECT_EQ(result.err, "");
  EXPECT_TRUE(inference_.calls().empty());
}

TEST_F(CliEndToEnd, EmbedTokenizeAndPrettyOutput) {
  CliResult result = Run({"embed", "--text=a", "--text=b"});
  EXPECT_EQ(result.code, kExitOk) << result.err;
  const v1::EmbedResponse embed = FromJson<v1::EmbedResponse>(Lines(result.out).at(0));
  ASSERT_EQ(embed.embeddings_size(), 2);
  EXPECT_THAT(embed.embeddings(1).float32_values(), ::testing::ElementsAre(0.5F, -0.5F));

  result = Run({"tokenize", "--text=q", "--text_pair=p", "--noadd_special_tokens", "--pretty"});
  EXPECT_EQ(result.code, kExitOk) << result.err;
  EXPECT_THAT(result.out, StartsWith("{\n \"encodings\": [\n"));
  EXPECT_THAT(result.out, HasSubstr("\"piece\": \"[CLS]\""));
  EXPECT_EQ(result.out.back(), '\n');
  const std::vector<v1::TokenizeRequest> requests = inference_.tokenize_requests();
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_TRUE(requests[0].has_add_special_tokens());
  EXPECT_FALSE(requests[0].add_special_tokens());
}

TEST_F(CliEndToEnd, TokensPrintsTheEntities) {
  const CliResult result =
      Run({"tokens", "--text=Paris", "--text=Rome", "--aggregation=simple", "--ignore_labels=O"});
  EXPECT_EQ(result.code, kExitOk) << result.err;
  const v1::TokenClassifyResponse response =
      FromJson<v1::TokenClassifyResponse>(Lines(result.out).at(0));
  ASSERT_EQ(response.results_size(), 2);
  EXPECT_EQ(response.results(1).entities(0).word(), "Rome");
  EXPECT_EQ(response.results(1).entities(0).label(), "LOC");
  const std::vector<v1::TokenClassifyRequest> requests = inference_.token_classify_requests();
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(requests[0].aggregation(), v1::AGGREGATION_STRATEGY_SIMPLE);
  EXPECT_THAT(requests[0].ignore_labels(), ::testing::ElementsAre("O"));
}

TEST_F(CliEndToEnd, TimeoutSetsTheDeadline) {
  EXPECT_EQ(Run({"--timeout=5s", "info"}).code, kExitOk);
  EXPECT_EQ(Run({"--timeout=inf", "info"}).code, kExitOk);
  const std::vector<SeenCall> calls = inference_.calls();
  ASSERT_EQ(calls.size(), 2U);
  EXPECT_TRUE(calls[0].has_deadline);
  EXPECT_LE(calls[0].time_left, std::chrono::seconds(6));
  EXPECT_GT(calls[0].time_left, std::chrono::seconds(1));
  EXPECT_FALSE(calls[1].has_deadline);
}

TEST_F(CliEndToEnd, Health) {
  CliResult result = Run({"health"});
  EXPECT_EQ(result.code, kExitOk) << result.err;
  EXPECT_EQ(result.out, "{\"status\":\"SERVING\"}\n");
  result = Run({"health", "--service=dflash.v1.InferenceService"});
  EXPECT_EQ(result.code, kExitOk) << result.err;

  result = Run({"health", "--service=draining"});
  EXPECT_EQ(result.code, kExitRpcError);
  EXPECT_EQ(result.out, "{\"status\":\"NOT_SERVING\"}\n");
  EXPECT_EQ(result.err, "dflash-cli: health: \"draining\" is NOT_SERVING\n");

  result = Run({"health", "--service=nope"});
  EXPECT_EQ(result.code, kExitRpcError);
  EXPECT_EQ(result.err, "dflash-cli: Health.Check: NOT_FOUND: unknown service\n");
}

TEST_F(CliEndToEnd, UnreachableServerIsAnRpcError) {
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  // Port 1 on loopback refuses the connection at once.
  const int code = RunCli({"--target=127.0.0.1:1", "--timeout=5s", "info"}, in, out, err);
  EXPECT_EQ(code, kExitRpcError);
  EXPECT_EQ(out.str(), "");
  EXPECT_THAT(err.str(), StartsWith("dflash-cli: Info: UNAVAILABLE: "));
  EXPECT_EQ(err.str().find('\n'), err.str().size() - 1);
}

std::string ReadFixture(const std::string& name) {
  std::ifstream file(absl::StrCat(DFLASH_SOURCE_DIR, "/tests/client/testdata/", name));
  EXPECT_TRUE(file.good()) << name;
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// TLS fixtures (testdata/make-certs.sh): a private CA, a server certificate for "dflash.test" and
// a client certificate; the server requires and verifies the client's.
TEST(CliTls, MutualTlsWithAPrivateCaAndAServerNameOverride) {
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = ReadFixture("ca.pem");
  ssl.pem_key_cert_pairs.push_back({ReadFixture("server.key"), ReadFixture("server.pem")});
  FakeHealth health;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &port);
  builder.RegisterService(&health);
  const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string dir = absl::StrCat(DFLASH_SOURCE_DIR, "/tests/client/testdata/");
  const std::vector<std::string> connection = {absl::StrCat("--target=127.0.0.1:", port),
                                               "--timeout=10s", "--tls_ca=" + dir + "ca.pem"};
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = connection;
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("health");
    std::istringstream in;
    std::ostringstream out;
    std::ostringstream err;
    const int code = RunCli(args, in, out, err);
    return CliResult{code, out.str(), err.str()};
  };
  const std::vector<std::string> client_cert = {"--tls_cert=" + dir + "client.pem",
                                                "--tls_key=" + dir + "client.key"};

  std::vector<std::string> args = client_cert;
  args.push_back("--tls_server_name=dflash.test");
  CliResult result = run(args);
  EXPECT_EQ(result.code, kExitOk) << result.err;
  EXPECT_EQ(result.out, "{\"status\":\"SERVING\"}\n");

  // The server's certificate names dflash.test, not 127.0.0.1.
  result = run(client_cert);
  EXPECT_EQ(result.code, kExitRpcError);
  EXPECT_THAT(result.err, StartsWith("dflash-cli: Health.Check: UNAVAILABLE: "));

  // The server requires a client certificate.
  result = run({"--tls_server_name=dflash.test"});
  EXPECT_EQ(result.code, kExitRpcError);
  EXPECT_THAT(result.err, StartsWith("dflash-cli: Health.Check: UNAVAILABLE: "));
}

}  // namespace
}  // namespace dflash::client
