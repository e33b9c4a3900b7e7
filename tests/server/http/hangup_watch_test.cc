// server/http/hangup_watch.{h,cc}: a watched socket's peer hang-up sets the flag; data, a
// forgotten watch and the watch's end leave it alone.
#include "server/http/hangup_watch.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dflash::http {
namespace {

// A connected pair of stream sockets, closed at the end of the test.
struct SocketPair {
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0); }
  ~SocketPair() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
  void CloseClient() {
    close(fds[1]);
    fds[1] = -1;
  }
  int server() const { return fds[0]; }
  int client() const { return fds[1]; }
  int fds[2] = {-1, -1};
};

// Waits up to 5 s for `flag`.
bool WaitFor(const std::atomic<bool>& flag) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!flag.load() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return flag.load();
}

std::unique_ptr<HangupWatch> StartWatch() {
  absl::StatusOr<std::unique_ptr<HangupWatch>> watch = HangupWatch::Start();
  EXPECT_TRUE(watch.ok()) << watch.status();
  return watch.ok() ? *std::move(watch) : nullptr;
}

TEST(HangupWatchTest, ClosedPeerSetsTheFlag) {
  std::unique_ptr<HangupWatch> watch = StartWatch();
  ASSERT_NE(watch, nullptr);
  SocketPair pair;
  auto gone = std::make_shared<std::atomic<bool>>(false);
  EXPECT_NE(watch->Watch(pair.server(), gone), 0u);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(gone->load()) << "set while the client is still connected";
  pair.CloseClient();
  EXPECT_TRUE(WaitFor(*gone));
}

TEST(HangupWatchTest, ShutDownSendingSideCountsAsGone) {
  std::unique_ptr<HangupWatch> watch = StartWatch();
  ASSERT_NE(watch, nullptr);
  SocketPair pair;
  auto gone = std::make_shared<std::atomic<bool>>(false);
  watch->Watch(pair.server(), gone);
  ASSERT_EQ(shutdown(pair.client(), SHUT_WR), 0);
  EXPECT_TRUE(WaitFor(*gone));
}

TEST(HangupWatchTest, PendingDataIsNoHangup) {
  std::unique_ptr<HangupWatch> watch = StartWatch();
  ASSERT_NE(watch, nullptr);
  SocketPair pair;
  auto gone = std::make_shared<std::atomic<bool>>(false);
  watch->Watch(pair.server(), gone);
  // A pipelined next request: readable data, the client still there.
  ASSERT_EQ(write(pair.client(), "GET / HTTP/1.1\r\n\r\n", 18), 18);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(gone->load());
}

TEST(HangupWatchTest, ForgottenWatchIsNotSet) {
  std::unique_ptr<HangupWatch> watch = StartWatch();
  ASSERT_NE(watch, nullptr);
  SocketPair forgotten;
  SocketPair watched;
  auto forgotten_gone = std::make_shared<std::atomic<bool>>(false);
  auto watched_gone = std::make_shared<std::atomic<bool>>(false);
  const uint64_t id = watch->Watch(forgotten.server(), forgotten_gone);
  watch->Watch(watched.server(), watched_gone);
  watch->Forget(id);
  watch->Forget(id);  // Twice: nothing.
  watch->Forget(0);
  forgotten.CloseClient();
  watched.CloseClient();
  // Once the second hang-up is seen, the first (forgotten) one would have been too.
  EXPECT_TRUE(WaitFor(*watched_gone));
  EXPECT_FALSE(forgotten_gone->load());
}

TEST(HangupWatchTest, UnwatchableSocketGivesNoId) {
  std::unique_ptr<HangupWatch> watch = StartWatch();
  ASSERT_NE(watch, nullptr);
  EXPECT_EQ(watch->Watch(-1, std::make_shared<std::atomic<bool>>(false)), 0u);
}

}  // namespace
}  // namespace dflash::http
