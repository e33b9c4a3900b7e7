// dflash-loadtest --protocol=http against a real in-process server (ServingRuntime with the
// HTTP/JSON front on, null engine): closed and open loops over keep-alive connections answer every
// call OK, and a non-2xx answer is counted under its HTTP status. Nothing here asserts a latency
// or a rate.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "loadtest/http_caller.h"
#include "loadtest/load_generator.h"
#include "loadtest/request_generator.h"
#include "tests/e2e/e2e_harness.h"

namespace dflash::loadtest {
namespace {

std::shared_ptr<const Corpus> SmallCorpus() {
  return std::make_shared<const Corpus>(*Corpus::FromText(
      "the quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun", "test"));
}

RequestGenerator MakeGenerator(const std::string& workload_json) {
  auto workload = ParseWorkload(workload_json, "test.json");
  EXPECT_TRUE(workload.ok()) << workload.status();
  return RequestGenerator(*workload, SmallCorpus(), 1);
}

class HttpLoadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    e2e::ServerConfig config =
        e2e::TestServerConfig({e2e::TestModelEntry("demo", e2e::DemoModelDir())});
    config.http_listen = "127.0.0.1:0";
    auto server = e2e::TestServer::Start(config, e2e::GatedLoader({}, e2e::InnerEngine::kNull));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static std::unique_ptr<HttpCaller> Caller(int connections) {
    EXPECT_NE(server_, nullptr);
    if (server_ == nullptr) return nullptr;
    auto caller = HttpCaller::Create(absl::StrCat("127.0.0.1:", server_->runtime().http_port()),
                                     connections, "");
    EXPECT_TRUE(caller.ok()) << caller.status();
    if (!caller.ok()) return nullptr;
    EXPECT_TRUE((*caller)->Probe().ok());
    return *std::move(caller);
  }

  static e2e::TestServer* server_;
};

e2e::TestServer* HttpLoadTest::server_ = nullptr;

std::string ErrorCodes(const RunTotals& totals) {
  std::string codes;
  for (const auto& [code, count] : totals.errors_by_code) {
    absl::StrAppend(&codes, codes.empty() ? "" : ", ", code, ": ", count, " (",
                    totals.first_error_message.at(code), ")");
  }
  return codes;
}

TEST_F(HttpLoadTest, ClosedLoopPairsAnswerEveryCallOk) {
  std::unique_ptr<HttpCaller> caller = Caller(4);
  ASSERT_NE(caller, nullptr);
  const RequestGenerator generator = MakeGenerator(
      R"({"rpc": "classify", "inputs_per_call": 3, "mix": [{"text_words": 6, "pair_words": 3}]})");
  LoadOptions options;
  options.concurrency = 4;
  options.max_requests = 200;
  options.timeout = absl::Seconds(30);
  absl::StatusOr<RunResult> result = RunLoad(options, generator, *caller);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->totals.measured.sent, 200);
  EXPECT_EQ(result->totals.measured.ok, 200) << ErrorCodes(result->totals);
  EXPECT_EQ(result->totals.measured.errors, 0);
  EXPECT_EQ(result->totals.sequences, 600);
  EXPECT_EQ(result->totals.latency.count(), 200);
}

TEST_F(HttpLoadTest, OpenLoopSingleTextsAnswerEveryCallOk) {
  std::unique_ptr<HttpCaller> caller = Caller(2);
  ASSERT_NE(caller, nullptr);
  const RequestGenerator generator =
      MakeGenerator(R"({"rpc": "classify", "inputs_per_call": 1, "mix": [{"text_words": 8}]})");
  LoadOptions options;
  options.process = ArrivalProcess::kPoisson;
  options.rate = 200.0;
  options.max_requests = 60;
  options.timeout = absl::Seconds(30);
  absl::StatusOr<RunResult> result = RunLoad(options, generator, *caller);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->totals.measured.sent, 60);
  EXPECT_EQ(result->totals.measured.ok, 60) << ErrorCodes(result->totals);
}

TEST_F(HttpLoadTest, NonSuccessAnswersCountUnderTheirStatus) {
  std::unique_ptr<HttpCaller> caller = Caller(1);
  ASSERT_NE(caller, nullptr);
  const RequestGenerator generator =
      MakeGenerator(R"({"rpc": "classify", "model": "not-served", "mix": [{"text_words": 4}]})");
  LoadOptions options;
  options.max_requests = 5;
  options.timeout = absl::Seconds(30);
  absl::StatusOr<RunResult> result = RunLoad(options, generator, *caller);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->totals.measured.ok, 0);
  EXPECT_EQ(result->totals.measured.errors, 5);
  ASSERT_EQ(result->totals.errors_by_code.count("HTTP_404"), 1u) << ErrorCodes(result->totals);
  EXPECT_EQ(result->totals.errors_by_code.at("HTTP_404"), 5);
  EXPECT_NE(result->totals.first_error_message.at("HTTP_404").find("not-served"),
            std::string::npos);
}

// A kept-alive connection the server closed while idle is reopened, and its call still answered.
TEST(HttpCallerTest, ReopensAConnectionTheServerClosedWhileIdle) {
  e2e::ServerConfig config =
      e2e::TestServerConfig({e2e::TestModelEntry("demo", e2e::DemoModelDir())});
  config.http_listen = "127.0.0.1:0";
  config.http_idle_timeout = absl::Seconds(1);
  auto server = e2e::TestServer::Start(config, e2e::GatedLoader({}, e2e::InnerEngine::kNull));
  ASSERT_TRUE(server.ok()) << server.status();
  auto caller =
      HttpCaller::Create(absl::StrCat("127.0.0.1:", (*server)->runtime().http_port()), 1, "");
  ASSERT_TRUE(caller.ok()) << caller.status();
  const RequestGenerator generator =
      MakeGenerator(R"({"rpc": "classify", "mix": [{"text_words": 4}]})");
  LoadOptions options;
  options.max_requests = 3;
  options.timeout = absl::Seconds(30);
  for (int run = 0; run < 2; ++run) {
    if (run == 1) absl::SleepFor(absl::Seconds(3));  // Past the idle timeout.
    absl::StatusOr<RunResult> result = RunLoad(options, generator, **caller);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->totals.measured.ok, 3) << "run " << run << ": " << ErrorCodes(result->totals);
  }
}

TEST(HttpCallerTest, RefusesUnixSocketsAndReportsAClosedPort) {
  EXPECT_EQ(HttpCaller::Create("unix:/tmp/x.sock", 1, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpCaller::Create("127.0.0.1:1", 0, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Port 1 (tcpmux) is not served on a test machine.
  auto caller = HttpCaller::Create("127.0.0.1:1", 1, "");
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_EQ((*caller)->Probe().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace dflash::loadtest
