// An engine that computes nothing: it validates the batch and returns zero-filled outputs of the
// right shapes at once. It exists to measure what the server itself adds to a request (parsing,
// tokenization, queueing, packing, scattering, serialization) without model time in the way;
// select it with `backend: "null"` (quoted: bare null is YAML for "no value") in server.yaml or
// --backend=null. Never serve users with it.
#pragma once

#include "absl/time/time.h"
#include "engine/engine.h"

namespace dflash {

// How long every NullEngine::Run sleeps first: `per_batch` plus `per_token` for each token of the
// batch, so that tests of a whole server process can hold work in its queue and benchmarks can
// stand in for device time (dflash-server reads it from DFLASH_TEST_NULL_ENGINE_DELAY).
struct NullEngineDelay {
  absl::Duration per_batch = absl::ZeroDuration();
  absl::Duration per_token = absl::ZeroDuration();
};

class NullEngine final : public Engine {
 public:
  using Delay = NullEngineDelay;

  explicit NullEngine(ModelConfig config, Delay delay = {})
      : config_(std::move(config)), delay_(delay) {}

  absl::StatusOr<BatchOutput> Run(const PackedBatch& batch, const RunOptions& options) override;
  EngineInfo Info() const override;
  const ModelConfig& config() const override { return config_; }

 private:
  ModelConfig config_;
  Delay delay_;
};

}  // namespace dflash
