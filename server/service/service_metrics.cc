#include "server/service/service_metrics.h"

#include <optional>
#include <vector>

#include "common/status_macros.h"

namespace dflash::serving {
namespace {

// Request-level latencies: 100 us to 60 s, about 2.5x apart.
std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0, 30.0,  60.0};
}

// Host and engine stages of one batch: 10 us to 10 s, about 2.5x apart (packing a small batch
// takes microseconds).
std::vector<double> StageBuckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
          0.025,   0.05,     0.1,     0.25,   0.5,     1.0,    2.5,   5.0,    10.0};
}

std::vector<double> PowersOfTwo(double first, double last) {
  std::vector<double> bounds;
  for (double bound = first; bound <= last; bound *= 2) bounds.push_back(bound);
  return bounds;
}

// Metric updates never fail for the label counts used here; a failure would be a programming
// error in this file, caught by the service tests' scrape checks.
template <typename T>
T* Get(metrics::Family<T>* family, const std::vector<std::string>& labels) {
  absl::StatusOr<T*> metric = family->WithLabels(labels);
  return metric.ok() ? *metric : nullptr;
}

double Seconds(absl::Duration duration) { return absl::ToDoubleSeconds(duration); }

}  // namespace

std::string StatusCodeName(absl::StatusCode code) {
  return absl::StatusCodeToString(code);  // Already upper case: "INVALID_ARGUMENT".
}

class ServiceMetrics::Observer final : public BatchObserver {
 public:
  Observer(ServiceMetrics* metrics, std::string model) : metrics_(metrics), model_(model) {}

  void OnBatch(int sequences, int tokens, absl::Duration engine_time,
               const absl::Status& status) override {
    if (batches_ != nullptr) (void)batches_->Increment();
    if (!status.ok()) {
      if (engine_errors_ != nullptr) (void)engine_errors_->Increment();
      return;
    }
    if (batch_sequences_ != nullptr) batch_sequences_->Observe(sequences);
    if (batch_tokens_ != nullptr) batch_tokens_->Observe(tokens);
    if (batch_duration_ != nullptr) batch_duration_->Observe(Seconds(engine_time));
  }
  void OnQueueDepth(int requests, int64_t sequences, int64_t tokens) override {
    if (queue_requests_ != nullptr) queue_requests_->Set(requests);
    if (queue_sequences_ != nullptr) queue_sequences_->Set(static_cast<double>(sequences));
    if (queue_tokens_ != nullptr) queue_tokens_->Set(static_cast<double>(tokens));
  }
  void OnDropped(absl::StatusCode code) override {
    if (auto* m = Get(metrics_->dropped_, {model_, StatusCodeName(code)})) (void)m->Increment();
  }
  void OnBatchStages(absl::Duration pack, absl::Duration run, std::optional<absl::Duration> device,
                     absl::Duration deliver) override {
    if (pack_ != nullptr) pack_->Observe(Seconds(pack));
    if (run_ != nullptr) run_->Observe(Seconds(run));
    if (device_ != nullptr && device.has_value()) device_->Observe(Seconds(*device));
    if (deliver_ != nullptr) deliver_->Observe(Seconds(deliver));
  }

 private:
  ServiceMetrics* metrics_;
  std::string model_;
  // Looked up once: the queue depth changes with every request, the others with every batch.
  metrics::Counter* batches_ = Get(metrics_->batches_, {model_});
  metrics::Counter* engine_errors_ = Get(metrics_->engine_errors_, {model_});
  metrics::Histogram* batch_sequences_ = Get(metrics_->batch_sequences_, {model_});
  metrics::Histogram* batch_tokens_ = Get(metrics_->batch_tokens_, {model_});
  metrics::Histogram* batch_duration_ = Get(metrics_->batch_duration_, {model_});
  metrics::Gauge* queue_requests_ = Get(metrics_->queue_requests_, {model_});
  metrics::Gauge* queue_sequences_ = Get(metrics_->queue_sequences_, {model_});
  metrics::Gauge* queue_tokens_ = Get(metrics_->queue_tokens_, {model_});
  metrics::Histogram* pack_ = Get(metrics_->batch_stage_, {model_, "pack"});
  metrics::Histogram* run_ = Get(metrics_->batch_stage_, {model_, "run"});
  metrics::Histogram* device_ = Get(metrics_->batch_stage_, {model_, "device"});
  metrics::Histogram* deliver_ = Get(metrics_->batch_stage_, {model_, "deliver"});
};

absl::StatusOr<std::unique_ptr<ServiceMetrics>> ServiceMetrics::Create(metrics::Registry& registry,
                                                                       absl::string_view version,
                                                                       absl::string_view revision) {
  std::unique_ptr<ServiceMetrics> m(new ServiceMetrics());
  using Labels = std::vector<std::string>;
  DFLASH_ASSIGN_OR_RETURN(
      m->requests_,
      registry.AddCounterFamily("dflash_requests_total",
                                "Requests answered, by protocol, RPC, model and gRPC status code "
                                "(a stream counts each request message).",
                                Labels{"protocol", "rpc", "model", "code"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->request_duration_,
      registry.AddHistogramFamily("dflash_request_duration_seconds",
                                  "Time from receiving a request to its answer being ready.",
                                  Labels{"protocol", "rpc", "model"}, LatencyBuckets()));
  DFLASH_ASSIGN_OR_RETURN(m->tokenization_duration_,
                          registry.AddHistogramFamily("dflash_tokenization_duration_seconds",
                                                      "Time spent tokenizing one request's inputs.",
                                                      Labels{"model"}, LatencyBuckets()));
  DFLASH_ASSIGN_OR_RETURN(
      m->queue_duration_,
      registry.AddHistogramFamily(
          "dflash_queue_duration_seconds",
          "Time from entering the model's queue to the start of the request's first batch.",
          Labels{"model"}, LatencyBuckets()));
  DFLASH_ASSIGN_OR_RETURN(
      m->inference_duration_,
      registry.AddHistogramFamily("dflash_inference_duration_seconds",
                                  "Time from the start of a request's first batch to the end of "
                                  "its last one.",
                                  Labels{"model"}, LatencyBuckets()));
  DFLASH_ASSIGN_OR_RETURN(m->batch_duration_,
                          registry.AddHistogramFamily("dflash_batch_duration_seconds",
                                                      "Engine time of one packed batch.",
                                                      Labels{"model"}, LatencyBuckets()));
  DFLASH_ASSIGN_OR_RETURN(
      m->batch_stage_,
      registry.AddHistogramFamily(
          "dflash_batch_stage_seconds",
          "Stages of one packed batch: pack (cut from the queue and packed), run (the engine's "
          "Run), device (the GPU's span within run, CUDA engines only: run minus device is the "
          "host's part) and deliver (from the end of Run until its last request was answered). "
          "Pack and deliver overlap the engine's next run.",
          Labels{"model", "stage"}, StageBuckets()));
  DFLASH_ASSIGN_OR_RETURN(
      m->batch_sequences_,
      registry.AddHistogramFamily("dflash_batch_sequences", "Sequences in one packed batch.",
                                  Labels{"model"}, PowersOfTwo(1, 4096)));
  DFLASH_ASSIGN_OR_RETURN(
      m->batch_tokens_,
      registry.AddHistogramFamily("dflash_batch_tokens",
                                  "Tokens in one packed batch (no padding is ever computed).",
                                  Labels{"model"}, PowersOfTwo(16, 262144)));
  DFLASH_ASSIGN_OR_RETURN(
      m->queue_requests_,
      registry.AddGaugeFamily("dflash_queue_requests", "Requests waiting in the model's queue.",
                              Labels{"model"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->queue_sequences_,
      registry.AddGaugeFamily("dflash_queue_sequences", "Sequences waiting in the model's queue.",
                              Labels{"model"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->queue_tokens_,
      registry.AddGaugeFamily("dflash_queue_tokens", "Tokens waiting in the model's queue.",
                              Labels{"model"}));
  DFLASH_ASSIGN_OR_RETURN(m->tokens_,
                          registry.AddCounterFamily("dflash_tokens_total",
                                                    "Tokens computed by the model (special tokens "
                                                    "included, after truncation).",
                                                    Labels{"model"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->truncated_inputs_,
      registry.AddCounterFamily("dflash_truncated_inputs_total",
                                "Model sequences that were truncated to fit.", Labels{"model"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->batches_,
      registry.AddCounterFamily("dflash_batches_total",
                                "Packed batches run by the model's engines.", Labels{"model"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->engine_errors_,
      registry.AddCounterFamily("dflash_engine_errors_total",
                                "Packed batches whose engine run failed.", Labels{"model"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->dropped_,
      registry.AddCounterFamily("dflash_dropped_requests_total",
                                "Requests answered without compute because their deadline passed "
                                "or their client cancelled while queued.",
                                Labels{"model", "code"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->inflight_,
      registry.AddGaugeFamily("dflash_inflight_requests",
                              "Requests accepted and not answered yet (all models).", Labels{}));
  DFLASH_ASSIGN_OR_RETURN(
      m->build_info_,
      registry.AddGaugeFamily("dflash_build_info", "Always 1; the server's version and revision.",
                              Labels{"version", "revision"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->model_info_,
      registry.AddGaugeFamily("dflash_model_info", "Always 1; what runs each served model.",
                              Labels{"model", "backend", "device", "dtype", "tuning"}));
  DFLASH_ASSIGN_OR_RETURN(
      m->device_memory_,
      registry.AddGaugeFamily("dflash_device_memory_bytes",
                              "Device memory: model weights, engine workspace, and the device's "
                              "free and total memory (a GPU; the host for the CPU engine).",
                              Labels{"device", "kind"}));
  if (auto* g = Get(m->build_info_, {std::string(version), std::string(revision)})) g->Set(1);
  if (auto* g = Get(m->inflight_, {})) g->Set(0);
  return m;
}

void ServiceMetrics::RecordRequest(absl::string_view protocol, absl::string_view rpc,
                                   absl::string_view model, absl::StatusCode code,
                                   absl::Duration total) {
  const std::string protocol_name(protocol), rpc_name(rpc), model_name(model);
  if (auto* m = Get(requests_, {protocol_name, rpc_name, model_name, StatusCodeName(code)})) {
    (void)m->Increment();
  }
  if (auto* m = Get(request_duration_, {protocol_name, rpc_name, model_name})) {
    m->Observe(Seconds(total));
  }
}

void ServiceMetrics::RecordStages(absl::string_view model, absl::Duration tokenization,
                                  absl::Duration queue, absl::Duration inference) {
  const std::string name(model);
  if (auto* m = Get(tokenization_duration_, {name})) m->Observe(Seconds(tokenization));
  if (auto* m = Get(queue_duration_, {name})) m->Observe(Seconds(queue));
  if (auto* m = Get(inference_duration_, {name})) m->Observe(Seconds(inference));
}

void ServiceMetrics::RecordTokens(absl::string_view model, int64_t tokens,
                                  int64_t truncated_inputs) {
  const std::string name(model);
  if (auto* m = Get(tokens_, {name})) (void)m->Increment(static_cast<double>(tokens));
  if (truncated_inputs > 0) {
    if (auto* m = Get(truncated_inputs_, {name})) {
      (void)m->Increment(static_cast<double>(truncated_inputs));
    }
  }
}

void ServiceMetrics::SetInflight(int64_t requests) {
  if (auto* m = Get(inflight_, {})) m->Set(static_cast<double>(requests));
}

void ServiceMetrics::SetModelInfo(absl::string_view model, absl::string_view backend,
                                  absl::string_view device, absl::string_view dtype,
                                  absl::string_view tuning) {
  if (auto* m = Get(model_info_, {std::string(model), std::string(backend), std::string(device),
                                  std::string(dtype), std::string(tuning)})) {
    m->Set(1);
  }
}

void ServiceMetrics::SetDeviceMemory(absl::string_view device, absl::string_view kind,
                                     double bytes) {
  if (auto* m = Get(device_memory_, {std::string(device), std::string(kind)})) m->Set(bytes);
}

std::shared_ptr<BatchObserver> ServiceMetrics::ObserverFor(absl::string_view model) {
  // Counters that only move on failures exist from the start at 0, so that rates and alerts on
  // them have a series to evaluate before the first failure.
  Get(engine_errors_, {std::string(model)});
  return std::make_shared<Observer>(this, std::string(model));
}

}  // namespace dflash::serving
