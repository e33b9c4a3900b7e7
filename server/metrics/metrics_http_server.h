// Serves a registry's text exposition at GET /metrics on its own port, using libmicrohttpd.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/metrics/metric_registry.h"

struct MHD_Daemon;

namespace dflash::microhttpd {
class DaemonLog;
}  // namespace dflash::microhttpd

namespace dflash::metrics {

class MetricsHttpServer {
 public:
  // Listens on `listen_address`, "host:port" ("127.0.0.1:9464", "[::1]:0"; port 0 picks a free
  // port, see port()). `registry` is read on every scrape and must outlive the server. Errors
  // (malformed address, address in use) are returned as a status naming the address.
  // GET or HEAD /metrics -> 200 with the exposition; other methods on /metrics -> 405; any other
  // path -> 404. At most 64 connections at once, 8 from one client address; a connection idle
  // for 5 s is closed.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen_address,
                                                                  const Registry& registry);

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  // Stops listening and waits for in-flight requests (promptly: idle connections are closed).
  ~MetricsHttpServer();

  // The bound port.
  int port() const { return port_; }

 private:
  explicit MetricsHttpServer(const Registry& registry);

  const Registry& registry_;
  // What libmicrohttpd reports while the daemon runs; outlives daemon_.
  std::unique_ptr<microhttpd::DaemonLog> daemon_log_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace dflash::metrics
