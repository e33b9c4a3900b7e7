// The load generator against an in-process fake InferenceService on 127.0.0.1: call counts, error
// counts by code and the report's fields, in closed and open loops. Nothing here asserts a
// latency or a rate beyond "positive".
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loadtest/arrival_schedule.h"
#include "loadtest/load_generator.h"
#include "loadtest/loopback_channels.h"
#include "loadtest/report.h"
#include "loadtest/request_generator.h"
#include "tests/loadtest/fake_inference_service.h"

namespace dflash::loadtest {
namespace {

namespace v1 = ::dflash::v1;
using testing::FakeServer;
using testing::FakeServiceOptions;

std::shared_ptr<const Corpus> SmallCorpus() {
  return std::make_shared<const Corpus>(*Corpus::FromText(
      "the quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun", "test"));
}

RequestGenerator MakeGenerator(const std::string& workload_json) {
  auto workload = ParseWorkload(workload_json, "test.json");
  EXPECT_TRUE(workload.ok()) << workload.status();
  return RequestGenerator(*workload, SmallCorpus(), 1);
}

constexpr char kClassify[] =
    R"({"rpc": "classify", "inputs_per_call": 2, "mix": [{"text_words": 6, "pair_words": 3}]})";

// Connected, as dflash-loadtest connects them before its run (ConnectChannels).
std::vector<std::shared_ptr<grpc::Channel>> Channels(const FakeServer& server, int count = 1) {
  auto channels = MakeLoopbackChannels(server.target(), grpc::InsecureChannelCredentials(), count);
  EXPECT_TRUE(channels.ok()) << channels.status();
  if (!channels.ok()) return {};
  const absl::Status connected = ConnectChannels(*channels, server.target(), absl::Seconds(30));
  EXPECT_TRUE(connected.ok()) << connected;
  return *channels;
}

// "CODE: count, ..." for a failure message.
std::string ErrorCodes(const RunTotals& totals) {
  std::string codes;
  for (const auto& [code, count] : totals.errors_by_code) {
    absl::StrAppend(&codes, codes.empty() ? "" : ", ", code, ": ", count);
  }
  return codes;
}

LoadOptions ClosedLoop(int concurrency, int64_t requests) {
  LoadOptions options;
  options.process = ArrivalProcess::kClosedLoop;
  options.concurrency = concurrency;
  options.max_requests = requests;
  options.timeout = absl::Seconds(30);
  return options;
}

LoadOptions OpenLoop(ArrivalProcess process, double rate, int64_t requests) {
  LoadOptions options;
  options.process = process;
  options.rate = rate;
  options.max_requests = requests;
  options.timeout = absl::Seconds(30);
  return options;
}

RunDescription Describe(const FakeServer& server) {
  RunDescription description;
  description.target = server.target();
  description.workload_path = "test.json";
  description.rpc = "classify";
  return description;
}

void ExpectHistogramFields(const nlohmann::ordered_json& histogram) {
  for (const char* key : {"count", "min", "mean", "p50", "p90", "p99", "p99_9", "max"}) {
    EXPECT_TRUE(histogram.contains(key) && histogram[key].is_number()) << key;
  }
}

TEST(EndToEndTest, ClosedLoopCountsEveryCall) {
  FakeServer server;
  const RequestGenerator generator = MakeGenerator(kClassify);
  const LoadOptions options = ClosedLoop(4, 60);
  auto result = RunLoad(options, generator, Channels(server, 2));
  ASSERT_TRUE(result.ok()) << result.status();
  const RunTotals& totals = result->totals;
  EXPECT_EQ(totals.measured.sent, 60);
  EXPECT_EQ(totals.measured.ok, 60) << ErrorCodes(totals);
  EXPECT_EQ(totals.measured.errors, 0);
  EXPECT_EQ(totals.warmup.sent, 0);
  EXPECT_EQ(server.service().classify_calls(), 60);
  EXPECT_EQ(totals.latency.count(), 60);
  EXPECT_EQ(totals.sequences, 120);
  EXPECT_EQ(totals.server_tokens, 60 * 2 * (8 + 4));  // Canned: words + specials per pair.
  EXPECT_GT(totals.latency.min(), 0);
  EXPECT_TRUE(totals.errors_by_code.empty());
  EXPECT_FALSE(result->interrupted);
  EXPECT_GT(result->measured_seconds, 0.0);

  const nlohmann::ordered_json report = ReportJson(Describe(server), options, *result);
  EXPECT_EQ(report["tool"], "dflash-loadtest");
  EXPECT_EQ(report["report_version"], 1);
  EXPECT_TRUE(report["started_at"].is_string());
  EXPECT_EQ(report["config"]["mode"], "closed");
  EXPECT_EQ(report["config"]["concurrency"], 4);
  EXPECT_TRUE(report["config"]["rate_per_s"].is_null());
  EXPECT_EQ(report["config"]["target"], server.target());
  EXPECT_EQ(report["measured"]["sent"], 60);
  EXPECT_EQ(report["measured"]["completed"], 60);
  EXPECT_EQ(report["measured"]["ok"], 60);
  EXPECT_EQ(report["measured"]["errors"], 0);
  EXPECT_TRUE(report["measured"]["errors_by_code"].empty());
  EXPECT_TRUE(report["measured"]["offered_rate_per_s"].is_null());
  EXPECT_GT(report["measured"]["ok_rate_per_s"].get<double>(), 0.0);
  EXPECT_GT(report["measured"]["sequences_per_s"].get<double>(), 0.0);
  for (const char* key :
       {"latency_ms", "error_latency_ms", "send_lag_ms", "server_total_ms", "server_queue_ms"}) {
    ExpectHistogramFields(report[key]);
  }
  EXPECT_EQ(report["latency_ms"]["count"], 60);
  EXPECT_GT(report["latency_ms"]["p50"].get<double>(), 0.0);
  EXPECT_LE(report["latency_ms"]["p50"].get<double>(), report["latency_ms"]["max"].get<double>());
  EXPECT_DOUBLE_EQ(report["server_total_ms"]["p50"].get<double>(), 0.12);  // Canned 120 us.
  const std::string table = SummaryTable(report);
  EXPECT_NE(table.find("concurrency 4"), std::string::npos) << table;
  EXPECT_NE(table.find("measured"), std::string::npos) << table;
}

TEST(EndToEndTest, ClosedLoopCountsErrorsByCode) {
  FakeServer server(FakeServiceOptions{.reject_every = 4});
  const RequestGenerator generator = MakeGenerator(kClassify);
  const LoadOptions options = ClosedLoop(3, 60);
  auto result = RunLoad(options, generator, Channels(server));
  ASSERT_TRUE(result.ok()) << result.status();
  const RunTotals& totals = result->totals;
  EXPECT_EQ(totals.measured.sent, 60);
  EXPECT_EQ(totals.measured.ok, 45);
  EXPECT_EQ(totals.measured.errors, 15);
  EXPECT_EQ(totals.errors_by_code, (std::map<std::string, int64_t>{{"RESOURCE_EXHAUSTED", 15}}));
  EXPECT_EQ(totals.latency.count(), 45);
  EXPECT_EQ(totals.error_latency.count(), 15);

  const nlohmann::ordered_json report = ReportJson(Describe(server), options, *result);
  EXPECT_EQ(report["measured"]["errors_by_code"]["RESOURCE_EXHAUSTED"], 15);
  EXPECT_EQ(report["measured"]["first_error_message"]["RESOURCE_EXHAUSTED"], "queue full");
  EXPECT_EQ(report["error_latency_ms"]["count"], 15);
  const std::string table = SummaryTable(report);
  EXPECT_NE(table.find("RESOURCE_EXHAUSTED"), std::string::npos) << table;

  // The file form of the report is the same JSON.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dflash_loadtest_report_" + std::to_string(::getpid()) + ".json"))
                               .string();
  ASSERT_TRUE(WriteReport(path, report).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(nlohmann::ordered_json::parse(text.str()), report);
  std::filesystem::remove(path);
}

TEST(EndToEndTest, OpenLoopPoissonSendsTheScheduleAndCountsErrors) {
  FakeServer server(FakeServiceOptions{.reject_every = 5});
  const RequestGenerator generator = MakeGenerator(kClassify);
  LoadOptions options = OpenLoop(ArrivalProcess::kPoisson, 2000.0, 100);
  options.progress_interval = absl::Milliseconds(10);  // Exercises the progress thread.
  auto result = RunLoad(options, generator, Channels(server));
  ASSERT_TRUE(result.ok()) << result.status();
  const RunTotals& totals = result->totals;
  EXPECT_EQ(totals.measured.sent, 100);
  EXPECT_EQ(totals.measured.ok, 80);
  EXPECT_EQ(totals.errors_by_code, (std::map<std::string, int64_t>{{"RESOURCE_EXHAUSTED", 20}}));
  EXPECT_EQ(server.service().calls(), 100);
  EXPECT_EQ(totals.send_lag.count(), 100);
  EXPECT_GT(result->send_seconds, 0.0);

  const nlohmann::ordered_json report = ReportJson(Describe(server), options, *result);
  EXPECT_EQ(report["config"]["mode"], "poisson");
  EXPECT_TRUE(report["config"]["concurrency"].is_null());
  EXPECT_EQ(report["measured"]["offered_rate_per_s"], 2000.0);
  EXPECT_GT(report["measured"]["sent_rate_per_s"].get<double>(), 0.0);
  EXPECT_GT(report["measured"]["ok_rate_per_s"].get<double>(), 0.0);
  EXPECT_EQ(report["send_lag_ms"]["count"], 100);
  EXPECT_NE(SummaryTable(report).find("send lag"), std::string::npos);
}

TEST(EndToEndTest, OpenLoopWarmupIsSentButExcluded) {
  FakeServer server;
  const RequestGenerator generator = MakeGenerator(kClassify);
  // A constant schedule at 500/s puts calls 0-49 in the 100 ms warm-up and 50-149 in the
  // following 200 ms, whatever the timing of the machine.
  LoadOptions options = OpenLoop(ArrivalProcess::kConstant, 500.0, 0);
  options.warmup = absl::Milliseconds(100);
  options.duration = absl::Milliseconds(200);
  auto result = RunLoad(options, generator, Channels(server));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->totals.warmup.sent, 50);
  EXPECT_EQ(result->totals.measured.sent, 100);
  EXPECT_EQ(result->totals.warmup.ok + result->totals.measured.ok, 150);
  EXPECT_EQ(result->totals.latency.count(), 100);
  EXPECT_EQ(server.service().calls(), 150);
  const nlohmann::ordered_json report = ReportJson(Describe(server), options, *result);
  EXPECT_EQ(report["warmup"]["sent"], 50);
  EXPECT_EQ(report["measured"]["sent"], 100);
  EXPECT_NEAR(report["measured"]["sent_rate_per_s"].get<double>(), 500.0, 1e-6);
}

// With 1 sender and with 4, which share the cap.
class ScheduleNotKeptTest : public ::testing::TestWithParam<int> {};

TEST_P(ScheduleNotKeptTest, OpenLoopReportsAScheduleItCouldNotKeep) {
  // Every call hangs until its 200 ms deadline and at most 2 may be unanswered, so 10 calls due
  // 1 ms apart go out about 200 ms apart in pairs: the senders wait at the cap.
  FakeServer server(FakeServiceOptions{.hang_every = 1});
  const RequestGenerator generator = MakeGenerator(kClassify);
  LoadOptions options = OpenLoop(ArrivalProcess::kConstant, 1000.0, 10);
  options.timeout = absl::Milliseconds(200);
  options.max_in_flight = 2;
  options.senders = GetParam();
  auto result = RunLoad(options, generator, Channels(server));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->totals.measured.sent, 10);
  EXPECT_GT(result->totals.max_in_flight_waits, 0);
  EXPECT_GT(result->actual_send_seconds, result->scheduled_send_seconds);

  const nlohmann::ordered_json report = ReportJson(Describe(server), options, *result);
  const nlohmann::ordered_json& schedule = report["schedule"];
  ASSERT_TRUE(schedule.is_object());
  EXPECT_FALSE(schedule["kept"].get<bool>());
  EXPECT_LT(schedule["pace"].get<double>(), 0.98);
  EXPECT_NE(schedule["cause"].get<std::string>().find("--max_in_flight"), std::string::npos);
  EXPECT_LT(report["measured"]["actual_sent_rate_per_s"].get<double>(),
            report["measured"]["offered_rate_per_s"].get<double>());
  EXPECT_NE(SummaryTable(report).find("WARNING: the offered rate was NOT sent"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Senders, ScheduleNotKeptTest, ::testing::Values(1, 4));

TEST(EndToEndTest, ClosedLoopReportsNoSchedule) {
  FakeServer server;
  const RequestGenerator generator = MakeGenerator(kClassify);
  const LoadOptions options = ClosedLoop(1, 3);
  auto result = RunLoad(options, generator, Channels(server));
  ASSERT_TRUE(result.ok()) << result.status();
  const nlohmann::ordered_json report = ReportJson(Describe(server), options, *result);
  EXPECT_TRUE(report["schedule"].is_null());
  EXPECT_TRUE(report["measured"]["actual_sent_rate_per_s"].is_null());
  EXPECT_EQ(SummaryTable(report).find("WARNING"), std::string::npos);
}

// The serialized requests of calls `indices` (sorted, as a multiset to compare with the server's).
std::vector<std::string> SortedRequests(const RequestGenerator& generator,
                                        const std::vector<uint64_t>& indices) {
  std::vector<std::string> requests;
  for (uint64_t index : indices) {
    requests.push_back(
        std::get<v1::ClassifyRequest>(generator.Generate(index)).SerializeAsString());
  }
  std::sort(requests.begin(), requests.end());
  return requests;
}

std::vector<std::string> Sorted(std::vector<std::string> requests) {
  std::sort(requests.begin(), requests.end());
  return requests;
}

TEST(EndToEndTest, SeveralSendersSendExactlyTheConstantSchedule) {
  FakeServer server;
  const RequestGenerator generator = MakeGenerator(kClassify);
  // Calls 0-19 fall in the 10 ms warm-up, 20-219 are measured; the whole schedule's calls are
  // shared out over the senders, so together they send calls 0-219 once each, and the window ends
  // where call 220 is due: 200 calls in exactly 100 ms.
  LoadOptions options = OpenLoop(ArrivalProcess::kConstant, 2000.0, 200);
  options.warmup = absl::Milliseconds(10);
  options.senders = 4;
  auto result = RunLoad(options, generator, Channels(server, 2));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->totals.warmup.sent, 20);
  EXPECT_EQ(result->totals.measured.sent, 200);
  EXPECT_EQ(result->totals.measured.ok, 200);
  EXPECT_EQ(result->totals.send_lag.count(), 200);
  EXPECT_NEAR(result->send_seconds, 0.1, 1e-9);
  std::vector<uint64_t> indices(220);
  std::iota(indices.begin(), indices.end(), uint64_t{0});
  EXPECT_EQ(Sorted(server.service().classify_requests()), SortedRequests(generator, indices));

  const nlohmann::ordered_json report = ReportJson(Describe(server), options, *result);
  EXPECT_EQ(report["config"]["senders"], 4);
  EXPECT_NEAR(report["measured"]["sent_rate_per_s"].get<double>(), 2000.0, 1e-6);
}

TEST(EndToEndTest, SeveralSendersSendExactlyTheFirstPoissonCalls) {
  FakeServer server(FakeServiceOptions{.reject_every = 4});
  const RequestGenerator generator = MakeGenerator(kClassify);
  LoadOptions options = OpenLoop(ArrivalProcess::kPoisson, 3000.0, 150);
  options.warmup = absl::Milliseconds(20);
  options.senders = 3;
  options.seed = 5;
  auto result = RunLoad(options, generator, Channels(server));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->totals.measured.sent, 150);
  EXPECT_EQ(result->totals.measured.ok + result->totals.measured.errors, 150);
  // The merged shares in time order up to the 150th measured call: sender k's j-th call is
  // request k + 3j.
  auto merged = MergedArrivals::Create(ArrivalProcess::kPoisson, 3000.0, 5, 3);
  ASSERT_TRUE(merged.ok());
  std::vector<uint64_t> calls_of(3, 0);
  std::vector<uint64_t> indices;
  int64_t warmup = 0;
  for (int64_t measured = 0; measured < 150;) {
    const MergedArrivals::Arrival arrival = merged->Next();
    const auto sender = static_cast<size_t>(arrival.sender);
    indices.push_back(sender + 3 * calls_of[sender]++);
    ++(arrival.offset >= std::chrono::milliseconds(20) ? measured : warmup);
  }
  EXPECT_EQ(result->totals.warmup.sent, warmup);
  EXPECT_EQ(Sorted(server.service().classify_requests()), SortedRequests(generator, indices));
  // The window ends where the next measured call is due.
  const double next_due_s =
      std::chrono::duration<double>(merged->Next().offset - std::chrono::milliseconds(20)).count();
  EXPECT_NEAR(result->send_seconds, next_due_s, 1e-6);
}

TEST(EndToEndTest, SendersDefaultToTheRateAndTheCores) {
  LoadOptions options = OpenLoop(ArrivalProcess::kPoisson, 1.0, 10);
  EXPECT_EQ(SendersFor(options), 1);
  options.rate = 1e9;
  const int most = SendersFor(options);  // Half the cores.
  EXPECT_GE(most, 1);
  EXPECT_LE(most, static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / 2)));
  options.rate = kCallsPerSender * 1.5;
  EXPECT_EQ(SendersFor(options), std::min(2, most));
  options.senders = 7;
  EXPECT_EQ(SendersFor(options), 7);
  EXPECT_EQ(SendersFor(ClosedLoop(3, 10)), 0);
  options.senders = -1;
  EXPECT_FALSE(ValidateLoadOptions(options).ok());
  options.senders = kMaxSenders + 1;
  EXPECT_FALSE(ValidateLoadOptions(options).ok());
  options.senders = kMaxSenders;
  EXPECT_TRUE(ValidateLoadOptions(options).ok());
}

TEST(JudgeScheduleTest, KeptOnlyAtPaceAndWithSmallLag) {
  EXPECT_TRUE(JudgeSchedule(10.0, 10.05, 0.5, 0, 100).kept);
  EXPECT_TRUE(JudgeSchedule(0.0, 0.0, 0.0, 0, 100).kept);  // Nothing measured was late.
  const ScheduleVerdict slow = JudgeSchedule(10.0, 11.0, 0.5, 0, 100);
  EXPECT_FALSE(slow.kept);
  EXPECT_NE(slow.cause.find("sending thread"), std::string::npos);
  const ScheduleVerdict laggy = JudgeSchedule(10.0, 10.0, 25.0, 0, 100);
  EXPECT_FALSE(laggy.kept);
  const ScheduleVerdict capped = JudgeSchedule(10.0, 20.0, 900.0, 7, 100);
  EXPECT_FALSE(capped.kept);
  EXPECT_NE(capped.cause.find("7 sends waited because 100 calls were unanswered"),
            std::string::npos);
}

TEST(EndToEndTest, ClosedLoopBoundedByDuration) {
  FakeServer server;
  const RequestGenerator generator = MakeGenerator(kClassify);
  LoadOptions options = ClosedLoop(2, 0);
  options.warmup = absl::Milliseconds(50);
  options.duration = absl::Milliseconds(150);
  auto result = RunLoad(options, generator, Channels(server));
  ASSERT_TRUE(result.ok()) << result.status();
  const RunTotals& totals = result->totals;
  // How many calls fit in 150 ms depends on the machine; the accounting does not.
  EXPECT_GT(totals.warmup.sent + totals.measured.sent, 0);
  EXPECT_EQ(totals.measured.sent, totals.measured.ok);
  EXPECT_EQ(totals.warmup.sent + totals.measured.sent, server.service().calls());
}

TEST(EndToEndTest, DeadlinesAreCountedAsErrors) {
  FakeServer server(FakeServiceOptions{.hang_every = 2});
  const RequestGenerator generator = MakeGenerator(kClassify);
  LoadOptions options = ClosedLoop(2, 6);
  options.timeout = absl::Milliseconds(300);
  auto result = RunLoad(options, generator, Channels(server));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->totals.measured.ok, 3);
  EXPECT_EQ(result->totals.errors_by_code,
            (std::map<std::string, int64_t>{{"DEADLINE_EXCEEDED", 3}}));
}

TEST(EndToEndTest, EveryRpcKindAndTheApiKey) {
  FakeServer server;
  const std::vector<std::string> workloads = {
      kClassify,
      R"({"rpc": "rerank", "inputs_per_call": 3, "mix": [{"query_words": 2, "document_words": 8}]})",
      R"({"rpc": "embed", "inputs_per_call": 2, "mix": [{"text_words": 5}]})",
      R"({"rpc": "zeroshot", "candidate_labels": ["a", "b"], "mix": [{"text_words": 5}]})",
      R"({"rpc": "tokenize", "mix": [{"text_words": 5, "pair_words": 2}]})",
  };
  for (const std::string& workload : workloads) {
    const RequestGenerator generator = MakeGenerator(workload);
    LoadOptions options = ClosedLoop(1, 5);
    options.api_key = "secret-key";
    auto result = RunLoad(options, generator, Channels(server));
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->totals.measured.ok, 5) << workload;
  }
  EXPECT_EQ(server.service().classify_calls(), 5);
  EXPECT_EQ(server.service().rerank_calls(), 5);
  EXPECT_EQ(server.service().embed_calls(), 5);
  EXPECT_EQ(server.service().zeroshot_calls(), 5);
  EXPECT_EQ(server.service().tokenize_calls(), 5);
  EXPECT_EQ(server.service().last_authorization(), "Bearer secret-key");
}

TEST(EndToEndTest, StopFlagEndsSendingEarly) {
  FakeServer server;
  const RequestGenerator generator = MakeGenerator(kClassify);
  std::atomic<bool> stop{true};
  LoadOptions options = OpenLoop(ArrivalProcess::kConstant, 10.0, 0);
  options.duration = absl::Seconds(3600);
  options.stop = &stop;
  auto result = RunLoad(options, generator, Channels(server));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->interrupted);
  EXPECT_EQ(result->totals.measured.sent, 0);
}

TEST(EndToEndTest, RejectsBadOptionsAndRemoteTargets) {
  const RequestGenerator generator = MakeGenerator(kClassify);
  LoadOptions unbounded = ClosedLoop(1, 0);
  EXPECT_EQ(RunLoad(unbounded, generator, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ValidateLoadOptions(ClosedLoop(0, 10)).ok());
  EXPECT_FALSE(ValidateLoadOptions(OpenLoop(ArrivalProcess::kPoisson, 0.0, 10)).ok());
  LoadOptions no_timeout = ClosedLoop(1, 10);
  no_timeout.timeout = absl::ZeroDuration();
  EXPECT_FALSE(ValidateLoadOptions(no_timeout).ok());
  EXPECT_TRUE(ValidateLoadOptions(ClosedLoop(1, 10)).ok());
  EXPECT_FALSE(
      MakeLoopbackChannels("example.com:50051", grpc::InsecureChannelCredentials(), 1).ok());
  EXPECT_FALSE(MakeLoopbackChannels("127.0.0.1:50051", grpc::InsecureChannelCredentials(), 0).ok());
}

TEST(EndToEndTest, ConnectChannelsNamesTheChannelThatDidNotConnect) {
  FakeServer server;
  auto live = MakeLoopbackChannels(server.target(), grpc::InsecureChannelCredentials(), 2);
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(ConnectChannels(*live, server.target(), absl::Seconds(30)).ok());
  for (const auto& channel : *live) {
    EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  }

  // A port nothing listens on: bound by this test (so no other process takes it) and not listening,
  // so a connection is refused.
  const int socket_fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(socket_fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  ASSERT_EQ(bind(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(socket_fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string closed_target = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  auto dead = MakeLoopbackChannels(closed_target, grpc::InsecureChannelCredentials(), 1);
  ASSERT_TRUE(dead.ok()) << dead.status();
  const absl::Status status = ConnectChannels(*dead, closed_target, absl::Milliseconds(300));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find(closed_target), std::string::npos) << status;
  EXPECT_NE(status.message().find("channel 1 of 1"), std::string::npos) << status;
  close(socket_fd);
}

}  // namespace
}  // namespace dflash::loadtest
