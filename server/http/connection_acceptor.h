// The HTTP listener's listening socket and the thread that accepts its connections and hands each
// one over (to libmicrohttpd, which serves it). Stop ends the listening at once: from its return
// on, connections to the port are refused. Accepting here, not in libmicrohttpd, lets the listener
// stop accepting without MHD_quiesce_daemon, which in epoll mode races with the daemon's own
// threads over the listening socket and can abort the process (libmicrohttpd 0.9.75).
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"

namespace dflash::http {

class ConnectionAcceptor {
 public:
  // A new connected socket (non-blocking, close-on-exec), owned by the callee from then on. True
  // when the callee serves it; false when it refused it (and closed it).
  using HandOver = absl::AnyInvocable<bool(int socket, const sockaddr* peer, socklen_t peer_size)>;

  // Binds `address` and listens (an IPv6 address also accepts IPv4: dual stack; port 0 takes a
  // free port). Accepts nothing until Start. A connection counts as open from its hand-over
  // until ConnectionClosed (or a refused hand-over); while `max_open` are open it accepts no more:
  // they wait in the socket's backlog. UNAVAILABLE naming the failed call and the system's reason
  // ("bind: Address already in use").
  static absl::StatusOr<std::unique_ptr<ConnectionAcceptor>> Listen(const addrinfo& address,
                                                                    int64_t max_open);
  ~ConnectionAcceptor();  // Stop.
  ConnectionAcceptor(const ConnectionAcceptor&) = delete;
  ConnectionAcceptor& operator=(const ConnectionAcceptor&) = delete;

  int port() const { return port_; }
  // Starts the accepting thread, which calls `hand_over` for every connection. Called once.
  void Start(HandOver hand_over);
  // Joins the accepting thread and closes the listening socket. Idempotent; not concurrent with
  // itself or Start.
  void Stop();

  // A connection handed over has closed (from any thread).
  void ConnectionClosed();

 private:
  ConnectionAcceptor(int listen_fd, int wake_fd, int port, int64_t max_open);
  void Run();
  // Accepts what is pending (a bounded series). False after a failure that calls for a pause
  // (out of descriptors or memory) before the next try.
  bool AcceptPending();
  void Wake();

  int listen_fd_;      // -1 once stopped.
  const int wake_fd_;  // An eventfd: wakes the thread to stop, or to accept again after a pause.
  const int port_;
  const int64_t max_open_;
  HandOver hand_over_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> open_{0};
  // Set by the thread while it waits for open connections to fall below max_open_.
  std::atomic<bool> full_{false};
  std::thread thread_;
};

}  // namespace dflash::http
