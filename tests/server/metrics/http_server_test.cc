#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "server/metrics/metric_registry.h"
#include "server/metrics/metrics_http_server.h"
#include "server/metrics/text_exposition.h"
#include "tests/server/metrics/large_static_tls.h"

namespace dflash::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A TCP connection to the loopback address of `family` (AF_INET or AF_INET6); -1 on errors.
int ConnectLoopback(int port, int family = AF_INET) {
  const int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (family == AF_INET6) {
    auto* address = reinterpret_cast<sockaddr_in6*>(&storage);
    address->sin6_family = AF_INET6;
    address->sin6_port = htons(static_cast<uint16_t>(port));
    address->sin6_addr = in6addr_loopback;
    length = sizeof(sockaddr_in6);
  } else {
    auto* address = reinterpret_cast<sockaddr_in*>(&storage);
    address->sin_family = AF_INET;
    address->sin_port = htons(static_cast<uint16_t>(port));
    address->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    length = sizeof(sockaddr_in);
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A TCP connection to 127.0.0.1 from the local address `from` (another loopback address, such as
// 127.0.0.2: a second client); -1 when that address cannot be bound or the connection fails.
int ConnectLoopbackFrom(int port, const char* from) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<uint16_t>(port));
  remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (inet_pton(AF_INET, from, &local.sin_addr) != 1 ||
      bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether this machine has an IPv6 loopback address to bind to (containers may not).
bool HasIpv6Loopback() {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return bound;
}

// One HTTP/1.0 request over a loopback socket; returns the raw response ("" on socket errors).
std::string HttpRequest(int port, const std::string& method, const std::string& path,
                        int family = AF_INET) {
  const int fd = ConnectLoopback(port, family);
  if (fd < 0) return "";
  std::string response;
  const std::string request = method + " " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    ssize_t n;
    while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  }
  close(fd);
  return response;
}

struct Response {
  std::string status_line;
  std::string headers;  // lower-cased
  std::string body;
};

Response Split(const std::string& raw) {
  Response response;
  const size_t end_of_headers = raw.find("\r\n\r\n");
  const size_t end_of_status = raw.find("\r\n");
  if (end_of_headers == std::string::npos) return response;
  response.status_line = raw.substr(0, end_of_status);
  response.headers = raw.substr(end_of_status + 2, end_of_headers - end_of_status - 2);
  for (char& c : response.headers) c = static_cast<char>(std::tolower(c));
  response.body = raw.substr(end_of_headers + 4);
  return response;
}

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto family = registry_.AddCounterFamily("scrapes_total", "h \"quoted\"", {"a"});
    ASSERT_TRUE(family.ok());
    ASSERT_TRUE((*(*family)->WithLabels({"x\"y"}))->Increment(7).ok());
  }
  Registry registry_;
};

TEST_F(MetricsHttpServerTest, ServesExpositionAndNotFound) {
  auto server = MetricsHttpServer::Start("127.0.0.1:0", registry_);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);

  const Response metrics = Split(HttpRequest((*server)->port(), "GET", "/metrics"));
  EXPECT_THAT(metrics.status_line, HasSubstr(" 200 "));
  EXPECT_THAT(metrics.headers,
              HasSubstr("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_EQ(metrics.body, SerializeTextExposition(registry_));
  EXPECT_THAT(metrics.body, HasSubstr("scrapes_total{a=\"x\\\"y\"} 7\n"));

  EXPECT_THAT(Split(HttpRequest((*server)->port(), "GET", "/other")).status_line,
              HasSubstr(" 404 "));
  EXPECT_THAT(Split(HttpRequest((*server)->port(), "GET", "/metrics/x")).status_line,
              HasSubstr(" 404 "));
  EXPECT_THAT(Split(HttpRequest((*server)->port(), "POST", "/metrics")).status_line,
              HasSubstr(" 405 "));
  EXPECT_THAT(Split(HttpRequest((*server)->port(), "PUT", "/metrics")).status_line,
              HasSubstr(" 405 "));
  const Response head = Split(HttpRequest((*server)->port(), "HEAD", "/metrics"));
  EXPECT_THAT(head.status_line, HasSubstr(" 200 "));
  EXPECT_EQ(head.body, "");
}

// Prometheus keeps its connection open between scrapes: two HTTP/1.1 requests on one connection.
TEST_F(MetricsHttpServerTest, KeepsTheConnectionAlive) {
  auto server = MetricsHttpServer::Start("127.0.0.1:0", registry_);
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = ConnectLoopback((*server)->port());
  ASSERT_GE(fd, 0);
  const timeval timeout{5, 0};  // A server that does not answer fails the test, not hangs it.
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)), 0);
  const std::string expected_body = SerializeTextExposition(registry_);
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    std::string raw;
    char buffer[4096];
    ssize_t n = 0;
    while (Split(raw).body.size() < expected_body.size() &&
           (n = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
      raw.append(buffer, n);
    }
    const Response response = Split(raw);
    EXPECT_THAT(response.status_line, HasSubstr(" 200 ")) << "request " << i;
    EXPECT_THAT(response.headers, Not(HasSubstr("connection: close"))) << "request " << i;
    EXPECT_EQ(response.body, expected_body) << "request " << i;
  }
  close(fd);
}

// Idle connections hold the endpoint's connection slots until they time out. More of them from
// one client than the endpoint has slots in all must not lock out another client's scrape: the
// per-client limit leaves slots free. The scrape's wait is bounded below the 30 s idle timeout
// that once freed the slots (a scrape then waited for it, and the idle client could renew it).
TEST_F(MetricsHttpServerTest, IdleConnectionsFromOneClientDoNotBlockAnotherClientsScrape) {
  auto server = MetricsHttpServer::Start("127.0.0.1:0", registry_);
  ASSERT_TRUE(server.ok()) << server.status();
  const int probe = ConnectLoopbackFrom((*server)->port(), "127.0.0.2");
  if (probe < 0) GTEST_SKIP() << "cannot connect from 127.0.0.2 here";
  close(probe);

  constexpr int kIdleConnections = 48;  // More than the endpoint ever had slots in all (32).
  std::vector<int> idle;
  for (int i = 0; i < kIdleConnections; ++i) {
    const int fd = ConnectLoopback((*server)->port());
    ASSERT_GE(fd, 0) << "idle connection " << i;
    idle.push_back(fd);
  }
  const int fd = ConnectLoopbackFrom((*server)->port(), "127.0.0.2");
  ASSERT_GE(fd, 0);
  const timeval timeout{20, 0};  // Bounded: a scrape left waiting for a slot fails the test.
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)), 0);
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string raw;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) raw.append(buffer, n);
  close(fd);
  for (const int connection : idle) close(connection);
  const Response response = Split(raw);
  EXPECT_THAT(response.status_line, HasSubstr(" 200 "));
  EXPECT_EQ(response.body, SerializeTextExposition(registry_));
}

TEST_F(MetricsHttpServerTest, AddressInUseNamesTheAddress) {
  auto first = MetricsHttpServer::Start("127.0.0.1:0", registry_);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string address = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = MetricsHttpServer::Start(address, registry_);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr(address));
  EXPECT_THAT(second.status().message(), HasSubstr("in use"));
}

TEST_F(MetricsHttpServerTest, MalformedAddressesAreErrors) {
  for (const std::string address : {"", "127.0.0.1", ":80", "127.0.0.1:", "127.0.0.1:99999",
                                    "127.0.0.1:80s", "127.0.0.1:1,127.0.0.1:2", "127.0.0.1:-1"}) {
    auto server = MetricsHttpServer::Start(address, registry_);
    ASSERT_FALSE(server.ok()) << address;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_THAT(server.status().message(), HasSubstr("'" + address + "'"));
  }
}

TEST_F(MetricsHttpServerTest, UnresolvableHostIsAnError) {
  auto server = MetricsHttpServer::Start("no-such-host.invalid:0", registry_);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("no-such-host.invalid:0"));
}

TEST_F(MetricsHttpServerTest, ServesOverIpv6) {
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback address here";
  auto server = MetricsHttpServer::Start("[::1]:0", registry_);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  const Response metrics = Split(HttpRequest((*server)->port(), "GET", "/metrics", AF_INET6));
  EXPECT_THAT(metrics.status_line, HasSubstr(" 200 "));
  EXPECT_EQ(metrics.body, SerializeTextExposition(registry_));
}

// dflash-server links the CUDA libraries, whose static TLS (~175 KB) glibc carves out of every
// thread's stack: civetweb, which gives its workers a ~100 KB stack, could not start a thread
// there ("Cannot create first worker thread"). This binary links a library with 256 KiB of TLS.
TEST_F(MetricsHttpServerTest, ServesDespiteLargeStaticTls) {
  ASSERT_GE(testing::LargeStaticTlsBytes(), size_t{256 * 1024});
  // The premise: in this process, a thread with a 100 KB stack cannot be created.
  pthread_attr_t attributes;
  ASSERT_EQ(pthread_attr_init(&attributes), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attributes, 100 * 1024), 0);
  pthread_t thread;
  const int created = pthread_create(
      &thread, &attributes, [](void*) -> void* { return nullptr; }, nullptr);
  if (created == 0) pthread_join(thread, nullptr);
  pthread_attr_destroy(&attributes);
  EXPECT_EQ(created, EINVAL);

  auto server = MetricsHttpServer::Start("127.0.0.1:0", registry_);
  ASSERT_TRUE(server.ok()) << server.status();
  const Response metrics = Split(HttpRequest((*server)->port(), "GET", "/metrics"));
  EXPECT_THAT(metrics.status_line, HasSubstr(" 200 "));
  EXPECT_EQ(metrics.body, SerializeTextExposition(registry_));
}

// Stopping is prompt (civetweb's mg_stop took about 2 s), even with an idle client connected.
TEST_F(MetricsHttpServerTest, StopsPromptly) {
  auto server = MetricsHttpServer::Start("127.0.0.1:0", registry_);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT(Split(HttpRequest((*server)->port(), "GET", "/metrics")).status_line,
              HasSubstr(" 200 "));
  const int idle = ConnectLoopback((*server)->port());
  ASSERT_GE(idle, 0);
  const auto start = std::chrono::steady_clock::now();
  server->reset();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  close(idle);
  EXPECT_LT(elapsed, std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace dflash::metrics
