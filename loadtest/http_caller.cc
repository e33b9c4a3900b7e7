#include "loadtest/http_caller.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace dflash::loadtest {
namespace {

// Splits "host:port" / "[v6]:port" of a checked loopback target (schemes stripped).
absl::Status SplitHostPort(absl::string_view target, std::string& host, std::string& port) {
  if (absl::StartsWith(target, "unix:") || absl::StartsWith(target, "unix-abstract:")) {
    return absl::InvalidArgumentError("--protocol=http needs a TCP target (host:PORT)");
  }
  absl::ConsumePrefix(&target, "dns:///");
  absl::ConsumePrefix(&target, "dns:");
  absl::ConsumePrefix(&target, "ipv4:");
  absl::ConsumePrefix(&target, "ipv6:");
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("no port in target \"", target, "\""));
  }
  absl::string_view host_part = target.substr(0, colon);
  if (absl::ConsumePrefix(&host_part, "[")) absl::ConsumeSuffix(&host_part, "]");
  host = std::string(host_part);
  port = std::string(target.substr(colon + 1));
  return absl::OkStatus();
}

std::string ErrnoText(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpCaller>> HttpCaller::Create(absl::string_view target,
                                                               int connections,
                                                               std::string api_key) {
  if (connections < 1) return absl::InvalidArgumentError("HTTP needs at least one connection");
  std::string host;
  std::string port;
  if (absl::Status split = SplitHostPort(target, host, port); !split.ok()) return split;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
      error != 0 || found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve \"", target, "\": ", ::gai_strerror(error)));
  }
  sockaddr_storage address{};
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  const auto length = static_cast<socklen_t>(found->ai_addrlen);
  ::freeaddrinfo(found);
  const std::string host_header = absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port)
                                                               : absl::StrCat(host, ":", port);
  std::unique_ptr<HttpCaller> caller(
      new HttpCaller(address, length, host_header, std::move(api_key)));
  caller->threads_.reserve(static_cast<size_t>(connections));
  for (int i = 0; i < connections; ++i) {
    caller->threads_.emplace_back([raw = caller.get()] { raw->ConnectionLoop(); });
  }
  return caller;
}

HttpCaller::HttpCaller(sockaddr_storage address, socklen_t address_length, std::string host,
                       std::string api_key)
    : address_(address),
      address_length_(address_length),
      host_(std::move(host)),
      api_key_(std::move(api_key)) {}

HttpCaller::~HttpCaller() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

bool HttpCaller::Open(int& fd, std::string& error) const {
  CloseFd(fd);
  fd = ::socket(address_.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = ErrnoText("socket");
    return false;
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address_), address_length_) != 0) {
    error = absl::StrCat(ErrnoText("connect"), " (", host_, ")");
    CloseFd(fd);
    return false;
  }
  // Requests are written whole; do not hold the last segment back for an ACK.
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return true;
}

absl::Status HttpCaller::Probe() const {
  int fd = -1;
  std::string error;
  if (!Open(fd, error)) return absl::UnavailableError(absl::StrCat("cannot connect: ", error));
  CloseFd(fd);
  return absl::OkStatus();
}

HttpOutcome HttpCaller::Exchange(int& fd, const HttpCall& call,
                                 std::chrono::nanoseconds timeout) const {
  const Clock::time_point deadline = Clock::now() + timeout;
  const std::string request = SerializeHttpRequest(call, host_, api_key_);
  // A kept-alive connection the server has closed since its last answer fails before any byte of
  // an answer: that call is retried once on a fresh connection.
  for (int attempt = 0;; ++attempt) {
    const bool reused = fd >= 0;
    std::string error;
    if (fd < 0 && !Open(fd, error)) return {false, "UNAVAILABLE", error};
    HttpResponseReader reader;
    auto fail = [&](std::string code, std::string message) -> std::optional<HttpOutcome> {
      CloseFd(fd);
      if (reused && attempt == 0 && reader.empty() && code == "UNAVAILABLE") return std::nullopt;
      return HttpOutcome{false, std::move(code), std::move(message)};
    };
    std::optional<HttpOutcome> outcome;
    size_t written = 0;
    while (!outcome.has_value() && fd >= 0 && written < request.size()) {
      const ssize_t n =
          ::send(fd, request.data() + written, request.size() - written, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        outcome = fail("UNAVAILABLE", ErrnoText("send"));
        break;
      }
      written += static_cast<size_t>(n);
    }
    char buffer[16384];
    while (!outcome.has_value() && fd >= 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        outcome = fail("DEADLINE_EXCEEDED", "no complete answer before the deadline");
        break;
      }
      pollfd waiting{fd, POLLIN, 0};
      const int ready = ::poll(&waiting, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) continue;  // The deadline check above ends the call.
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        outcome = fail("UNAVAILABLE", ErrnoText("recv"));
        break;
      }
      if (n == 0) {
        if (absl::Status closed = reader.FinishAtClose(); !closed.ok()) {
          outcome = fail("UNAVAILABLE", std::string(closed.message()));
          break;
        }
      } else {
        absl::StatusOr<bool> complete =
            reader.Feed(absl::string_view(buffer, static_cast<size_t>(n)));
        if (!complete.ok()) {
          outcome = fail("INTERNAL", std::string(complete.status().message()));
          break;
        }
        if (!*complete) continue;
      }
      if (!reader.keep_alive() || n == 0) CloseFd(fd);
      if (reader.status() >= 200 && reader.status() < 300) {
        outcome = HttpOutcome{true, "OK", ""};
      } else {
        outcome = HttpOutcome{false, absl::StrCat("HTTP_", reader.status()),
                              reader.body().substr(0, 512)};
      }
    }
    if (outcome.has_value()) return *std::move(outcome);
  }
}

void HttpCaller::ConnectionLoop() {
  int fd = -1;
  for (;;) {
    Pending pending;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // Stopping, and nothing left to send.
      pending = std::move(queue_.front());
      queue_.pop_front();
    }
    pending.done(Exchange(fd, *pending.call, pending.timeout));
  }
  CloseFd(fd);
}

void HttpCaller::Start(const HttpCall* call, std::chrono::nanoseconds timeout,
                       std::function<void(HttpOutcome)> done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Pending{call, timeout, std::move(done)});
  }
  ready_.notify_one();
}

}  // namespace dflash::loadtest
