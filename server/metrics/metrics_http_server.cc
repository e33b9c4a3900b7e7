#include "server/metrics/metrics_http_server.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/metrics/text_exposition.h"

namespace dflash::metrics {
namespace {

// civetweb's listening_ports syntax has extras (lists, 's'/'r' suffixes for TLS and redirects);
// accept only host:port so an address cannot silently mean something else.
absl::Status ValidateListenAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port) || port > 65535 ||
      address.find(',') != std::string::npos ||
      address.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("metrics listen address '", address,
                                                   "' is not host:port (e.g. 127.0.0.1:9464)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen_address, const Registry& registry) {
  if (absl::Status status = ValidateListenAddress(listen_address); !status.ok()) return status;
  // civetweb's global state is initialised once per process and kept (it is reference counted
  // and cheap; tearing it down while another server runs would break that server).
  static std::once_flag library_initialised;
  std::call_once(library_initialised, [] { mg_init_library(0); });

  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(registry));
  const char* options[] = {"listening_ports", listen_address.c_str(), "num_threads", "2", nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  mg_init_data init;
  init.callbacks = &callbacks;
  init.user_data = nullptr;
  init.configuration_options = options;
  char error_text[256] = {0};
  unsigned error_code = 0;
  mg_error_data error;
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on '", listen_address,
                                               "': ", error_text[0] ? error_text : "unknown error",
                                               " (civetweb error ", error_code, ")"));
  }
  mg_server_port ports[1];
  if (mg_get_server_ports(server->context_, 1, ports) != 1 || ports[0].port <= 0) {
    return absl::InternalError(
        absl::StrCat("metrics server on '", listen_address, "' reports no bound port"));
  }
  server->port_ = ports[0].port;
  // "**" matches every path, so unknown paths get our 404 rather than a file-serving attempt.
  mg_set_request_handler(server->context_, "**", &MetricsHttpServer::HandleRequest, server.get());
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (context_ != nullptr) mg_stop(context_);
}

int MetricsHttpServer::HandleRequest(mg_connection* connection, void* server) {
  const mg_request_info* request = mg_get_request_info(connection);
  const std::string uri = request->local_uri != nullptr ? request->local_uri : "";
  const std::string method = request->request_method != nullptr ? request->request_method : "";
  if (uri != "/metrics") {
    mg_send_http_error(connection, 404, "%s", "Not Found: metrics are at /metrics\n");
    return 404;
  }
  if (method != "GET" && method != "HEAD") {
    mg_send_http_error(connection, 405, "%s", "Method Not Allowed\n");
    return 405;
  }
  const std::string body =
      SerializeTextExposition(static_cast<MetricsHttpServer*>(server)->registry_);
  const std::string content_type(kTextExpositionContentType);
  mg_send_http_ok(connection, content_type.c_str(), static_cast<long long>(body.size()));
  if (method == "GET") mg_write(connection, body.data(), body.size());
  return 200;
}

}  // namespace dflash::metrics
