// End-to-end answers to malformed and hostile requests: messages that do not parse (unary and in
// the middle of a stream), answers larger than the server can send, enum values the server does
// not know, over-long zero-shot templates, and the request counter's code for answers the client
// never received. Each case is answered in place, with a precise code, and counted.
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <future>
#include <latch>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/service/inference_pipeline.h"
#include "server/service/model_catalog.h"
#include "server/service/wire_message.h"
#include "server/service/worker_pool.h"
#include "tests/e2e/e2e_harness.h"

namespace dflash::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kMaxMessageBytes = 64 << 10;
constexpr int kMaxTextBytes = 8000;
constexpr int kMaxInputs = 16;
constexpr char kClassifyMethod[] = "/dflash.v1.InferenceService/Classify";
constexpr char kClassifyStreamMethod[] = "/dflash.v1.InferenceService/ClassifyStream";
// Field 1 (length-delimited) announcing far more bytes than follow: not a protobuf message.
constexpr char kHugeLengthPrefix[] =
    "\x0a\xff\xff\xff\xff\x0f"
    "abc";
// Not valid UTF-8 (a lead byte followed by no continuation byte), in a proto3 string field.
constexpr char kInvalidUtf8[] = "valid start \xC3\x28 invalid continuation";

grpc::ByteBuffer BytesOf(absl::string_view data) {
  grpc::Slice slice(data.data(), data.size());
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer BytesOf(const google::protobuf::MessageLite& message) {
  return BytesOf(message.SerializePartialAsString());
}

v1::ClassifyRequest ClassifyOf(const std::string& text, const std::string& request_id = "") {
  v1::ClassifyRequest request;
  request.set_model("demo");
  request.set_request_id(request_id);
  request.add_inputs()->set_text(text);
  return request;
}

// A text of about `bytes` bytes of distinct words (many tokens).
std::string LongText(size_t bytes) {
  std::string text;
  for (int word = 0; text.size() + 16 < bytes; ++word) absl::StrAppend(&text, "word", word, " ");
  return text;
}

// A unary call with raw request bytes.
grpc::Status RawUnary(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                      const grpc::ByteBuffer& request) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kWaitLimit));
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  return done.get_future().get();
}

// A bidirectional stream with raw messages: writes every message, half-closes, and collects every
// answer until the server ends the stream.
class RawStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
            std::vector<grpc::ByteBuffer> messages)
      : stub_(channel), messages_(std::move(messages)) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + kWaitLimit));
    stub_.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    StartRead(&incoming_);
    WriteNext();
    StartCall();
  }

  // The stream's status and every answer, once the server has ended it.
  grpc::Status Wait() { return done_.get_future().get(); }
  const std::vector<grpc::ByteBuffer>& answers() const { return answers_; }

  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    answers_.push_back(incoming_);
    StartRead(&incoming_);
  }
  void OnDone(const grpc::Status& status) override { done_.set_value(status); }

 private:
  void WriteNext() {
    if (next_ < messages_.size()) {
      StartWrite(&messages_[next_++]);
    } else {
      StartWritesDone();
    }
  }

  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  std::vector<grpc::ByteBuffer> messages_;
  size_t next_ = 0;
  grpc::ByteBuffer incoming_;
  std::vector<grpc::ByteBuffer> answers_;
  std::promise<grpc::Status> done_;
};

class HostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    control_ = new std::shared_ptr<EngineControl>(std::make_shared<EngineControl>());
    ModelEntry demo = TestModelEntry("demo", DemoModelDir());
    demo.limits.max_text_bytes = kMaxTextBytes;
    demo.limits.max_inputs = kMaxInputs;
    ServerConfig config = TestServerConfig({demo});
    config.max_message_bytes = kMaxMessageBytes;
    absl::StatusOr<std::unique_ptr<TestServer>> server =
        TestServer::Start(config, GatedLoader({{"demo", *control_}}));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }

  static void TearDownTestSuite() {
    if (control_ != nullptr) (*control_)->Open();
    delete server_;
    delete control_;
    server_ = nullptr;
    control_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(server_, nullptr) << "the server did not start"; }
  void TearDown() override {
    control().Open();
    EXPECT_TRUE(control().WaitUntilIdle());
  }

  static EngineControl& control() { return **control_; }
  static v1::InferenceService::Stub& stub() { return server_->stub(); }
  static double Requests(const std::string& rpc, const std::string& code,
                         const std::string& model = "") {
    std::map<std::string, std::string> labels{{"rpc", rpc}, {"code", code}};
    if (!model.empty()) labels["model"] = model;
    return ScrapeRegistry(server_->runtime(), "dflash_requests_total", labels);
  }
  // Polls until the request counter reaches `count` (the answer and its count come after the
  // client's status when the call ended first).
  static bool WaitForRequests(const std::string& rpc, const std::string& code, double count) {
    return PollUntil([&] { return Requests(rpc, code, "demo") >= count; }, absl::Milliseconds(10));
  }

  static inline TestServer* server_ = nullptr;
  static inline std::shared_ptr<EngineControl>* control_ = nullptr;
};

TEST_F(HostileTest, MalformedUnaryMessageIsInvalidArgumentAndCounted) {
  const double before = Requests("Classify", "INVALID_ARGUMENT");
  const grpc::Status garbage =
      RawUnary(server_->channel(), kClassifyMethod,
               BytesOf(absl::string_view(kHugeLengthPrefix, sizeof(kHugeLengthPrefix) - 1)));
  EXPECT_EQ(garbage.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << garbage.error_message();
  EXPECT_THAT(garbage.error_message(), HasSubstr("not a valid dflash.v1.ClassifyRequest"));

  const grpc::Status utf8 =
      RawUnary(server_->channel(), kClassifyMethod, BytesOf(ClassifyOf(kInvalidUtf8)));
  EXPECT_EQ(utf8.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << utf8.error_message();
  EXPECT_THAT(utf8.error_message(), HasSubstr("UTF-8"));
  EXPECT_THAT(utf8.error_message(), HasSubstr("dflash.v1.TextInput.text"));
  EXPECT_EQ(Requests("Classify", "INVALID_ARGUMENT"), before + 2);

  // The connection and the server go on.
  v1::ClassifyResponse response;
  EXPECT_TRUE(stub().Classify(NewContext().get(), ClassifyOf("fine"), &response).ok());
}

TEST_F(HostileTest, StreamAnswersACorruptMessageInPlaceAndGoesOn) {
  const double before = Requests("ClassifyStream", "INVALID_ARGUMENT");
  RawStream stream(server_->channel(), kClassifyStreamMethod,
                   {BytesOf(ClassifyOf("first", "one")),
                    BytesOf(absl::string_view(kHugeLengthPrefix, sizeof(kHugeLengthPrefix) - 1)),
                    BytesOf(ClassifyOf("third", "three")), BytesOf(ClassifyOf(kInvalidUtf8)),
                    BytesOf(ClassifyOf("fifth", "five"))});
  const grpc::Status status = stream.Wait();
  EXPECT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(stream.answers().size(), 5u) << "one answer per request message";
  std::vector<v1::ClassifyStreamResponse> answers(5);
  for (size_t i = 0; i < answers.size(); ++i) {
    ASSERT_TRUE(serving::ParseWireMessage(stream.answers()[i], answers[i]).ok());
  }
  for (size_t i : {0u, 2u, 4u}) {
    ASSERT_TRUE(answers[i].has_response()) << i << ": " << answers[i].ShortDebugString();
    EXPECT_EQ(answers[i].response().results_size(), 1);
  }
  EXPECT_EQ(answers[0].response().metadata().request_id(), "one");
  EXPECT_EQ(answers[2].response().metadata().request_id(), "three");
  EXPECT_EQ(answers[4].response().metadata().request_id(), "five");
  for (size_t i : {1u, 3u}) {
    ASSERT_TRUE(answers[i].has_error()) << i;
    EXPECT_EQ(answers[i].error().code(), static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(answers[i].error().message(), HasSubstr("not a valid dflash.v1.ClassifyRequest"));
  }
  EXPECT_THAT(answers[3].error().message(), HasSubstr("UTF-8"));
  EXPECT_EQ(Requests("ClassifyStream", "INVALID_ARGUMENT"), before + 2);
}

TEST_F(HostileTest, TokenizeAnswerOverTheMessageLimitIsRefusedWithoutRetryHint) {
  const double before = Requests("Tokenize", "RESOURCE_EXHAUSTED");
  v1::TokenizeRequest request;
  request.set_model("demo");
  request.set_truncate(false);  // Every token of every input would be in the answer.
  // Each token costs its piece and about 15 bytes of fields in the answer: several times the
  // request's own size, which stays under the limit.
  for (int i = 0; i < 7; ++i) request.add_inputs()->set_text(LongText(kMaxTextBytes));
  ASSERT_LT(request.ByteSizeLong(), static_cast<size_t>(kMaxMessageBytes));

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kWaitLimit));
  v1::TokenizeResponse response;
  const grpc::Status status = stub().Tokenize(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("server.max_message_bytes"));
  EXPECT_EQ(context.GetServerTrailingMetadata().count("grpc-retry-pushback-ms"), 0u)
      << "a retry of the same request cannot succeed";
  EXPECT_EQ(Requests("Tokenize", "RESOURCE_EXHAUSTED"), before + 1);

  // A shorter one fits.
  request.clear_inputs();
  request.add_inputs()->set_text(LongText(kMaxTextBytes / 8));
  EXPECT_TRUE(stub().Tokenize(NewContext().get(), request, &response).ok());
  EXPECT_GT(response.encodings(0).tokens_size(), 100);
}

TEST_F(HostileTest, ZeroShotAnswerOverTheMessageLimitIsRefusedBeforeCompute) {
  v1::ZeroShotRequest request;
  request.set_model("demo");
  // Each of the 8 results names the 4 labels of 2,500 bytes again: 80 KB, over the limit.
  for (int t = 0; t < 8; ++t) request.add_texts(absl::StrCat("text ", t));
  for (int l = 0; l < 4; ++l) request.add_candidate_labels(std::string(2500, 'a' + l));
  const int batches = control().batches();
  v1::ZeroShotResponse response;
  const grpc::Status status = stub().ZeroShot(NewContext().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("texts x candidate_labels"));
  EXPECT_EQ(control().batches(), batches) << "the request was computed";
}

TEST_F(HostileTest, UnknownEnumValuesAreInvalidArgument) {
  v1::ClassifyResponse response;
  v1::ClassifyRequest priority = ClassifyOf("text");
  priority.set_priority(static_cast<v1::Priority>(7));
  grpc::Status status = stub().Classify(NewContext().get(), priority, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("priority: unknown value 7"));

  v1::ClassifyRequest direction = ClassifyOf("text");
  direction.set_truncation_direction(static_cast<v1::TruncationDirection>(9));
  status = stub().Classify(NewContext().get(), direction, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("truncation_direction: unknown value 9"));

  v1::TokenizeRequest strategy;
  strategy.set_model("demo");
  strategy.add_inputs()->set_text("text");
  strategy.set_truncation_strategy(static_cast<v1::TruncationStrategy>(-1));
  v1::TokenizeResponse tokens;
  status = stub().Tokenize(NewContext().get(), strategy, &tokens);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("truncation_strategy: unknown value -1"));

  v1::ZeroShotRequest zero_shot;
  zero_shot.set_model("demo");
  zero_shot.add_texts("text");
  zero_shot.add_candidate_labels("label");
  zero_shot.set_priority(static_cast<v1::Priority>(4));
  v1::ZeroShotResponse scores;
  status = stub().ZeroShot(NewContext().get(), zero_shot, &scores);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("priority: unknown value 4"));
}

TEST_F(HostileTest, OverLongHypothesisTemplateIsNamed) {
  v1::ZeroShotRequest request;
  request.set_model("demo");
  request.add_texts("text");
  request.add_candidate_labels("label");
  request.set_hypothesis_template(absl::StrCat("{}", std::string(kMaxTextBytes, 'x')));
  v1::ZeroShotResponse response;
  grpc::Status status = stub().ZeroShot(NewContext().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("hypothesis_template: "));
  EXPECT_THAT(status.error_message(), Not(HasSubstr("candidate_labels")));

  // Each within the limit, together over it: the error names both.
  request.set_hypothesis_template(absl::StrCat("{}", std::string(kMaxTextBytes / 2 + 10, 'x')));
  request.set_candidate_labels(0, std::string(kMaxTextBytes / 2 + 10, 'y'));
  status = stub().ZeroShot(NewContext().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("hypothesis_template with candidate_labels[0]"));
}

TEST_F(HostileTest, AnswersTheClientNeverReceivedAreNotCountedOk) {
  const double ok_before = Requests("Classify", "OK", "demo");
  const double late_before = Requests("Classify", "DEADLINE_EXCEEDED", "demo");
  const double cancelled_before = Requests("Classify", "CANCELLED", "demo");

  // A request computed while its deadline passes: the engine holds its batch until then.
  control().Close();
  int batches = control().batches();
  const absl::Duration timeout = absl::Milliseconds(500);
  const absl::Time deadline = absl::Now() + timeout;
  std::unique_ptr<AsyncClassify> late =
      StartClassify(stub(), ClassifyOf("answered after the deadline"), timeout);
  ASSERT_TRUE(control().WaitForBatches(batches + 1));
  EXPECT_EQ(late->Wait().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server's copy of the deadline is the client's plus the transit time: let it pass surely
  // before the engine answers (a late one makes the test fail, never pass wrongly).
  absl::SleepFor(deadline + absl::Seconds(1) - absl::Now());
  control().Open();
  ASSERT_TRUE(control().WaitUntilIdle());
  EXPECT_TRUE(WaitForRequests("Classify", "DEADLINE_EXCEEDED", late_before + 1));

  // A request computed while its client cancels.
  control().Close();
  batches = control().batches();
  std::unique_ptr<AsyncClassify> cancelled =
      StartClassify(stub(), ClassifyOf("answered after a cancellation"));
  ASSERT_TRUE(control().WaitForBatches(batches + 1));
  cancelled->context.TryCancel();
  EXPECT_EQ(cancelled->Wait().error_code(), grpc::StatusCode::CANCELLED);
  // gRPC tells the server asynchronously (RST_STREAM, then OnCancel): as above, a late one makes
  // the test fail, never pass wrongly.
  absl::SleepFor(absl::Seconds(1));
  control().Open();
  ASSERT_TRUE(control().WaitUntilIdle());
  EXPECT_TRUE(WaitForRequests("Classify", "CANCELLED", cancelled_before + 1));
  EXPECT_EQ(Requests("Classify", "OK", "demo"), ok_before);
}

// ZeroShot's texts, labels and hypotheses are checked and tokenized on the worker pool, never on
// the thread that hands the request over (gRPC's): with every pool thread busy, the call returns
// without having answered, even for a request whose hypothesis fails to tokenize.
TEST(ZeroShotPipelineTest, TokenizesOnThePoolNotOnTheCallersThread) {
  serving::ModelCatalog catalog;
  ModelEntry entry = TestModelEntry("demo", DemoModelDir());
  entry.limits.max_text_bytes = 100;
  absl::StatusOr<std::unique_ptr<serving::ServedModel>> model =
      serving::ServedModel::Load(entry, nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(catalog.Add(std::move(*model)).ok());
  serving::WorkerPool pool(2);
  serving::InferencePipeline pipeline(catalog, pool, nullptr, {kTestVersion, kTestRevision});

  std::latch release(1);
  std::latch busy(2);
  for (int i = 0; i < pool.size(); ++i) {
    pool.Post([&] {
      busy.count_down();
      release.wait();
    });
  }
  busy.wait();
  v1::ZeroShotRequest request;
  request.set_model("demo");
  request.add_texts("text");
  request.add_candidate_labels(std::string(80, 'y'));  // With the template: over 100 bytes.
  request.set_hypothesis_template(absl::StrCat("{}", std::string(80, 'x')));
  std::promise<absl::Status> answered;
  std::future<absl::Status> answer = answered.get_future();
  pipeline.ZeroShot(request, serving::CallContext{}, [&](absl::StatusOr<v1::ZeroShotResponse> r) {
    answered.set_value(r.status());
  });
  EXPECT_EQ(answer.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "answered on the caller's thread";
  release.count_down();
  const absl::Status status = answer.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("hypothesis_template with"));
  catalog.ShutdownAll();
}

}  // namespace
}  // namespace dflash::e2e
