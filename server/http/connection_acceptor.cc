#include "server/http/connection_acceptor.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace dflash::http {
namespace {

// Connections accepted in one go before the stop flag is looked at again.
constexpr int kAcceptSeries = 64;
// The pause after accept fails for want of descriptors or memory: the pending connection stays
// pending, so trying again at once would spin.
constexpr int kPauseMilliseconds = 100;

absl::Status SystemError(absl::string_view call, int error) {
  return absl::UnavailableError(absl::StrCat(call, ": ", std::strerror(error)));
}

// accept(2): errors of the connection being accepted, not of the listening socket. Linux reports
// the new connection's pending network errors through accept too.
bool IsConnectionError(int error) {
  switch (error) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConnectionAcceptor>> ConnectionAcceptor::Listen(
    const addrinfo& address, int64_t max_open) {
  const int fd = socket(address.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return SystemError("socket", errno);
  const auto fail = [fd](absl::string_view call) {
    const int error = errno;
    close(fd);
    return SystemError(call, error);
  };
  const int on = 1;
  const int off = 0;
  // A restarted server binds again at once, while connections of the previous one linger. Both
  // options are wishes: without them the socket still serves.
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0) {
    Log().warn("HTTP listener: SO_REUSEADDR: {}", std::strerror(errno));
  }
  if (address.ai_family == AF_INET6 &&
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) != 0) {
    Log().warn("HTTP listener: no IPv4 on the IPv6 address (IPV6_V6ONLY): {}",
               std::strerror(errno));
  }
  if (bind(fd, address.ai_addr, address.ai_addrlen) != 0) return fail("bind");
  if (listen(fd, SOMAXCONN) != 0) return fail("listen");
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_size) != 0) {
    return fail("getsockname");
  }
  const int port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) return fail("eventfd");
  return std::unique_ptr<ConnectionAcceptor>(new ConnectionAcceptor(fd, wake_fd, port, max_open));
}

ConnectionAcceptor::ConnectionAcceptor(int listen_fd, int wake_fd, int port, int64_t max_open)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port), max_open_(max_open) {}

ConnectionAcceptor::~ConnectionAcceptor() {
  Stop();
  close(wake_fd_);
}

void ConnectionAcceptor::Start(HandOver hand_over) {
  hand_over_ = std::move(hand_over);
  thread_ = std::thread([this] { Run(); });
}

void ConnectionAcceptor::Stop() {
  stopping_.store(true);
  if (thread_.joinable()) {
    Wake();
    thread_.join();
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

void ConnectionAcceptor::ConnectionClosed() {
  // Pairs with Run's store of full_ before its check of open_: one of the two sees the other.
  if (open_.fetch_sub(1) <= max_open_ && full_.exchange(false)) Wake();
}

void ConnectionAcceptor::Wake() {
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void ConnectionAcceptor::Run() {
  bool paused = false;
  while (!stopping_.load()) {
    bool full = false;
    if (open_.load() >= max_open_) {
      full_.store(true);
      full = open_.load() >= max_open_;
      if (!full) full_.store(false);
    }
    // Full or paused, only the eventfd (and the pause's timeout) can end the wait.
    pollfd watched[2] = {{full || paused ? -1 : listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int ready = poll(watched, 2, paused && !full ? kPauseMilliseconds : -1);
    if (ready < 0 && errno != EINTR) {
      Log().error("HTTP listener: poll: {}", std::strerror(errno));
      paused = true;
      continue;
    }
    if ((watched[1].revents & POLLIN) != 0) {
      uint64_t count = 0;
      while (read(wake_fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
      }
    }
    if (full) continue;
    paused = !AcceptPending();
  }
}

bool ConnectionAcceptor::AcceptPending() {
  for (int accepted = 0; accepted < kAcceptSeries && !stopping_.load(); ++accepted) {
    if (open_.load() >= max_open_) return true;  // Run waits for a connection to close.
    sockaddr_storage peer{};
    socklen_t peer_size = sizeof(peer);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_size,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      // Counted before the hand-over: the server may register the connection later, on another
      // thread, and the count must not let more in meanwhile.
      open_.fetch_add(1);
      if (!hand_over_(fd, reinterpret_cast<const sockaddr*>(&peer), peer_size)) {
        ConnectionClosed();
      }
      continue;
    }
    const int error = errno;
    if (error == EAGAIN || error == EWOULDBLOCK) return true;
    if (IsConnectionError(error)) continue;
    // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), or a broken socket: the
    // connection waits in the backlog meanwhile.
    Log().warn("HTTP listener: accept: {}; accepting again in {} ms", std::strerror(error),
               kPauseMilliseconds);
    return false;
  }
  return true;
}

}  // namespace dflash::http
