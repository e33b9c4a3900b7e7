// The service's Prometheus metrics (names and labels in one place). Label values come from bounded
// sets only: rpc names, served model ids, status code names; never request content or ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/batching/batch_scheduler.h"
#include "server/metrics/metric_registry.h"

namespace dflash::serving {

class ServiceMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<ServiceMetrics>> Create(metrics::Registry& registry,
                                                                absl::string_view version,
                                                                absl::string_view revision);

  // One finished request (unary call or stream message). `model` is "" when it did not resolve;
  // `protocol` names the front it came through (ProtocolName).
  void RecordRequest(absl::string_view protocol, absl::string_view rpc, absl::string_view model,
                     absl::StatusCode code, absl::Duration total);
  // The stages of one request that ran on the model.
  void RecordStages(absl::string_view model, absl::Duration tokenization, absl::Duration queue,
                    absl::Duration inference);
  void RecordTokens(absl::string_view model, int64_t tokens, int64_t truncated_inputs);
  void SetInflight(int64_t requests);
  // `tuning`: the CUDA engine's kernel tuning (profile name and mode); empty for other engines.
  void SetModelInfo(absl::string_view model, absl::string_view backend, absl::string_view device,
                    absl::string_view dtype, absl::string_view tuning);
  // kind: "weights", "workspace", "free", "total".
  void SetDeviceMemory(absl::string_view device, absl::string_view kind, double bytes);

  // Batcher events of one model, as metrics.
  std::shared_ptr<BatchObserver> ObserverFor(absl::string_view model);

 private:
  class Observer;
  ServiceMetrics() = default;

  metrics::Family<metrics::Counter>* requests_ = nullptr;
  metrics::Family<metrics::Histogram>* request_duration_ = nullptr;
  metrics::Family<metrics::Histogram>* tokenization_duration_ = nullptr;
  metrics::Family<metrics::Histogram>* queue_duration_ = nullptr;
  metrics::Family<metrics::Histogram>* inference_duration_ = nullptr;
  metrics::Family<metrics::Histogram>* batch_duration_ = nullptr;
  metrics::Family<metrics::Histogram>* batch_stage_ = nullptr;
  metrics::Family<metrics::Histogram>* batch_sequences_ = nullptr;
  metrics::Family<metrics::Histogram>* batch_tokens_ = nullptr;
  metrics::Family<metrics::Gauge>* queue_requests_ = nullptr;
  metrics::Family<metrics::Gauge>* queue_sequences_ = nullptr;
  metrics::Family<metrics::Gauge>* queue_tokens_ = nullptr;
  metrics::Family<metrics::Counter>* tokens_ = nullptr;
  metrics::Family<metrics::Counter>* truncated_inputs_ = nullptr;
  metrics::Family<metrics::Counter>* batches_ = nullptr;
  metrics::Family<metrics::Counter>* engine_errors_ = nullptr;
  metrics::Family<metrics::Counter>* dropped_ = nullptr;
  metrics::Family<metrics::Gauge>* inflight_ = nullptr;
  metrics::Family<metrics::Gauge>* build_info_ = nullptr;
  metrics::Family<metrics::Gauge>* model_info_ = nullptr;
  metrics::Family<metrics::Gauge>* device_memory_ = nullptr;
};

// "OK", "INVALID_ARGUMENT", ...: the gRPC status code names, as Prometheus label values.
std::string StatusCodeName(absl::StatusCode code);

}  // namespace dflash::serving
