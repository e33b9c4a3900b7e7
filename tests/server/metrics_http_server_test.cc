#include "server/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "server/metrics/metric_registry.h"
#include "server/metrics/text_exposition.h"

namespace dflash::metrics {
namespace {

using ::testing::HasSubstr;

// One HTTP/1.0 request over a loopback socket; returns the raw response ("" on socket errors).
std::string HttpRequest(int port, const std::string& method, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      ssize_t n;
      while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
    }
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
  const Response head = Split(HttpRequest((*server)->port(), "HEAD", "/metrics"));
  EXPECT_THAT(head.status_line, HasSubstr(" 200 "));
  EXPECT_EQ(head.body, "");
}

TEST_F(MetricsHttpServerTest, AddressInUseNamesTheAddress) {
  auto first = MetricsHttpServer::Start("127.0.0.1:0", registry_);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string address = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = MetricsHttpServer::Start(address, registry_);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr(address));
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

}  // namespace
}  // namespace dflash::metrics
