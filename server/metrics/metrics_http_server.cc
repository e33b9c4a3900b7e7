#include "server/metrics/metrics_http_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/metrics/text_exposition.h"
#include "server/microhttpd/daemon_log.h"

namespace dflash::metrics {

namespace {

struct HostPort {
  std::string host;  // Without the brackets of an IPv6 address.
  std::string port_text;
  uint16_t port = 0;
};

// Accepts only host:port ("127.0.0.1:9464", "[::1]:0", "localhost:9464"), so that an address
// cannot silently mean something else.
absl::StatusOr<HostPort> ParseListenAddress(const std::string& address) {
  const auto invalid = [&address] {
    return absl::InvalidArgumentError(absl::StrCat("metrics listen address '", address,
                                                   "' is not host:port (e.g. 127.0.0.1:9464)"));
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return invalid();
  HostPort parsed{address.substr(0, colon), address.substr(colon + 1)};
  uint32_t port = 0;
  if (parsed.port_text.empty() || parsed.port_text.size() > 5 ||
      parsed.port_text.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(parsed.port_text, &port) || port > 65535) {
    return invalid();
  }
  parsed.port = static_cast<uint16_t>(port);
  absl::string_view host = parsed.host;
  const bool bracketed = absl::ConsumePrefix(&host, "[");
  if (bracketed != absl::ConsumeSuffix(&host, "]") || host.empty() ||
      (!bracketed && host.find(':') != absl::string_view::npos)) {
    return invalid();
  }
  for (const char c : host) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c)) || c == '[' || c == ']') {
      return invalid();
    }
  }
  parsed.host = std::string(host);
  return parsed;
}

MHD_Result Respond(MHD_Connection* connection, unsigned int status, const std::string& body,
                   const std::string& content_type, const char* allow = nullptr) {
  // MHD copies the body; for HEAD it sends the headers (Content-Length included) only.
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;  // Out of memory: MHD closes the connection.
  MHD_Result result =
      MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type.c_str());
  if (result == MHD_YES && allow != nullptr) {
    result = MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
  }
  if (result == MHD_YES) result = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return result;
}

// GET or HEAD /metrics -> 200 with the exposition; other methods on /metrics -> 405; any other
// path -> 404. `url` is the decoded path, without the query. MHD calls this once when the headers
// are in, then (for a body) once per piece of it, then once more when the request is complete.
// Errors are answered on the first call (MHD then closes the connection rather than read a body);
// a scrape on the last, as MHD keeps a connection alive only for a response to a whole request.
MHD_Result HandleRequest(void* registry, MHD_Connection* connection, const char* url,
                         const char* method, const char* /*version*/, const char* /*upload_data*/,
                         size_t* upload_data_size, void** request_state) {
  const std::string plain_text = "text/plain; charset=utf-8";
  if (absl::string_view(url) != "/metrics") {
    return Respond(connection, MHD_HTTP_NOT_FOUND, "Not Found: metrics are at /metrics\n",
                   plain_text);
  }
  const absl::string_view verb(method);
  if (verb != MHD_HTTP_METHOD_GET && verb != MHD_HTTP_METHOD_HEAD) {
    return Respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "Method Not Allowed\n", plain_text,
                   "GET, HEAD");
  }
  if (*request_state == nullptr) {  // First call: wait for the whole request.
    *request_state = connection;    // Any non-null value marks the request as seen.
    return MHD_YES;
  }
  if (*upload_data_size != 0) {  // A body on a GET: read and ignored.
    *upload_data_size = 0;
    return MHD_YES;
  }
  return Respond(connection, MHD_HTTP_OK,
                 SerializeTextExposition(*static_cast<const Registry*>(registry)),
                 std::string(kTextExpositionContentType));
}

// Connections at once, in all and from one client address. Each idle connection holds a slot (and
// a thread) until it times out: the per-client limit keeps one client (a scanner, a leaking
// client, an attacker) from taking every slot and locking the scrapers out; Prometheus holds one
// connection per scraper.
constexpr unsigned int kMaxConnections = 64;
constexpr unsigned int kMaxConnectionsPerClient = 8;
// Seconds a connection may stay idle. A scrape is one request and its answer; Prometheus
// reconnects when its kept-alive connection was closed in between.
constexpr unsigned int kIdleTimeoutSeconds = 5;

}  // namespace

MetricsHttpServer::MetricsHttpServer(const Registry& registry)
    : registry_(registry),
      // After the start, a message is about a connection that cannot be served.
      daemon_log_(
          std::make_unique<microhttpd::DaemonLog>("metrics endpoint", spdlog::level::warn)) {}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen_address, const Registry& registry) {
  absl::StatusOr<HostPort> parsed = ParseListenAddress(listen_address);
  if (!parsed.ok()) return parsed.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  if (const int error =
          getaddrinfo(parsed->host.c_str(), parsed->port_text.c_str(), &hints, &addresses);
      error != 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on '", listen_address,
                                               "': cannot resolve '", parsed->host,
                                               "': ", gai_strerror(error)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned_addresses(addresses, &freeaddrinfo);

  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(registry));
  // A name may resolve to several addresses (localhost: ::1 and 127.0.0.1): the first that can be
  // bound is served.
  for (const addrinfo* address = addresses; address != nullptr && server->daemon_ == nullptr;
       address = address->ai_next) {
    if (address->ai_family != AF_INET && address->ai_family != AF_INET6) continue;
    // One internal thread accepts, and each connection gets a thread of its own: scrapes are
    // rare and small, and a slow client holds up no other. poll(), not select(), which cannot
    // watch a descriptor numbered 1024 or more (the server holds many gRPC connections). No
    // MHD_OPTION_THREAD_STACK_SIZE: MHD's threads then get glibc's default stack (RLIMIT_STACK,
    // 8 MiB), which has room for the static TLS glibc carves out of every thread's stack. The
    // CUDA libraries the server links hold ~175 KB of it; civetweb's fixed ~100 KB worker stacks
    // could not even start. IPv6: dual stack, so "[::]" also accepts IPv4, as gRPC's "[::]" does.
    unsigned int flags =
        MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
    if (address->ai_family == AF_INET6) flags |= MHD_USE_DUAL_STACK;
    server->daemon_ = MHD_start_daemon(
        // The port is MHD_OPTION_SOCK_ADDR's; this one only appears in MHD's error messages.
        flags, parsed->port, /*apc=*/nullptr,
        /*apc_cls=*/nullptr, &HandleRequest, const_cast<Registry*>(&server->registry_),
        // The logger first, so that it receives the messages about the other options too.
        MHD_OPTION_EXTERNAL_LOGGER, &microhttpd::DaemonLog::Collect, server->daemon_log_.get(),
        MHD_OPTION_SOCK_ADDR, static_cast<const sockaddr*>(address->ai_addr),
        MHD_OPTION_CONNECTION_LIMIT, kMaxConnections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        kMaxConnectionsPerClient, MHD_OPTION_CONNECTION_TIMEOUT, kIdleTimeoutSeconds,
        MHD_OPTION_END);
  }
  const std::string serving = absl::StrCat("metrics on '", listen_address, "'");
  if (absl::Status started = server->daemon_log_->EndStart(server->daemon_, serving);
      !started.ok()) {
    return started;
  }
  absl::StatusOr<int> bound_port = microhttpd::DaemonLog::BoundPort(server->daemon_, serving);
  if (!bound_port.ok()) return bound_port.status();
  server->port_ = *bound_port;
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  // Closes the listening socket and every connection, and joins MHD's threads: milliseconds
  // (civetweb's mg_stop took about 2 s).
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace dflash::metrics
