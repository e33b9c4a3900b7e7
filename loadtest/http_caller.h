// Sends HTTP/1.1 requests over a pool of keep-alive connections to one loopback address, one
// request at a time per connection, each connection served by its own thread. Start never waits
// for an answer (it queues the call), so an open-loop sender keeps its schedule as it does over
// gRPC; a call that finds every connection busy waits in the queue, and that wait counts against
// its latency.
#pragma once

#include <sys/socket.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/http_request.h"
#include "loadtest/run_stats.h"

namespace dflash::loadtest {

// How one HTTP call ended. `code` names the failure as reports count it: "HTTP_<status>" for a
// non-2xx answer, UNAVAILABLE when the connection failed, DEADLINE_EXCEEDED past the deadline.
struct HttpOutcome {
  bool ok = false;
  std::string code;
  std::string message;
};

class HttpCaller {
 public:
  // `target`: a checked loopback target (CheckLoopbackTarget) naming a TCP host and port;
  // INVALID_ARGUMENT for unix sockets or an unresolvable host. Connections open on first use.
  static absl::StatusOr<std::unique_ptr<HttpCaller>> Create(absl::string_view target,
                                                            int connections, std::string api_key);
  ~HttpCaller();

  // Checks that the target accepts a connection (UNAVAILABLE naming it when not), so that a run
  // against a server that is not up fails before it starts.
  absl::Status Probe() const;

  // Queues the call; `done` runs exactly once, on a connection thread. `call` must stay alive
  // until then. The deadline counts from the moment a connection takes the call.
  void Start(const HttpCall* call, std::chrono::nanoseconds timeout,
             std::function<void(HttpOutcome)> done);

 private:
  struct Pending {
    const HttpCall* call;
    std::chrono::nanoseconds timeout;
    std::function<void(HttpOutcome)> done;
  };

  HttpCaller(sockaddr_storage address, socklen_t address_length, std::string host,
             std::string api_key);
  // Connects `fd` (closing any old one); false with `error` set when it fails.
  bool Open(int& fd, std::string& error) const;
  HttpOutcome Exchange(int& fd, const HttpCall& call, std::chrono::nanoseconds timeout) const;
  void ConnectionLoop();

  sockaddr_storage address_;
  socklen_t address_length_;
  std::string host_;  // The Host header.
  std::string api_key_;

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Pending> queue_;  // Guarded by mutex_.
  bool stopping_ = false;      // Guarded by mutex_.
  std::vector<std::thread> threads_;
};

}  // namespace dflash::loadtest
