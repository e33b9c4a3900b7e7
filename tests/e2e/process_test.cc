// dflash-server as a process: the real binary started with the bundled demo model on the null
// engine (every batch slowed by DFLASH_TEST_NULL_ENGINE_DELAY, so that requests stay queued),
// called over a real channel and stopped with real signals. What a signal does depends on which
// thread of the process takes it, so only the whole process can test it.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e_harness.h"

extern char** environ;

namespace dflash::e2e {
namespace {

using ::testing::HasSubstr;
using HealthStatus = grpc::health::v1::HealthCheckResponse;

// Each null-engine batch sleeps this long and holds one request (max_batch_sequences 1): the
// requests below keep the server busy for kRequests x kBatchDelay, far longer than the test needs
// to send its signals.
constexpr char kBatchDelay[] = "250ms";
constexpr int kRequests = 40;

// A running dflash-server whose stderr (its log) is collected by a thread of the test.
class ServerProcess {
 public:
  // Starts dflash-server with `args` and DFLASH_TEST_NULL_ENGINE_DELAY set.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(std::vector<std::string> args) {
    auto process = std::unique_ptr<ServerProcess>(new ServerProcess());
    int output[2];
    if (pipe2(output, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, output[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
    args.insert(args.begin(), DFLASH_SERVER_BINARY);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = {
        absl::StrCat("DFLASH_TEST_NULL_ENGINE_DELAY=", kBatchDelay)};
    for (char** entry = environ; *entry != nullptr; ++entry) env_strings.emplace_back(*entry);
    std::vector<char*> env;
    for (std::string& entry : env_strings) env.push_back(entry.data());
    env.push_back(nullptr);
    const int spawned = posix_spawn(&process->pid_, DFLASH_SERVER_BINARY, &actions, nullptr,
                                    argv.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    close(output[1]);
    if (spawned != 0) {
      close(output[0]);
      return absl::InternalError(absl::StrCat("cannot start ", DFLASH_SERVER_BINARY));
    }
    process->reader_ = std::thread([p = process.get(), fd = output[0]] {
      char buffer[4096];
      ssize_t n = 0;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR)) {
        if (n <= 0) continue;
        std::lock_guard<std::mutex> lock(p->mutex_);
        p->log_.append(buffer, static_cast<size_t>(n));
      }
      close(fd);
    });
    return process;
  }

  ~ServerProcess() {
    if (!exit_status_) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (reader_.joinable()) reader_.join();
  }

  std::string log() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_;
  }

  // All the process wrote; only once WaitForExit saw it end (the reader then meets the pipe's end).
  std::string FinalLog() {
    if (reader_.joinable()) reader_.join();
    return log();
  }

  // The gRPC port from the log line "serving gRPC on port N"; nullopt after kWaitLimit.
  std::optional<int> WaitForPort() const {
    std::optional<int> port;
    PollUntil(
        [&] {
          const std::string text = log();
          const size_t at = text.find("serving gRPC on port ");
          if (at == std::string::npos) return false;
          const size_t begin = at + std::string("serving gRPC on port ").size();
          const size_t end = text.find_first_not_of("0123456789", begin);
          int value = 0;
          if (end == std::string::npos ||
              !absl::SimpleAtoi(text.substr(begin, end - begin), &value)) {
            return false;
          }
          port = value;
          return true;
        },
        absl::Milliseconds(20));
    return port;
  }

  void Signal(int signal_number) const { ASSERT_EQ(kill(pid_, signal_number), 0); }

  // The wait status once the process ended; nullopt when it still runs after kWaitLimit.
  std::optional<int> WaitForExit() {
    PollUntil(
        [&] {
          int status = 0;
          if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
          exit_status_ = status;
          return true;
        },
        absl::Milliseconds(20));
    return exit_status_;
  }

 private:
  ServerProcess() = default;

  pid_t pid_ = -1;
  std::optional<int> exit_status_;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::string log_;
};

v1::ClassifyRequest ClassifyOf(const std::string& text) {
  v1::ClassifyRequest request;
  request.add_inputs()->set_text(text);
  return request;
}

class SignalTest : public ::testing::Test {
 protected:
  // Starts the server with `grace` as its drain grace period and sends kRequests calls, then
  // waits until one is answered: the server is computing, the rest are queued or about to be.
  void StartLoadedServer(const std::string& grace) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> started = ServerProcess::Start({
        absl::StrCat("--model=", DemoModelDir().string()),
        "--model_name=demo",
        "--backend=null",
        "--listen=127.0.0.1:0",
        "--metrics_listen=off",
        absl::StrCat("--set=server.drain_grace_period=", grace,
                     ",models.0.batching.max_batch_sequences=1,models.0.batching.max_batch_tokens="
                     "512,models.0.max_input_length=64,server.worker_threads=2"),
    });
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    const std::optional<int> port = server_->WaitForPort();
    ASSERT_TRUE(port.has_value()) << "the server did not start:\n" << server_->log();
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port), grpc::InsecureChannelCredentials());
    stub_ = v1::InferenceService::NewStub(channel_);
    health_ = grpc::health::v1::Health::NewStub(channel_);
    for (int i = 0; i < kRequests; ++i) {
      calls_.push_back(StartClassify(*stub_, ClassifyOf(absl::StrCat("request ", i))));
    }
    const auto any_answered = [&] {
      return std::any_of(calls_.begin(), calls_.end(),
                         [](const auto& call) { return call->done(); });
    };
    ASSERT_TRUE(PollUntil(any_answered, absl::Milliseconds(5))) << server_->log();
  }

  // Every call got an answer from the server: computed (OK) or refused because it is shutting
  // down (UNAVAILABLE naming that), never a broken connection. Returns how many were refused
  // after their grace period ended.
  int ExpectEveryCallAnswered() {
    int ended_by_deadline = 0;
    for (const auto& call : calls_) {
      const grpc::Status status = call->Wait();
      if (status.ok()) continue;
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
      ended_by_deadline += absl::StrContains(status.error_message(), "grace period ended") ? 1 : 0;
    }
    return ended_by_deadline;
  }

  void ExpectExitedWith(int code) {
    const std::optional<int> status = server_->WaitForExit();
    ASSERT_TRUE(status.has_value()) << "still running:\n" << server_->log();
    ASSERT_TRUE(WIFEXITED(*status))
        << "ended by signal " << (WIFSIGNALED(*status) ? WTERMSIG(*status) : 0) << ":\n"
        << server_->log();
    EXPECT_EQ(WEXITSTATUS(*status), code) << server_->log();
  }

  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::InferenceService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  std::vector<std::unique_ptr<AsyncClassify>> calls_;
};

// What a dflash-server that ends by itself (--help, --check_config) wrote, and its exit code.
struct FinishedRun {
  int exit_code = -1;  // -1: it did not exit by itself
  std::string output;
};

FinishedRun RunToExit(std::vector<std::string> args) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> started = ServerProcess::Start(std::move(args));
  if (!started.ok()) return {-1, started.status().ToString()};
  const std::optional<int> status = (*started)->WaitForExit();
  if (!status.has_value() || !WIFEXITED(*status)) return {-1, (*started)->log()};
  return {WEXITSTATUS(*status), (*started)->FinalLog()};
}

// Every --set flag applies, in order, a later one winning on the same key; each may carry a
// comma-separated list.
TEST(CommandLineTest, EverySetFlagAppliesInOrder) {
  const FinishedRun run =
      RunToExit({absl::StrCat("--model=", DemoModelDir().string()), "--set=server.worker_threads=3",
                 "--set=models.0.batching.max_batch_tokens=777,server.drain_grace_period=7s",
                 "--set=server.worker_threads=5", "--check_config"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("worker threads 5"));
  EXPECT_THAT(run.output, HasSubstr("batching: 777 tokens"));
  EXPECT_THAT(run.output, HasSubstr("drain grace 7s"));
}

// --help lists the server's flags, --set with how repeated ones combine.
TEST(CommandLineTest, HelpListsTheServerFlags) {
  const FinishedRun run = RunToExit({"--help"});
  ASSERT_NE(run.exit_code, -1) << run.output;
  for (const char* flag : {"--config ", "--model ", "--listen ", "--backend ", "--check_config "}) {
    EXPECT_THAT(run.output, HasSubstr(flag));
  }
  EXPECT_THAT(run.output, HasSubstr("--set (Config overrides"));
  EXPECT_THAT(run.output, HasSubstr("Repeatable:"));
}

// The grace period bounds the drain: what is still queued when it ends is answered UNAVAILABLE,
// every accepted request has an answer, and the process says so and exits 0.
TEST_F(SignalTest, GracePeriodEndAnswersTheQueueUnavailableAndExitsZero) {
  StartLoadedServer("1s");
  server_->Signal(SIGTERM);
  ExpectExitedWith(0);
  EXPECT_GT(ExpectEveryCallAnswered(), 0) << server_->log();
  EXPECT_THAT(server_->log(), HasSubstr("answered UNAVAILABLE without being computed"));
  EXPECT_THAT(server_->log(), HasSubstr("every accepted request was answered"));
}

// A second SIGTERM during a drain ends its grace period: the process answers what is queued
// UNAVAILABLE and exits 0, whichever of its threads takes the signal.
TEST_F(SignalTest, SecondSigtermEndsTheGracePeriodAndEveryCallIsAnswered) {
  StartLoadedServer("10m");
  server_->Signal(SIGTERM);
  ASSERT_TRUE(WaitForHealth(*health_, "", HealthStatus::NOT_SERVING)) << server_->log();
  server_->Signal(SIGTERM);
  ExpectExitedWith(0);
  EXPECT_GT(ExpectEveryCallAnswered(), 0) << server_->log();
  EXPECT_THAT(server_->log(), HasSubstr("ending the grace period now"));
  EXPECT_THAT(server_->log(), HasSubstr("every accepted request was answered"));
}

// SIGINT (Ctrl-C) twice behaves the same.
TEST_F(SignalTest, SecondSigintEndsTheGracePeriodToo) {
  StartLoadedServer("10m");
  server_->Signal(SIGINT);
  ASSERT_TRUE(WaitForHealth(*health_, "", HealthStatus::NOT_SERVING)) << server_->log();
  server_->Signal(SIGINT);
  ExpectExitedWith(0);
  EXPECT_GT(ExpectEveryCallAnswered(), 0) << server_->log();
}

}  // namespace
}  // namespace dflash::e2e
