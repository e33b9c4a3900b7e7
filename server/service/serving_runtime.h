// The whole running service for one ServerConfig: models (tokenizers, engines, batchers), the
// tokenization pool, the gRPC server (InferenceService, grpc.health.v1, reflection; TLS/mTLS and
// API keys as configured) and the metrics endpoint. dflash-server's main and the end-to-end tests
// both run it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/config/server_config.h"
#include "server/http/http_front.h"
#include "server/http/http_listener.h"
#include "server/kserve/kserve_service.h"
#include "server/metrics/metric_registry.h"
#include "server/metrics/metrics_http_server.h"
#include "server/service/api_key_authenticator.h"
#include "server/service/call_admission.h"
#include "server/service/inference_pipeline.h"
#include "server/service/inference_service.h"
#include "server/service/model_catalog.h"
#include "server/service/service_metrics.h"
#include "server/service/worker_pool.h"

namespace dflash::serving {

// Creates one served model; the default is ServedModel::Load. Tests substitute engines.
using ModelLoader = std::function<absl::StatusOr<std::unique_ptr<ServedModel>>(
    const ModelEntry&, std::shared_ptr<BatchObserver>)>;

// The health service names under which serving status is reported: "" (the whole server) and
// the inference service's full name.
inline constexpr char kInferenceServiceName[] = "dflash.v1.InferenceService";

// How a drain ended.
struct DrainResult {
  // Accepted requests still unanswered when the drain ended (0: every one got an answer).
  int64_t unanswered = 0;
  // Queued requests answered UNAVAILABLE, never computed, when the grace period ended.
  int64_t unavailable_at_deadline = 0;
};

// After the grace period: how long batches already on an engine, and calls between admission and
// their batcher, get to deliver their answers before the drain counts what is left.
inline constexpr absl::Duration kDrainAnswerMargin = absl::Seconds(2);

class ServingRuntime {
 public:
  // Loads every model (warm-up included), then starts serving. Errors leave nothing running.
  static absl::StatusOr<std::unique_ptr<ServingRuntime>> Start(const ServerConfig& config,
                                                               ServerIdentity identity,
                                                               ModelLoader loader = nullptr);
  ~ServingRuntime();  // Drain(zero grace) if Drain was not called.

  ServingRuntime(const ServingRuntime&) = delete;
  ServingRuntime& operator=(const ServingRuntime&) = delete;

  // The bound gRPC port (useful with "host:0") and the metrics port (0 when disabled).
  int port() const { return port_; }
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }
  // The bound HTTP/JSON port (0 when server.http_listen is off).
  int http_port() const { return http_listener_ ? http_listener_->port() : 0; }

  // Graceful shutdown: health turns NOT_SERVING, new calls get UNAVAILABLE, and accepted requests
  // are answered as usual for up to `grace` (or until EndGracePeriod). Then whatever is still
  // queued is answered UNAVAILABLE without being computed, batches already on an engine end (the
  // wait for their answers is bounded by kDrainAnswerMargin), and batchers and the gRPC server
  // stop. Idempotent: a second call returns an empty result at once.
  DrainResult Drain(absl::Duration grace);
  // Ends the grace period of a running Drain now, or of the next one at its start. Thread-safe
  // (dflash-server calls it on a second SIGTERM / SIGINT).
  void EndGracePeriod();

  const ModelCatalog& catalog() const { return catalog_; }
  metrics::Registry& registry() { return registry_; }

 private:
  ServingRuntime() = default;
  absl::Status StartGrpc(const ServerConfig& config);
  absl::Status StartHttp(const ServerConfig& config);

  // Declaration order is destruction order in reverse: the gRPC server goes first, the metrics
  // registry (read by the batchers' observers) last.
  metrics::Registry registry_;
  std::unique_ptr<ServiceMetrics> metrics_;
  ModelCatalog catalog_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<InferencePipeline> pipeline_;
  std::unique_ptr<CallAdmission> admission_;
  std::unique_ptr<ApiKeyAuthenticator> authenticator_;
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<kserve::KserveService> kserve_service_;  // KServe v2, on the same port.
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<http::HttpFront> http_front_;
  std::unique_ptr<http::HttpListener> http_listener_;
  std::unique_ptr<metrics::MetricsHttpServer> metrics_server_;
  int port_ = 0;
  bool drained_ = false;
};

}  // namespace dflash::serving
