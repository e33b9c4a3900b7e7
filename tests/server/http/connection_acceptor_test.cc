// server/http/connection_acceptor.{h,cc}: connections are handed over once started, refused once
// stopped, held in the backlog while the open count is at its limit; bind failures name the call.
#include "server/http/connection_acceptor.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash::http {
namespace {

using ::testing::HasSubstr;

// The resolved numeric address `host`:`port`, freed with the object.
class Address {
 public:
  Address(const char* host, int port) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
    EXPECT_EQ(getaddrinfo(host, absl::StrCat(port).c_str(), &hints, &info_), 0);
  }
  ~Address() {
    if (info_ != nullptr) freeaddrinfo(info_);
  }
  const addrinfo& get() const { return *info_; }

 private:
  addrinfo* info_ = nullptr;
};

// A client socket connected to 127.0.0.1:`port`, or -1 (errno says why).
int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

// What the acceptor handed over: the sockets (closed with the object) and their peers' families.
struct HandedOver {
  ~HandedOver() {
    for (int fd : sockets) close(fd);
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return sockets.size();
  }
  bool WaitForCount(size_t count) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (this->count() < count && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    return this->count() >= count;
  }
  ConnectionAcceptor::HandOver Callback() {
    return [this](int socket, const sockaddr* peer, socklen_t /*peer_size*/) {
      std::lock_guard<std::mutex> lock(mutex);
      sockets.push_back(socket);
      families.push_back(peer->sa_family);
      return true;
    };
  }

  std::mutex mutex;
  std::vector<int> sockets;
  std::vector<int> families;
};

std::unique_ptr<ConnectionAcceptor> Listen(const char* host, int port, int64_t max_open) {
  Address address(host, port);
  absl::StatusOr<std::unique_ptr<ConnectionAcceptor>> acceptor =
      ConnectionAcceptor::Listen(address.get(), max_open);
  EXPECT_TRUE(acceptor.ok()) << acceptor.status();
  return acceptor.ok() ? *std::move(acceptor) : nullptr;
}

TEST(ConnectionAcceptorTest, HandsOverConnectionsOnceStartedAndRefusesThemOnceStopped) {
  std::unique_ptr<ConnectionAcceptor> acceptor = Listen("127.0.0.1", 0, 16);
  ASSERT_NE(acceptor, nullptr);
  EXPECT_GT(acceptor->port(), 0);
  HandedOver handed_over;
  const int early = ConnectLoopback(acceptor->port());  // Waits in the backlog until Start.
  ASSERT_GE(early, 0);
  acceptor->Start(handed_over.Callback());
  const int second = ConnectLoopback(acceptor->port());
  ASSERT_GE(second, 0);
  ASSERT_TRUE(handed_over.WaitForCount(2));
  EXPECT_EQ(handed_over.families, (std::vector<int>{AF_INET, AF_INET}));

  acceptor->Stop();
  EXPECT_EQ(ConnectLoopback(acceptor->port()), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  acceptor->Stop();  // Idempotent.
  EXPECT_EQ(handed_over.count(), 2u);
  close(early);
  close(second);
}

TEST(ConnectionAcceptorTest, HoldsConnectionsInTheBacklogWhileFull) {
  std::unique_ptr<ConnectionAcceptor> acceptor = Listen("127.0.0.1", 0, 1);
  ASSERT_NE(acceptor, nullptr);
  HandedOver handed_over;
  acceptor->Start(handed_over.Callback());
  const int first = ConnectLoopback(acceptor->port());
  ASSERT_TRUE(handed_over.WaitForCount(1));

  const int waiting = ConnectLoopback(acceptor->port());  // The kernel completes the handshake.
  ASSERT_GE(waiting, 0);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(handed_over.count(), 1u) << "handed over while at the limit";

  acceptor->ConnectionClosed();  // As the server reports the first connection closed.
  EXPECT_TRUE(handed_over.WaitForCount(2));
  close(first);
  close(waiting);
}

TEST(ConnectionAcceptorTest, ARefusedHandOverLeavesItsPlaceFree) {
  std::unique_ptr<ConnectionAcceptor> acceptor = Listen("127.0.0.1", 0, 1);
  ASSERT_NE(acceptor, nullptr);
  HandedOver handed_over;
  std::atomic<int> refused{0};
  acceptor->Start([&, record = handed_over.Callback()](int socket, const sockaddr* peer,
                                                       socklen_t peer_size) mutable {
    if (refused.load() == 0) {  // The server refuses the first connection (and closes it).
      close(socket);
      refused.fetch_add(1);
      return false;
    }
    return record(socket, peer, peer_size);
  });
  const int first = ConnectLoopback(acceptor->port());
  const int second = ConnectLoopback(acceptor->port());
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  EXPECT_TRUE(handed_over.WaitForCount(1)) << "the refused connection kept its place";
  EXPECT_EQ(refused.load(), 1);
  close(first);
  close(second);
}

TEST(ConnectionAcceptorTest, AnIpv6AnyAddressAcceptsIpv4Too) {
  const int probe = socket(AF_INET6, SOCK_STREAM, 0);
  if (probe < 0) GTEST_SKIP() << "no IPv6 on this machine";
  close(probe);
  std::unique_ptr<ConnectionAcceptor> acceptor = Listen("::", 0, 16);
  ASSERT_NE(acceptor, nullptr);
  HandedOver handed_over;
  acceptor->Start(handed_over.Callback());
  const int client = ConnectLoopback(acceptor->port());
  ASSERT_GE(client, 0);
  EXPECT_TRUE(handed_over.WaitForCount(1));
  close(client);
}

TEST(ConnectionAcceptorTest, ABindFailureNamesTheCallAndTheReason) {
  std::unique_ptr<ConnectionAcceptor> first = Listen("127.0.0.1", 0, 16);
  ASSERT_NE(first, nullptr);
  Address taken("127.0.0.1", first->port());
  absl::StatusOr<std::unique_ptr<ConnectionAcceptor>> second =
      ConnectionAcceptor::Listen(taken.get(), 16);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("bind: Address already in use"));
}

}  // namespace
}  // namespace dflash::http
