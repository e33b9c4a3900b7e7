#include "engine/cuda/stage_timer.h"

#include "engine/cuda/cuda_status.h"

namespace dflash::cuda {

absl::StatusOr<std::unique_ptr<StageTimer>> StageTimer::Create(int capacity) {
  std::vector<cudaEvent_t> events(static_cast<size_t>(capacity) + 1, nullptr);
  for (cudaEvent_t& event : events) {
    if (cudaError_t error = cudaEventCreate(&event); error != cudaSuccess) {
      for (cudaEvent_t made : events) {
        if (made != nullptr) cudaEventDestroy(made);
      }
      return CudaStatus(error, "cudaEventCreate");
    }
  }
  return std::unique_ptr<StageTimer>(new StageTimer(std::move(events)));
}

StageTimer::~StageTimer() {
  for (cudaEvent_t event : events_) cudaEventDestroy(event);
}

void StageTimer::Begin(Stage stage, cudaStream_t stream) {
  // Past capacity the last interval grows and keeps its stage: the sum stays right, the split
  // gets coarser. Size the timer for the batch.
  if (stages_.size() + 1 >= events_.size()) return;
  cudaEventRecord(events_[stages_.size()], stream);
  stages_.push_back(stage);
}

absl::Status StageTimer::Collect(cudaStream_t stream) {
  if (stages_.empty()) return absl::OkStatus();
  cudaEventRecord(events_[stages_.size()], stream);
  DFLASH_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(events_[stages_.size()]), "stage timer");
  for (size_t i = 0; i < stages_.size(); ++i) {
    float ms = 0.0f;
    DFLASH_RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]),
                                "cudaEventElapsedTime");
    totals_[stages_[i]] += ms;
  }
  stages_.clear();
  return absl::OkStatus();
}

}  // namespace dflash::cuda
