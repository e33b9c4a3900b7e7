// Serves a registry's text exposition at GET /metrics on its own port, using civetweb (the HTTP
// server prometheus-cpp's exposer uses).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/metrics/metric_registry.h"

struct mg_context;
struct mg_connection;

namespace dflash::metrics {

class MetricsHttpServer {
 public:
  // Listens on `listen_address`, "host:port" ("127.0.0.1:9464", "[::1]:0"; port 0 picks a free
  // port, see port()). `registry` is read on every scrape and must outlive the server. Errors
  // (malformed address, address in use) are returned as a status naming the address.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen_address,
                                                                  const Registry& registry);

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  // Stops listening and waits for in-flight requests.
  ~MetricsHttpServer();

  // The bound port.
  int port() const { return port_; }

 private:
  explicit MetricsHttpServer(const Registry& registry) : registry_(registry) {}

  // GET or HEAD /metrics -> 200 with the exposition; other methods on /metrics -> 405; any other
  // path -> 404.
  static int HandleRequest(mg_connection* connection, void* server);

  const Registry& registry_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace dflash::metrics
