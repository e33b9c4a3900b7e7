// The model-side interface of the service: one Engine per device runs packed batches of one
// model. Implementations: CpuEngine (exact float32 reference and fallback) and, with a CUDA
// toolkit, the CUDA engine. An engine is not required to be thread-safe: the server gives each
// engine one worker thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/packed_batch.h"

namespace dflash {

struct EngineInfo {
  std::string backend;  // "cpu" or "cuda"
  std::string device;   // Human-readable device description.
  std::string dtype;    // Compute dtype, e.g. "float32".
  int64_t weight_bytes = 0;
  int64_t workspace_bytes = 0;
  // Memory of the device the engine computes on: the GPU's as the driver reports it, or the
  // host's (MemTotal / MemAvailable) for the CPU engine; 0 for the null engine.
  int64_t device_free_bytes = 0;
  int64_t device_total_bytes = 0;
  // The kernel tuning in use (CUDA engines), e.g. a profile's name; empty elsewhere.
  std::string tuning;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Runs one packed batch. Invalid batches give INVALID_ARGUMENT or FAILED_PRECONDITION (see
  // ValidatePackedBatch); device failures give INTERNAL or RESOURCE_EXHAUSTED.
  virtual absl::StatusOr<BatchOutput> Run(const PackedBatch& batch, const RunOptions& options) = 0;
  virtual EngineInfo Info() const = 0;
  // EngineInfo::device_free_bytes as of now, for gauges refreshed on every scrape: safe to call
  // while Run executes on another thread. -1 when the engine has no device memory to report.
  virtual int64_t FreeDeviceBytes() const { return -1; }
  // OK while the engine can run batches. An engine whose device failed beyond recovery reports
  // UNAVAILABLE here, and the server stops giving it work.
  virtual absl::Status Health() const { return absl::OkStatus(); }
  virtual const ModelConfig& config() const = 0;
};

}  // namespace dflash
