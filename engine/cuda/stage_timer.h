// Device time per stage of the encoder (GEMMs, attention, the rest), measured with CUDA events
// recorded on the engine's stream at every stage boundary. For benchmarks: Collect synchronises.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace dflash::cuda {

class StageTimer {
 public:
  enum Stage { kGemm = 0, kAttention = 1, kOther = 2 };
  static constexpr int kStages = 3;

  // Room for `capacity` boundaries per collection (an encoder layer has about ten).
  static absl::StatusOr<std::unique_ptr<StageTimer>> Create(int capacity);
  ~StageTimer();
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

  // Work enqueued on `stream` from now until the next Begin counts towards `stage`.
  void Begin(Stage stage, cudaStream_t stream);
  // Closes the last interval, waits for it, and adds every interval to the totals.
  absl::Status Collect(cudaStream_t stream);
  double milliseconds(Stage stage) const { return totals_[stage]; }
  void Reset() { totals_ = {}; }

 private:
  explicit StageTimer(std::vector<cudaEvent_t> events) : events_(std::move(events)) {}

  std::vector<cudaEvent_t> events_;
  std::vector<Stage> stages_;  // stages_[i]: the stage between events_[i] and events_[i + 1]
  std::array<double, kStages> totals_{};
};

}  // namespace dflash::cuda
