// An engine that computes nothing: it validates the batch and returns zero-filled outputs of the
// right shapes at once. It exists to measure what the server itself adds to a request (parsing,
// tokenization, queueing, packing, scattering, serialization) without model time in the way;
// select it with `backend: "null"` (quoted: bare null is YAML for "no value") in server.yaml or
// --backend=null. Never serve users with it.
#pragma once

#include "absl/time/time.h"
#include "engine/engine.h"

namespace dflash {

class NullEngine final : public Engine {
 public:
  // `batch_delay`: how long every Run sleeps first, so that tests of a whole server process can
  // hold work in its queue (dflash-server reads it from DFLASH_TEST_NULL_ENGINE_DELAY).
  explicit NullEngine(ModelConfig config, absl::Duration batch_delay = absl::ZeroDuration())
      : config_(std::move(config)), batch_delay_(batch_delay) {}

  absl::StatusOr<BatchOutput> Run(const PackedBatch& batch, const RunOptions& options) override;
  EngineInfo Info() const override;
  const ModelConfig& config() const override { return config_; }

 private:
  ModelConfig config_;
  absl::Duration batch_delay_;
};

}  // namespace dflash
