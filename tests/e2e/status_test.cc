// End-to-end status codes (dflash.proto, "Errors"), one test per row of the table, plus fairness
// between split and small requests, overload (with and without deadlines) and graceful drain.
// Engines are held at a gate (EngineControl) to queue requests behind a busy engine
// deterministically; the gate's log proves what was never computed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "server/service/inference_pipeline.h"
#include "server/service/model_catalog.h"
#include "server/service/worker_pool.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/http_client.h"

namespace dflash::e2e {
namespace {

using ::testing::HasSubstr;
using HealthStatus = grpc::health::v1::HealthCheckResponse;

// More than kMaxInputLength tokens, fewer than kMaxTextBytes bytes.
constexpr char kLongText[] =
    "And it came to pass, when the king heard the words of the book of the law, that he rent his "
    "clothes, and he sent for the priests and the scribes, and for all the elders of the land, "
    "and they came unto him in the house by the river, and he read in their ears all the words.";
constexpr int kMaxTextBytes = 1000;
constexpr int kMaxInputs = 8;
constexpr int kMaxCandidateLabels = 4;
constexpr int kMaxSequences = 12;
constexpr int kMaxQueuedRequests = 2;
// Between kMaxInputs and kMaxSequences inputs of kMaxInputLength tokens.
constexpr int kMaxRequestTokens = 600;
// Small batches: nothing here needs more, and each server start runs one warm-up batch.
constexpr int kMaxBatchTokens = 128;

v1::ClassifyRequest ClassifyOf(const std::string& text, const std::string& model = "demo") {
  v1::ClassifyRequest request;
  request.set_model(model);
  request.add_inputs()->set_text(text);
  return request;
}

// The code and message of a failed call, for matching.
struct Failure {
  grpc::StatusCode code;
  std::string message;
};
template <typename Call>
Failure Fail(Call call) {
  const grpc::Status status = call(NewContext().get());
  return {status.error_code(), status.error_message()};
}

double Scrape(TestServer& server, absl::string_view name,
              const std::map<std::string, std::string>& labels) {
  return ScrapeRegistry(server.runtime(), name, labels);
}

// A server of the demo model alone, its engine behind `control`'s gate.
absl::StatusOr<std::unique_ptr<TestServer>> StartGatedDemo(std::shared_ptr<EngineControl> control,
                                                           InnerEngine inner = InnerEngine::kNull) {
  return TestServer::Start(
      TestServerConfig({TestModelEntry("demo", DemoModelDir(), kMaxBatchTokens)}),
      GatedLoader({{"demo", std::move(control)}}, inner));
}

class StatusTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<TinyModels>> models = WriteTinyModels();
    ASSERT_TRUE(models.ok()) << models.status();
    models_ = std::move(*models).release();
    control_ = new std::shared_ptr<EngineControl>(std::make_shared<EngineControl>());
    ModelEntry demo = TestModelEntry("demo", DemoModelDir(), kMaxBatchTokens);
    demo.limits.max_inputs = kMaxInputs;
    demo.limits.max_candidate_labels = kMaxCandidateLabels;
    demo.limits.max_sequences = kMaxSequences;
    demo.limits.max_text_bytes = kMaxTextBytes;
    demo.limits.max_request_tokens = kMaxRequestTokens;
    demo.batching.max_queued_requests = kMaxQueuedRequests;
    ServerConfig config = TestServerConfig(
        {demo, TestModelEntry("embed", models_->embed), TestModelEntry("rerank", models_->rerank)});
    config.http_listen = "127.0.0.1:0";  // For the HTTP client that hangs up.
    absl::StatusOr<std::unique_ptr<TestServer>> server =
        TestServer::Start(config, GatedLoader({{"demo", *control_}}));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }

  static void TearDownTestSuite() {
    if (control_ != nullptr) (*control_)->Open();
    delete server_;
    delete tokenizer_;
    delete control_;
    delete models_;
    // --gtest_repeat sets the suite up again: nothing may point at what was just deleted.
    server_ = nullptr;
    tokenizer_ = nullptr;
    control_ = nullptr;
    models_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(server_, nullptr) << "the server did not start"; }
  // Leaves the server as the next test expects it (also after a failure): engine free, queue
  // empty.
  void TearDown() override {
    control().Open();
    EXPECT_TRUE(server_->WaitForQueuedRequests("demo", 0));
    EXPECT_TRUE(control().WaitUntilIdle());
  }

  static EngineControl& control() { return **control_; }
  static v1::InferenceService::Stub& stub() { return server_->stub(); }

  // The model input ids of a single text, as the server computes them.
  static std::vector<int32_t> IdsOf(const std::string& text) {
    if (tokenizer_ == nullptr) {
      absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(DemoModelDir());
      EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
      if (!tokenizer.ok()) return {};
      tokenizer_ = std::move(*tokenizer).release();
    }
    TruncationOptions truncation;
    truncation.strategy = TruncationStrategy::kLongestFirst;
    truncation.max_length = kMaxInputLength;
    absl::StatusOr<Encoding> encoding = tokenizer_->Encode(text, std::nullopt, truncation);
    EXPECT_TRUE(encoding.ok()) << encoding.status();
    return encoding.ok() ? encoding->ids : std::vector<int32_t>{};
  }

  // Holds the engine with one request in it; returns that request's call.
  static std::unique_ptr<AsyncClassify> HoldEngine() {
    control().Close();
    const int batches = control().batches();
    std::unique_ptr<AsyncClassify> held = StartClassify(stub(), ClassifyOf("holding the engine"));
    EXPECT_TRUE(control().WaitForBatches(batches + 1));
    return held;
  }

  static double Dropped(const std::string& code) {
    return Scrape(*server_, "dflash_dropped_requests_total", {{"model", "demo"}, {"code", code}});
  }

  // Frees the engine that `held` (HoldEngine) holds, then checks that the request of `text`,
  // dropped from the queue, was never computed while a request queued after it was, and that
  // dflash_dropped_requests_total{code} counts it: `dropped_before` + 1.
  static void ExpectDroppedNotComputed(std::unique_ptr<AsyncClassify> held, const std::string& text,
                                       const std::string& code, double dropped_before) {
    control().Open();
    EXPECT_TRUE(held->Wait().ok());
    // A request queued after it: answered once the dropped one has been taken from the queue.
    v1::ClassifyResponse response;
    ASSERT_TRUE(stub().Classify(NewContext().get(), ClassifyOf("after"), &response).ok());
    EXPECT_TRUE(control().Saw(IdsOf("after"))) << "IdsOf does not match what the server runs";
    EXPECT_FALSE(control().Saw(IdsOf(text))) << "the " << code << " request was computed";
    EXPECT_EQ(Dropped(code), dropped_before + 1);
  }

  static Failure Classify(const v1::ClassifyRequest& request) {
    return Fail([&](grpc::ClientContext* context) {
      v1::ClassifyResponse response;
      return stub().Classify(context, request, &response);
    });
  }
  static Failure ZeroShot(const v1::ZeroShotRequest& request) {
    return Fail([&](grpc::ClientContext* context) {
      v1::ZeroShotResponse response;
      return stub().ZeroShot(context, request, &response);
    });
  }
  static Failure Rerank(const v1::RerankRequest& request) {
    return Fail([&](grpc::ClientContext* context) {
      v1::RerankResponse response;
      return stub().Rerank(context, request, &response);
    });
  }
  static Failure Embed(const v1::EmbedRequest& request) {
    return Fail([&](grpc::ClientContext* context) {
      v1::EmbedResponse response;
      return stub().Embed(context, request, &response);
    });
  }
  static Failure Tokenize(const v1::TokenizeRequest& request) {
    return Fail([&](grpc::ClientContext* context) {
      v1::TokenizeResponse response;
      return stub().Tokenize(context, request, &response);
    });
  }

  static v1::ZeroShotRequest ZeroShotOf(int texts, int labels) {
    v1::ZeroShotRequest request;
    request.set_model("demo");
    for (int t = 0; t < texts; ++t) request.add_texts(absl::StrCat("text number ", t));
    for (int l = 0; l < labels; ++l) request.add_candidate_labels(absl::StrCat("label", l));
    return request;
  }

  static inline TinyModels* models_ = nullptr;
  static inline TestServer* server_ = nullptr;
  static inline std::shared_ptr<EngineControl>* control_ = nullptr;
  static inline Tokenizer* tokenizer_ = nullptr;
};

#define EXPECT_FAILURE(failure, status_code, substring)                                         \
  do {                                                                                          \
    const Failure failure_ = (failure);                                                         \
    EXPECT_EQ(failure_.code, grpc::StatusCode::status_code) << "message: " << failure_.message; \
    EXPECT_THAT(failure_.message, HasSubstr(substring));                                        \
  } while (false)

// ---------------------------------------------------------------------------------------------
// INVALID_ARGUMENT, naming the field.
// ---------------------------------------------------------------------------------------------

TEST_F(StatusTest, InvalidArgumentForEmptyInputs) {
  v1::ClassifyRequest classify;
  classify.set_model("demo");
  EXPECT_FAILURE(Classify(classify), INVALID_ARGUMENT, "inputs: at least one");
  EXPECT_FAILURE(ZeroShot(ZeroShotOf(0, 2)), INVALID_ARGUMENT, "texts: at least one");
  EXPECT_FAILURE(ZeroShot(ZeroShotOf(2, 0)), INVALID_ARGUMENT, "candidate_labels: at least one");
  v1::RerankRequest rerank;
  rerank.set_model("rerank");
  rerank.set_query("q");
  EXPECT_FAILURE(Rerank(rerank), INVALID_ARGUMENT, "documents: at least one");
  v1::EmbedRequest embed;
  embed.set_model("embed");
  EXPECT_FAILURE(Embed(embed), INVALID_ARGUMENT, "inputs: at least one");
  v1::TokenizeRequest tokenize;
  tokenize.set_model("demo");
  EXPECT_FAILURE(Tokenize(tokenize), INVALID_ARGUMENT, "inputs: at least one");
}

TEST_F(StatusTest, InvalidUtf8IsRefusedByProtobufAndByTheServersOwnCheck) {
  const std::string invalid = "valid start \xC3\x28 invalid continuation";
  // Over gRPC, proto3 `string` fields are checked by protobuf itself: the client serializes the
  // bytes (logging an error), the server's parser refuses the message, naming the field.
  v1::ClassifyRequest request = ClassifyOf("fine");
  request.add_inputs()->set_text(invalid);
  EXPECT_FAILURE(Classify(request), INVALID_ARGUMENT, "dflash.v1.TextInput.text");
  EXPECT_TRUE(CheckHealth(server_->health(), "").serving == HealthStatus::SERVING);

  // The server's own check (for transports or clients that skip protobuf's) through the pipeline.
  serving::ModelCatalog catalog;
  absl::StatusOr<std::unique_ptr<serving::ServedModel>> model =
      serving::ServedModel::Load(TestModelEntry("embed", models_->embed), nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(catalog.Add(std::move(*model)).ok());
  serving::WorkerPool pool(2);
  serving::InferencePipeline pipeline(catalog, pool, nullptr, {kTestVersion, kTestRevision});

  v1::TokenizeRequest tokenize;
  tokenize.add_inputs()->set_text("fine");
  tokenize.add_inputs()->set_text(invalid);
  std::promise<absl::Status> tokenized;
  pipeline.Tokenize(tokenize, serving::CallContext{}, [&](absl::StatusOr<v1::TokenizeResponse> r) {
    tokenized.set_value(r.status());
  });
  const absl::Status tokenize_status = tokenized.get_future().get();
  EXPECT_EQ(tokenize_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tokenize_status.message()), HasSubstr("inputs[1].text"));

  v1::TokenizeRequest pair = tokenize;
  pair.mutable_inputs(1)->set_text("fine");
  pair.mutable_inputs(1)->set_text_pair(invalid);
  std::promise<absl::Status> pair_tokenized;
  pipeline.Tokenize(pair, serving::CallContext{}, [&](absl::StatusOr<v1::TokenizeResponse> r) {
    pair_tokenized.set_value(r.status());
  });
  const absl::Status pair_status = pair_tokenized.get_future().get();
  EXPECT_EQ(pair_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(pair_status.message()), HasSubstr("inputs[1].text_pair"));

  v1::EmbedRequest embed;
  embed.add_inputs("fine");
  embed.add_inputs(invalid);
  std::promise<absl::Status> embedded;
  pipeline.Embed(embed, serving::CallContext{},
                 [&](absl::StatusOr<v1::EmbedResponse> r) { embedded.set_value(r.status()); });
  const absl::Status embed_status = embedded.get_future().get();
  EXPECT_EQ(embed_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(embed_status.message()), HasSubstr("inputs[1]"));
  catalog.ShutdownAll();
}

TEST_F(StatusTest, InvalidArgumentForTooManyInputs) {
  v1::ClassifyRequest classify;
  classify.set_model("demo");
  for (int i = 0; i <= kMaxInputs; ++i) classify.add_inputs()->set_text("x");
  EXPECT_FAILURE(Classify(classify), INVALID_ARGUMENT,
                 absl::StrCat("inputs: ", kMaxInputs + 1,
                              " inputs, more than the server's limit "
                              "of ",
                              kMaxInputs));
  EXPECT_FAILURE(ZeroShot(ZeroShotOf(kMaxInputs + 1, 1)), INVALID_ARGUMENT, "texts: 9 texts");
  EXPECT_FAILURE(ZeroShot(ZeroShotOf(1, kMaxCandidateLabels + 1)), INVALID_ARGUMENT,
                 "candidate_labels: 5 labels");
  EXPECT_FAILURE(ZeroShot(ZeroShotOf(4, 4)), INVALID_ARGUMENT,
                 "texts x candidate_labels: 16 pairs");
  // Exactly at the limits is fine.
  v1::ClassifyRequest at_limit = classify;
  at_limit.mutable_inputs()->RemoveLast();
  v1::ClassifyResponse response;
  EXPECT_TRUE(stub().Classify(NewContext().get(), at_limit, &response).ok());
}

TEST_F(StatusTest, InvalidArgumentForTooLongInputWithoutTruncation) {
  v1::ClassifyRequest classify = ClassifyOf("short");
  classify.add_inputs()->set_text(kLongText);
  classify.set_truncate(false);
  EXPECT_FAILURE(Classify(classify), INVALID_ARGUMENT, "inputs[1]: ");
  EXPECT_FAILURE(Classify(classify), INVALID_ARGUMENT, "set truncate = true");
  v1::EmbedRequest embed;
  embed.set_model("embed");
  embed.add_inputs(kLongText);
  embed.set_truncate(false);
  EXPECT_FAILURE(Embed(embed), INVALID_ARGUMENT, "inputs[0]: ");
  v1::ZeroShotRequest zero_shot = ZeroShotOf(1, 1);
  zero_shot.set_texts(0, kLongText);
  zero_shot.set_truncate(false);
  EXPECT_FAILURE(ZeroShot(zero_shot), INVALID_ARGUMENT, "texts[0] with candidate_labels[0]");
  // The same input truncated is fine.
  classify.set_truncate(true);
  v1::ClassifyResponse response;
  ASSERT_TRUE(stub().Classify(NewContext().get(), classify, &response).ok());
  EXPECT_TRUE(response.results(1).truncated());
}

TEST_F(StatusTest, InvalidArgumentForEmptyCandidateLabel) {
  v1::ZeroShotRequest request = ZeroShotOf(1, 3);
  request.set_candidate_labels(1, "");
  EXPECT_FAILURE(ZeroShot(request), INVALID_ARGUMENT, "candidate_labels[1]: must not be empty");
  request.set_candidate_labels(1, std::string(kMaxTextBytes + 1, 'l'));
  EXPECT_FAILURE(ZeroShot(request), INVALID_ARGUMENT, "candidate_labels[1]: ");
}

TEST_F(StatusTest, InvalidArgumentForBadHypothesisTemplate) {
  v1::ZeroShotRequest request = ZeroShotOf(1, 2);
  request.set_hypothesis_template("This example has no placeholder.");
  EXPECT_FAILURE(ZeroShot(request), INVALID_ARGUMENT, "hypothesis_template");
  EXPECT_FAILURE(ZeroShot(request), INVALID_ARGUMENT, "found 0 times");
  request.set_hypothesis_template("{} and {} again");
  EXPECT_FAILURE(ZeroShot(request), INVALID_ARGUMENT, "found 2 times");
}

TEST_F(StatusTest, InvalidArgumentForDimensionsOverHidden) {
  v1::EmbedRequest request;
  request.set_model("embed");
  request.add_inputs("text");
  request.set_dimensions(33);
  EXPECT_FAILURE(Embed(request), INVALID_ARGUMENT, "dimensions: 33");
  request.set_dimensions(32);
  v1::EmbedResponse response;
  EXPECT_TRUE(stub().Embed(NewContext().get(), request, &response).ok());
}

TEST_F(StatusTest, InvalidArgumentForTextOverMaxTextBytes) {
  const std::string over(kMaxTextBytes + 1, 'a');
  const std::string at_limit(kMaxTextBytes, 'a');
  v1::ClassifyRequest classify = ClassifyOf("fine");
  classify.add_inputs()->set_text(over);
  EXPECT_FAILURE(Classify(classify), INVALID_ARGUMENT, "inputs[1].text: 1001 bytes");
  classify.mutable_inputs(1)->set_text("fine");
  classify.mutable_inputs(1)->set_text_pair(over);
  EXPECT_FAILURE(Classify(classify), INVALID_ARGUMENT, "inputs[1].text_pair: 1001 bytes");
  v1::ZeroShotRequest zero_shot = ZeroShotOf(2, 1);
  zero_shot.set_texts(1, over);
  EXPECT_FAILURE(ZeroShot(zero_shot), INVALID_ARGUMENT, "texts[1]: 1001 bytes");
  v1::TokenizeRequest tokenize;
  tokenize.set_model("demo");
  tokenize.add_inputs()->set_text(over);
  EXPECT_FAILURE(Tokenize(tokenize), INVALID_ARGUMENT, "inputs[0].text: 1001 bytes");
  // At the limit: accepted (and truncated).
  classify.mutable_inputs(1)->set_text_pair(at_limit);
  v1::ClassifyResponse response;
  EXPECT_TRUE(stub().Classify(NewContext().get(), classify, &response).ok());
}

TEST_F(StatusTest, InvalidArgumentForTooManyTokensAfterTokenization) {
  // 3 texts x 4 labels = 12 pairs of kMaxInputLength tokens: within every count limit, but 768
  // tokens.
  v1::ZeroShotRequest request = ZeroShotOf(3, kMaxCandidateLabels);
  for (int t = 0; t < 3; ++t) request.set_texts(t, kLongText);
  const int batches = control().batches();
  EXPECT_FAILURE(ZeroShot(request), INVALID_ARGUMENT,
                 absl::StrCat("request: 768 tokens after tokenization, more than the server's "
                              "limit of ",
                              kMaxRequestTokens));
  EXPECT_FAILURE(ZeroShot(request), INVALID_ARGUMENT, "max_request_tokens");
  EXPECT_FAILURE(ZeroShot(request), INVALID_ARGUMENT, "split the request");
  EXPECT_EQ(control().batches(), batches) << "a refused request reached the engine";
  // Two of the texts (512 tokens) are within the limit.
  request.mutable_texts()->RemoveLast();
  v1::ZeroShotResponse response;
  EXPECT_TRUE(stub().ZeroShot(NewContext().get(), request, &response).ok());
}

// ---------------------------------------------------------------------------------------------
// NOT_FOUND, FAILED_PRECONDITION.
// ---------------------------------------------------------------------------------------------

TEST_F(StatusTest, NotFoundForUnknownModel) {
  EXPECT_FAILURE(Classify(ClassifyOf("x", "no-such-model")), NOT_FOUND, "'no-such-model'");
  EXPECT_FAILURE(Classify(ClassifyOf("x", "no-such-model")), NOT_FOUND, "demo, embed, rerank");
  v1::InfoRequest info;
  info.set_model("no-such-model");
  v1::InfoResponse response;
  EXPECT_EQ(stub().Info(NewContext().get(), info, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::EmbedRequest embed;
  embed.set_model("no-such-model");
  embed.add_inputs("x");
  EXPECT_FAILURE(Embed(embed), NOT_FOUND, "no-such-model");
}

TEST_F(StatusTest, FailedPreconditionForTaskTheModelCannotDo) {
  v1::RerankRequest rerank;
  rerank.set_model("demo");  // Three labels: not a cross-encoder.
  rerank.set_query("q");
  rerank.add_documents("d");
  EXPECT_FAILURE(Rerank(rerank), FAILED_PRECONDITION, "has 3");
  v1::EmbedRequest embed;
  embed.set_model("demo");  // A classifier without pooling.
  embed.add_inputs("x");
  EXPECT_FAILURE(Embed(embed), FAILED_PRECONDITION, "not served for embeddings");
  v1::ZeroShotRequest zero_shot = ZeroShotOf(1, 1);
  zero_shot.set_model("embed");  // No entailment label.
  EXPECT_FAILURE(ZeroShot(zero_shot), FAILED_PRECONDITION, "entailment");
  EXPECT_FAILURE(Classify(ClassifyOf("x", "embed")), FAILED_PRECONDITION,
                 "no sequence-classification head");
}

// ---------------------------------------------------------------------------------------------
// RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, CANCELLED, INTERNAL.
// ---------------------------------------------------------------------------------------------

TEST_F(StatusTest, ResourceExhaustedWhenTheQueueIsFullWithRetryPushback) {
  std::unique_ptr<AsyncClassify> held = HoldEngine();
  std::vector<std::unique_ptr<AsyncClassify>> queued;
  for (int i = 0; i < kMaxQueuedRequests; ++i) {
    queued.push_back(StartClassify(stub(), ClassifyOf(absl::StrCat("queued ", i))));
  }
  ASSERT_TRUE(server_->WaitForQueuedRequests("demo", kMaxQueuedRequests));

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kWaitLimit));
  v1::ClassifyResponse response;
  const grpc::Status status = stub().Classify(&context, ClassifyOf("one too many"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("queue full"));
  EXPECT_THAT(status.error_message(), HasSubstr("retry"));
  const auto& trailers = context.GetServerTrailingMetadata();
  auto pushback = trailers.find("grpc-retry-pushback-ms");
  ASSERT_NE(pushback, trailers.end()) << "no retry pushback trailer";
  EXPECT_EQ(std::string(pushback->second.data(), pushback->second.size()), "100");

  control().Open();
  EXPECT_TRUE(held->Wait().ok());
  for (auto& call : queued) EXPECT_TRUE(call->Wait().ok()) << call->status.error_message();
  // The queue has room again.
  EXPECT_TRUE(stub().Classify(NewContext().get(), ClassifyOf("room again"), &response).ok());
}

TEST_F(StatusTest, DeadlineExceededWhileQueuedIsNeverComputed) {
  const double expired_before = Dropped("DEADLINE_EXCEEDED");
  std::unique_ptr<AsyncClassify> held = HoldEngine();
  const std::string text = "this request expires in the queue and must never be computed";
  const absl::Duration timeout = absl::Milliseconds(500);
  const absl::Time deadline = absl::Now() + timeout;
  std::unique_ptr<AsyncClassify> expiring = StartClassify(stub(), ClassifyOf(text), timeout);
  ASSERT_TRUE(server_->WaitForQueuedRequests("demo", 1));
  EXPECT_EQ(expiring->Wait().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server's copy of the deadline is the client's plus the transit time; the batcher compares
  // it with its own clock when it takes the request. Let that deadline pass surely before the
  // engine is freed (a late one makes the test fail, never pass wrongly).
  absl::SleepFor(deadline + absl::Seconds(1) - absl::Now());
  // Counted as an expired request, although gRPC has cancelled the call by then as well.
  ExpectDroppedNotComputed(std::move(held), text, "DEADLINE_EXCEEDED", expired_before);
}

TEST_F(StatusTest, CancelledWhileQueuedIsNeverComputed) {
  const double cancelled_before = Dropped("CANCELLED");
  std::unique_ptr<AsyncClassify> held = HoldEngine();
  const std::string text = "this request is cancelled in the queue and must never be computed";
  std::unique_ptr<AsyncClassify> cancelled = StartClassify(stub(), ClassifyOf(text));
  ASSERT_TRUE(server_->WaitForQueuedRequests("demo", 1));
  cancelled->context.TryCancel();
  EXPECT_EQ(cancelled->Wait().error_code(), grpc::StatusCode::CANCELLED);
  // gRPC tells the server about the cancellation asynchronously (RST_STREAM, then OnCancel on one
  // of its threads): the engine is freed once the queued request carries it.
  ASSERT_TRUE(server_->WaitForCancelledQueuedRequests("demo", 1));
  ExpectDroppedNotComputed(std::move(held), text, "CANCELLED", cancelled_before);
}

TEST_F(StatusTest, HttpClientGoneWhileQueuedIsNeverComputed) {
  const double cancelled_before = Dropped("CANCELLED");
  std::unique_ptr<AsyncClassify> held = HoldEngine();
  const std::string text = "this HTTP client hangs up in the queue and is never computed";
  {
    absl::StatusOr<HttpClient> client = HttpClient::Connect(server_->runtime().http_port());
    ASSERT_TRUE(client.ok()) << client.status();
    const std::string body = absl::StrCat(R"({"inputs": ")", text, R"("})");
    ASSERT_TRUE(client
                    ->SendRaw(absl::StrCat("POST /predict HTTP/1.1\r\nHost: localhost\r\n"
                                           "Content-Type: application/json\r\nContent-Length: ",
                                           body.size(), "\r\n\r\n", body))
                    .ok());
    ASSERT_TRUE(server_->WaitForQueuedRequests("demo", 1));
  }  // The client closes its socket while its request waits behind the held batch.
  // The listener sees the hang-up on the suspended connection's socket and cancels the call.
  ASSERT_TRUE(server_->WaitForCancelledQueuedRequests("demo", 1));
  ExpectDroppedNotComputed(std::move(held), text, "CANCELLED", cancelled_before);
}

TEST_F(StatusTest, InternalForAFailedBatchThenTheServerGoesOn) {
  const double errors_before = Scrape(*server_, "dflash_engine_errors_total", {{"model", "demo"}});
  control().FailNextBatch(absl::InternalError("injected engine fault"));
  v1::ClassifyRequest request = ClassifyOf("this batch fails");
  request.add_inputs()->set_text("and takes its whole request with it");
  EXPECT_FAILURE(Classify(request), INTERNAL, "injected engine fault");

  // Later requests succeed and the server reports healthy.
  v1::ClassifyResponse response;
  ASSERT_TRUE(stub().Classify(NewContext().get(), request, &response).ok());
  ASSERT_EQ(response.results_size(), 2);
  double sum = 0;
  for (const v1::LabelScore& score : response.results(0).scores()) sum += score.score();
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_EQ(CheckHealth(server_->health(), "").serving, HealthStatus::SERVING);
  EXPECT_EQ(CheckHealth(server_->health(), serving::kInferenceServiceName).serving,
            HealthStatus::SERVING);
  EXPECT_EQ(Scrape(*server_, "dflash_engine_errors_total", {{"model", "demo"}}), errors_before + 1);

  // In a stream, the failed request is answered in place with INTERNAL and the stream goes on.
  control().FailNextBatch(absl::InternalError("injected engine fault"));
  auto context = NewContext();
  auto stream = stub().ClassifyStream(context.get());
  v1::ClassifyRequest first = ClassifyOf("first message fails");
  first.set_request_id("s0");
  v1::ClassifyStreamResponse message;
  ASSERT_TRUE(stream->Write(first));
  ASSERT_TRUE(stream->Read(&message));
  ASSERT_TRUE(message.has_error());
  EXPECT_EQ(message.error().code(), static_cast<int>(grpc::StatusCode::INTERNAL));
  EXPECT_EQ(message.error().request_id(), "s0");
  v1::ClassifyRequest second = ClassifyOf("second message works");
  second.set_request_id("s1");
  ASSERT_TRUE(stream->Write(second));
  ASSERT_TRUE(stream->Read(&message));
  ASSERT_TRUE(message.has_response()) << message.error().message();
  EXPECT_EQ(message.response().metadata().request_id(), "s1");
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// ---------------------------------------------------------------------------------------------
// Fairness: a request split over several batches takes turns with the requests behind it.
// ---------------------------------------------------------------------------------------------

TEST_F(StatusTest, SmallRequestBehindASplitOneIsAnsweredBeforeIt) {
  std::unique_ptr<AsyncClassify> held = HoldEngine();
  const int held_batch = control().batches() - 1;
  // kMaxInputs inputs of kMaxInputLength tokens: two per batch of kMaxBatchTokens.
  v1::ClassifyRequest large_request;
  large_request.set_model("demo");
  for (int i = 0; i < kMaxInputs; ++i) {
    large_request.add_inputs()->set_text(absl::StrCat("input ", i, ": ", kLongText));
  }
  std::unique_ptr<AsyncClassify> large = StartClassify(stub(), large_request);
  ASSERT_TRUE(server_->WaitForQueuedRequests("demo", 1));
  const std::string small_text = "a small request queued behind a large one";
  std::unique_ptr<AsyncClassify> small = StartClassify(stub(), ClassifyOf(small_text));
  ASSERT_TRUE(server_->WaitForQueuedRequests("demo", 2));
  // One batch through the gate at a time: the held one, the large request's first part, then the
  // small request beside the large one's second part; the third part then waits at the gate.
  for (int step = 0; step < 3; ++step) {
    const int arrived = control().batches();
    control().Open();
    control().Close();
    ASSERT_TRUE(control().WaitForBatches(arrived + 1));
  }
  const std::vector<std::vector<std::vector<int32_t>>> log = control().BatchLog();
  ASSERT_GT(log.size(), static_cast<size_t>(held_batch + 2));
  EXPECT_EQ(log[held_batch + 1].size(), 2u) << "the large request's first part";
  const std::vector<std::vector<int32_t>>& third = log[held_batch + 2];
  const bool small_in_third =
      std::find(third.begin(), third.end(), IdsOf(small_text)) != third.end();
  EXPECT_TRUE(small_in_third) << "the small request waited for the large one's parts";
  if (small_in_third) {
    EXPECT_TRUE(small->Wait().ok()) << small->status.error_message();
    EXPECT_FALSE(large->done()) << "a part of the large request is still at the gate";
  }
  control().Open();
  EXPECT_TRUE(held->Wait().ok());
  ASSERT_TRUE(large->Wait().ok()) << large->status.error_message();
  EXPECT_EQ(large->response.results_size(), kMaxInputs);
  ASSERT_TRUE(small->Wait().ok()) << small->status.error_message();
  EXPECT_EQ(small->response.results_size(), 1);
}

// ---------------------------------------------------------------------------------------------
// 6. Overload: a flood against a small queue is refused at once while the engine is busy, and
// the server answers normally afterwards.
// ---------------------------------------------------------------------------------------------

TEST_F(StatusTest, FloodIsRefusedWithResourceExhaustedAndTheServerRecovers) {
  std::unique_ptr<AsyncClassify> held = HoldEngine();
  constexpr int kClients = 8;
  constexpr int kCallsPerClient = 8;
  std::vector<std::unique_ptr<AsyncClassify>> calls(kClients * kCallsPerClient);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int n = 0; n < kCallsPerClient; ++n) {
        calls[static_cast<size_t>(c * kCallsPerClient + n)] =
            StartClassify(stub(), ClassifyOf(absl::StrCat("flood ", c, " ", n)));
      }
    });
  }
  for (std::thread& client : clients) client.join();
  // With the engine held, all but the queue's capacity are answered, every one of them
  // RESOURCE_EXHAUSTED, without waiting for the engine.
  const int refused_expected = kClients * kCallsPerClient - kMaxQueuedRequests;
  auto answered = [&] {
    int count = 0;
    for (const auto& call : calls) count += call->done() ? 1 : 0;
    return count;
  };
  PollUntil([&] { return answered() >= refused_expected; }, absl::Milliseconds(5));
  ASSERT_EQ(answered(), refused_expected);
  int refused = 0;
  for (const auto& call : calls) {
    if (!call->done()) continue;
    EXPECT_EQ(call->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << call->status.error_message();
    refused += call->status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? 1 : 0;
    EXPECT_EQ(call->context.GetServerTrailingMetadata().count("grpc-retry-pushback-ms"), 1u);
  }
  EXPECT_EQ(refused, refused_expected);
  EXPECT_EQ(server_->QueueStats("demo").requests, kMaxQueuedRequests);

  control().Open();
  EXPECT_TRUE(held->Wait().ok());
  int accepted = 0;
  for (const auto& call : calls) accepted += call->Wait().ok() ? 1 : 0;
  EXPECT_EQ(accepted, kMaxQueuedRequests);
  for (int i = 0; i < 3; ++i) {
    v1::ClassifyResponse response;
    EXPECT_TRUE(stub().Classify(NewContext().get(), ClassifyOf("normal again"), &response).ok());
  }
  EXPECT_EQ(CheckHealth(server_->health(), "").serving, HealthStatus::SERVING);
}

// ---------------------------------------------------------------------------------------------
// Overload with deadlines: a burst of requests with short deadlines against a slow engine. The
// server admits what it expects to finish in time, refuses the rest at once, and drops what falls
// behind; it computes no answer that arrives after its caller gave up.
// ---------------------------------------------------------------------------------------------

TEST(DeadlineTest, BurstWithShortDeadlinesIsAnsweredInTimeOrRefused) {
  auto control = std::make_shared<EngineControl>();
  absl::StatusOr<std::unique_ptr<TestServer>> started = StartGatedDemo(control);
  ASSERT_TRUE(started.ok()) << started.status();
  TestServer& server = **started;
  // Every request is two inputs of kMaxInputLength tokens: one full batch, 512 ms of engine time.
  constexpr absl::Duration kDelayPerToken = absl::Milliseconds(4);
  const absl::Duration request_time = kDelayPerToken * kMaxBatchTokens;
  v1::ClassifyRequest request;
  request.set_model("demo");
  request.add_inputs()->set_text(absl::StrCat("first: ", kLongText));
  request.add_inputs()->set_text(absl::StrCat("second: ", kLongText));
  control->SetDelayPerToken(kDelayPerToken);
  // One request without a short deadline first: the server learns the engine's speed from it.
  v1::ClassifyResponse response;
  ASSERT_TRUE(server.stub().Classify(NewContext().get(), request, &response).ok());

  auto count = [&](const std::string& code) {
    return ScrapeRegistry(server.runtime(), "dflash_requests_total",
                          {{"rpc", "Classify"}, {"model", "demo"}, {"code", code}});
  };
  auto total = [&] {
    return ScrapeRegistry(server.runtime(), "dflash_requests_total",
                          {{"rpc", "Classify"}, {"model", "demo"}});
  };
  const double ok_before = count("OK");
  const double total_before = total();
  // Time for three of them one after the other, and half of the fourth: the engine can answer
  // three in time; the deadline lies half a request away from every finish.
  const absl::Duration timeout = request_time * 3.5;
  constexpr int kBurst = 10;
  std::vector<std::unique_ptr<AsyncClassify>> calls;
  for (int i = 0; i < kBurst; ++i) calls.push_back(StartClassify(server.stub(), request, timeout));
  int ok = 0;
  int refused = 0;
  int expired = 0;
  for (const auto& call : calls) {
    const grpc::Status status = call->Wait();
    switch (status.error_code()) {
      case grpc::StatusCode::OK:  // Within its deadline: the client enforces it.
        ++ok;
        EXPECT_EQ(call->response.results_size(), 2);
        break;
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        ++refused;
        EXPECT_THAT(status.error_message(), HasSubstr("expected wait"));
        EXPECT_THAT(status.error_message(), HasSubstr("retry later"));
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        ++expired;
        break;
      default:
        ADD_FAILURE() << "unexpected " << status.error_code() << ": " << status.error_message();
    }
  }
  SCOPED_TRACE(
      absl::StrCat(ok, " OK, ", refused, " RESOURCE_EXHAUSTED, ", expired, " DEADLINE_EXCEEDED"));
  EXPECT_GE(ok, 1);
  EXPECT_GE(refused, 1) << "nothing refused: the queue took more than the engine could do in time";
  EXPECT_EQ(ok + refused + expired, kBurst);
  // Every answer is counted once the server is done with the burst; then the server's OK answers
  // must be exactly those its clients received: none was computed for a caller who gave up.
  EXPECT_TRUE(PollUntil([&] { return total() - total_before == kBurst; }, absl::Milliseconds(10)));
  EXPECT_EQ(count("OK") - ok_before, ok);
  EXPECT_GT(server.runtime().catalog().Resolve("demo").value()->scheduler().SecondsPerToken(), 0);
}

// ---------------------------------------------------------------------------------------------
// Request headers: server.max_metadata_bytes.
// ---------------------------------------------------------------------------------------------

// A Classify call carrying `header_bytes` bytes of one custom header, on a fresh channel.
grpc::Status ClassifyWithLargeHeader(TestServer& server, size_t header_bytes) {
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::InferenceService::NewStub(channel);
  auto context = NewContext();
  context->AddMetadata("x-large-header", std::string(header_bytes, 'h'));
  v1::ClassifyResponse response;
  return stub->Classify(context.get(), ClassifyOf("headers"), &response);
}

// gRPC refuses request headers over its default 8 KiB (and with them every other call on the
// connection); server.max_metadata_bytes raises the limit for clients that need more.
TEST(MetadataLimitTest, HeadersUnderTheConfiguredLimitPassWhereTheDefaultRefusesThem) {
  constexpr size_t kHeaderBytes = 20 << 10;
  ServerConfig config = TestServerConfig({TestModelEntry("demo", DemoModelDir(), kMaxBatchTokens)});
  {
    absl::StatusOr<std::unique_ptr<TestServer>> defaults = TestServer::Start(config);
    ASSERT_TRUE(defaults.ok()) << defaults.status();
    EXPECT_FALSE(ClassifyWithLargeHeader(**defaults, kHeaderBytes).ok());
  }
  config.max_metadata_bytes = 64 << 10;
  absl::StatusOr<std::unique_ptr<TestServer>> raised = TestServer::Start(config);
  ASSERT_TRUE(raised.ok()) << raised.status();
  const grpc::Status status = ClassifyWithLargeHeader(**raised, kHeaderBytes);
  EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
}

// ---------------------------------------------------------------------------------------------
// Calls per connection: server.max_concurrent_streams.
// ---------------------------------------------------------------------------------------------

// Over the limit, a connection's further calls wait in the client, not in the server, and are
// answered once its open calls end; another connection is not held up.
TEST(ConcurrentStreamsTest, CallsOverTheConnectionsLimitWaitInTheClient) {
  auto control = std::make_shared<EngineControl>();
  ServerConfig config = TestServerConfig({TestModelEntry("demo", DemoModelDir(), kMaxBatchTokens)});
  config.max_concurrent_streams = 1;
  absl::StatusOr<std::unique_ptr<TestServer>> started =
      TestServer::Start(config, GatedLoader({{"demo", control}}, InnerEngine::kNull));
  ASSERT_TRUE(started.ok()) << started.status();
  TestServer& server = **started;

  control->Close();
  const int batches = control->batches();
  std::unique_ptr<AsyncClassify> open = StartClassify(server.stub(), ClassifyOf("open"));
  ASSERT_TRUE(control->WaitForBatches(batches + 1));
  std::unique_ptr<AsyncClassify> held = StartClassify(server.stub(), ClassifyOf("same channel"));
  // A channel of its own connection (channels of equal arguments share one).
  grpc::ChannelArguments own_connection;
  own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto other_stub = v1::InferenceService::NewStub(grpc::CreateCustomChannel(
      server.address(), grpc::InsecureChannelCredentials(), own_connection));
  std::unique_ptr<AsyncClassify> other = StartClassify(*other_stub, ClassifyOf("other channel"));
  ASSERT_TRUE(server.WaitForQueuedRequests("demo", 1));
  // The call on the other connection is queued; the one behind the open call is not at the
  // server. Without the limit it would be queued as well, within milliseconds.
  const absl::Time until = absl::Now() + absl::Milliseconds(500);
  while (absl::Now() < until) {
    ASSERT_EQ(server.QueueStats("demo").requests, 1) << "a call over the limit reached the server";
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(held->done());

  control->Open();
  EXPECT_TRUE(open->Wait().ok());
  EXPECT_TRUE(held->Wait().ok()) << held->status.error_message();
  EXPECT_TRUE(other->Wait().ok()) << other->status.error_message();
}

// ---------------------------------------------------------------------------------------------
// UNAVAILABLE while draining, and 9. graceful drain loses nothing.
// ---------------------------------------------------------------------------------------------

TEST(DrainTest, UnavailableWhileDraining) {
  auto control = std::make_shared<EngineControl>();
  absl::StatusOr<std::unique_ptr<TestServer>> started = StartGatedDemo(control);
  ASSERT_TRUE(started.ok()) << started.status();
  TestServer& server = **started;
  control->Close();
  const int batches = control->batches();
  std::unique_ptr<AsyncClassify> held = StartClassify(server.stub(), ClassifyOf("held"));
  ASSERT_TRUE(control->WaitForBatches(batches + 1));

  int64_t unanswered = -1;
  std::thread drain([&] { unanswered = server.runtime().Drain(absl::Seconds(30)).unanswered; });
  EXPECT_TRUE(WaitForHealth(server.health(), "", HealthStatus::NOT_SERVING));
  EXPECT_TRUE(
      WaitForHealth(server.health(), serving::kInferenceServiceName, HealthStatus::NOT_SERVING));

  v1::ClassifyResponse classify;
  grpc::Status status =
      server.stub().Classify(NewContext().get(), ClassifyOf("too late"), &classify);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
  v1::TokenizeRequest tokenize;
  tokenize.add_inputs()->set_text("too late");
  v1::TokenizeResponse tokens;
  EXPECT_EQ(server.stub().Tokenize(NewContext().get(), tokenize, &tokens).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  v1::InfoResponse info;
  EXPECT_EQ(server.stub().Info(NewContext().get(), v1::InfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  auto context = NewContext();
  auto stream = server.stub().ClassifyStream(context.get());
  stream->WritesDone();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);

  control->Open();
  EXPECT_TRUE(held->Wait().ok()) << held->status.error_message();
  drain.join();
  EXPECT_EQ(unanswered, 0);
}

TEST(DrainTest, GracefulDrainAnswersEveryAcceptedRequest) {
  auto control = std::make_shared<EngineControl>();
  absl::StatusOr<std::unique_ptr<TestServer>> started = StartGatedDemo(control, InnerEngine::kCpu);
  ASSERT_TRUE(started.ok()) << started.status();
  TestServer& server = **started;
  absl::StatusOr<std::unique_ptr<Reference>> reference = Reference::Load(DemoModelDir());
  ASSERT_TRUE(reference.ok()) << reference.status();

  // K requests accepted: the first held in the engine, the others queued behind it.
  constexpr int kRequests = 5;
  control->Close();
  const int64_t sequences_before = control->sequences();
  std::vector<std::unique_ptr<AsyncClassify>> calls;
  int64_t sequences = 0;
  for (int k = 0; k < kRequests; ++k) {
    v1::ClassifyRequest request = ClassifyOf(absl::StrCat("request ", k, " of the drain"));
    for (int i = 0; i < k % 3; ++i) request.add_inputs()->set_text(absl::StrCat("extra ", i));
    sequences += request.inputs_size();
    calls.push_back(StartClassify(server.stub(), request));
  }
  // A failed assertion below must not leave a batch at the closed gate for kWaitLimit.
  absl::Cleanup open_gate = [&control] { control->Open(); };
  // Every sequence waits (queued or cut ahead) or is at the engine, and the engine holds at least
  // one batch. All five may be queued before the worker takes any (continuous batching then takes
  // them together), so "all accounted for" alone does not mean a batch reached the engine yet.
  PollUntil(
      [&] {
        const int64_t at_engine = control->sequences() - sequences_before;
        return at_engine > 0 && at_engine + server.WaitingSequences("demo") >= sequences;
      },
      absl::Milliseconds(2));
  ASSERT_GT(control->sequences(), sequences_before) << "nothing reached the engine";

  int64_t unanswered = -1;
  std::thread drain([&] { unanswered = server.runtime().Drain(absl::Seconds(30)).unanswered; });
  EXPECT_TRUE(WaitForHealth(server.health(), "", HealthStatus::NOT_SERVING));
  v1::ClassifyResponse late;
  EXPECT_EQ(server.stub().Classify(NewContext().get(), ClassifyOf("late"), &late).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  for (const auto& call : calls) EXPECT_FALSE(call->done()) << "answered before the release";

  control->Open();
  for (int k = 0; k < kRequests; ++k) {
    SCOPED_TRACE(absl::StrCat("request ", k));
    AsyncClassify& call = *calls[static_cast<size_t>(k)];
    ASSERT_TRUE(call.Wait().ok()) << call.status.error_message();
    ASSERT_EQ(call.response.results_size(), call.request.inputs_size());
    for (int i = 0; i < call.request.inputs_size(); ++i) {
      const std::vector<double> expected =
          Softmax((*reference)->Logits((*reference)->Encode(call.request.inputs(i).text())));
      for (const v1::LabelScore& score : call.response.results(i).scores()) {
        EXPECT_TRUE(Near(score.score(), expected[static_cast<size_t>(score.id())]));
      }
    }
  }
  drain.join();
  EXPECT_EQ(unanswered, 0);
}

// A server whose engine holds one batch at its closed gate while kQueued more requests wait in
// the queue behind it: the state in which a drain's grace period can run out.
class DrainDeadlineTest : public ::testing::Test {
 protected:
  static constexpr int kQueued = 4;

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TestServer>> started = StartGatedDemo(control_);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    control_->Close();
    batches_before_ = control_->batches();
    held_ = StartClassify(server_->stub(), ClassifyOf("held at the engine"));
    ASSERT_TRUE(control_->WaitForBatches(batches_before_ + 1));
    for (int i = 0; i < kQueued; ++i) {
      queued_.push_back(StartClassify(server_->stub(), ClassifyOf(absl::StrCat("queued ", i))));
    }
    ASSERT_TRUE(server_->WaitForQueuedRequests("demo", kQueued));
  }
  void TearDown() override { control_->Open(); }

  // Every queued call is answered UNAVAILABLE while the held batch is still at the closed gate;
  // then the held one is answered as usual, and the queued ones never reached the engine.
  void ExpectQueuedAnsweredUnavailable(std::thread& drain, const serving::DrainResult& result) {
    for (const auto& call : queued_) {
      const grpc::Status status = call->Wait();
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr("grace period ended"));
    }
    EXPECT_FALSE(held_->done()) << "the held batch was answered before the gate opened";
    control_->Open();
    EXPECT_TRUE(held_->Wait().ok()) << held_->status.error_message();
    drain.join();
    EXPECT_EQ(result.unanswered, 0);
    EXPECT_EQ(result.unavailable_at_deadline, kQueued);
    EXPECT_EQ(control_->batches(), batches_before_ + 1);
    EXPECT_EQ(server_->QueueStats("demo").requests, 0);
  }

  std::shared_ptr<EngineControl> control_ = std::make_shared<EngineControl>();
  std::unique_ptr<TestServer> server_;
  int batches_before_ = 0;
  std::unique_ptr<AsyncClassify> held_;
  std::vector<std::unique_ptr<AsyncClassify>> queued_;
};

// The grace period bounds the drain: what is still queued when it ends is answered UNAVAILABLE,
// not computed, and counted as answered.
TEST_F(DrainDeadlineTest, QueuedRequestsAreAnsweredUnavailableWhenTheGracePeriodEnds) {
  serving::DrainResult result;
  std::thread drain([&] { result = server_->runtime().Drain(absl::Milliseconds(100)); });
  ExpectQueuedAnsweredUnavailable(drain, result);
}

// What dflash-server does on a second signal: the grace period ends at once.
TEST_F(DrainDeadlineTest, EndGracePeriodEndsALongGracePeriodNow) {
  serving::DrainResult result;
  std::thread drain([&] { result = server_->runtime().Drain(absl::Hours(1)); });
  EXPECT_TRUE(WaitForHealth(server_->health(), "", HealthStatus::NOT_SERVING));
  server_->runtime().EndGracePeriod();
  ExpectQueuedAnsweredUnavailable(drain, result);
}

}  // namespace
}  // namespace dflash::e2e
