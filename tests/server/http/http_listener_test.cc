// server/http/http_listener.{h,cc}: StopAccepting while connections are busy keeps serving them,
// refuses new ones and never aborts the process, even when the listener's threads run their event
// loop at the moment it stops accepting; a port in use fails the start with the reason.
#include "server/http/http_listener.h"

#include <dlfcn.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/http_client.h"

namespace {

// Set on the thread that calls StopAccepting: its removals of a listening socket from an epoll set
// wait 50 ms first, so that the listener's event-loop threads run while the removal is pending.
thread_local bool stretch_listen_removal = false;

bool IsListening(int fd) {
  int listening = 0;
  socklen_t size = sizeof(listening);
  return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 && listening != 0;
}

}  // namespace

// libmicrohttpd calls epoll_ctl through the dynamic linker, so this definition stands in for libc's
// in this test binary and forwards to it.
extern "C" int epoll_ctl(int epoll_fd, int operation, int fd, epoll_event* event) {
  using EpollCtl = int (*)(int, int, int, epoll_event*);
  static const auto libc_epoll_ctl = reinterpret_cast<EpollCtl>(dlsym(RTLD_NEXT, "epoll_ctl"));
  if (stretch_listen_removal && operation == EPOLL_CTL_DEL && IsListening(fd)) {
    usleep(50'000);
  }
  return libc_epoll_ctl(epoll_fd, operation, fd, event);
}

namespace dflash::http {
namespace {

using e2e::HttpAnswer;
using e2e::HttpClient;
using e2e::PollUntil;

absl::StatusOr<std::unique_ptr<HttpListener>> Start(const std::string& address,
                                                    unsigned int max_connections = 4096) {
  HttpListenerOptions options;
  options.listen_address = address;
  options.threads = 2;
  options.max_connections = max_connections;
  return HttpListener::Start(std::move(options), [](HttpRequest, HttpResponder respond) {
    HttpResponse response;
    response.body = "{}";
    respond(std::move(response));
  });
}

std::unique_ptr<HttpListener> StartListener() {
  absl::StatusOr<std::unique_ptr<HttpListener>> listener = Start("127.0.0.1:0");
  EXPECT_TRUE(listener.ok()) << listener.status();
  return listener.ok() ? *std::move(listener) : nullptr;
}

// One keep-alive connection sending requests back to back until the server closes it.
struct BusyConnection {
  explicit BusyConnection(HttpClient connected) : client(std::move(connected)) {
    thread = std::thread([this] {
      while (true) {
        absl::StatusOr<HttpAnswer> answer = client.Get("/health");
        if (!answer.ok() || answer->status != 200) {
          failed = true;
          return;
        }
        answered.fetch_add(1);
        if (answer->headers["connection"] == "close") {
          closed_by_server = client.WaitForClose();
          return;
        }
      }
    });
  }
  ~BusyConnection() {
    if (thread.joinable()) thread.join();
  }

  HttpClient client;
  std::atomic<int> answered{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> closed_by_server{false};
  std::thread thread;
};

TEST(HttpListenerTest, StopAcceptingWhileServingKeepsTheOpenConnections) {
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    std::unique_ptr<HttpListener> listener = StartListener();
    ASSERT_NE(listener, nullptr);
    const int port = listener->port();
    // Busy connections on every listener thread keep them in their event loops while the
    // listener stops accepting; the answers after that close the connections.
    std::vector<std::unique_ptr<BusyConnection>> busy;
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<HttpClient> client = HttpClient::Connect(port);
      ASSERT_TRUE(client.ok()) << client.status();
      busy.push_back(std::make_unique<BusyConnection>(*std::move(client)));
    }
    for (const auto& connection : busy) {
      ASSERT_TRUE(PollUntil([&] { return connection->answered.load() >= 10 || connection->failed; },
                            absl::Milliseconds(1)));
    }

    stretch_listen_removal = true;
    listener->StopAccepting();
    stretch_listen_removal = false;
    EXPECT_FALSE(HttpClient::Connect(port).ok()) << "a connection was accepted after the stop";
    for (auto& connection : busy) {
      connection->thread.join();
      EXPECT_FALSE(connection->failed);
      EXPECT_TRUE(connection->closed_by_server);
    }
  }
}

// Stops and destroys `listener` on another thread; aborts the test binary when that does not end
// within the wait limit (a listener thread that hangs would otherwise hang the whole run).
void StopWithinTheWaitLimit(std::unique_ptr<HttpListener> listener) {
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    listener->StopAccepting();
    listener.reset();
    stopped = true;
  });
  if (!PollUntil([&] { return stopped.load(); }, absl::Milliseconds(10))) {
    ADD_FAILURE() << "the listener did not stop";
    std::abort();
  }
  stopper.join();
}

TEST(HttpListenerTest, ConnectionsPastTheLimitWaitAndAreServedInTurn) {
  constexpr int kLimit = 8;
  absl::StatusOr<std::unique_ptr<HttpListener>> listener = Start("127.0.0.1:0", kLimit);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = (*listener)->port();
  // The ASSERTs leave this lambda, so that the listener is stopped (or its hang caught) after a
  // failure too.
  [&] {
    // All at once, more than the limit: the first kLimit are served, the rest wait in the backlog.
    // The client sockets of this process take every other descriptor number of the listener's
    // accepted ones, which puts them all on one of the listener's threads.
    std::vector<std::unique_ptr<HttpClient>> clients;
    for (int i = 0; i < 3 * kLimit; ++i) {
      absl::StatusOr<HttpClient> client = HttpClient::Connect(port);
      ASSERT_TRUE(client.ok()) << client.status();
      clients.push_back(std::make_unique<HttpClient>(*std::move(client)));
    }
    for (int i = 0; i < kLimit; ++i) {
      absl::StatusOr<HttpAnswer> answer = clients[i]->Get("/health");
      ASSERT_TRUE(answer.ok()) << "connection " << i << ": " << answer.status();
      EXPECT_EQ(answer->status, 200);
    }
    // Each connection closed lets one waiting connection in.
    for (int i = kLimit; i < 3 * kLimit; ++i) {
      clients[i - kLimit].reset();
      absl::StatusOr<HttpAnswer> answer = clients[i]->Get("/health");
      ASSERT_TRUE(answer.ok()) << "connection " << i << ": " << answer.status();
      EXPECT_EQ(answer->status, 200);
    }
  }();
  StopWithinTheWaitLimit(*std::move(listener));
}

TEST(HttpListenerTest, APortInUseFailsTheStartWithTheReason) {
  std::unique_ptr<HttpListener> first = StartListener();
  ASSERT_NE(first, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", first->port());
  absl::StatusOr<std::unique_ptr<HttpListener>> second = Start(address);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status(),
            absl::UnavailableError(absl::StrCat("cannot serve HTTP on '", address,
                                                "': bind: Address already in use")));
}

}  // namespace
}  // namespace dflash::http
