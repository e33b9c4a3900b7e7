#include "engine/tuning/attention_benchmark.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dflash::tuning {
namespace {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

// Owns the two events of a timing.
struct Events {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  ~Events() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
};

}  // namespace

absl::StatusOr<double> TimeAttention(const kernels::AttentionProblem& problem,
                                     const kernels::AttentionKernelConfig& config, void* workspace,
                                     cublasHandle_t blas, cudaStream_t stream,
                                     const AttentionTiming& timing) {
  kernels::AttentionProblem with = problem;
  with.config = &config;
  auto run = [&] {
    return CudaStatus(kernels::DisentangledAttentionForward(with, workspace, blas, stream),
                      "attention forward");
  };
  for (int i = 0; i < timing.warmup; ++i) {
    if (absl::Status status = run(); !status.ok()) return status;
  }
  Events events;
  if (absl::Status status = CudaStatus(cudaEventCreate(&events.start), "cudaEventCreate");
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CudaStatus(cudaEventCreate(&events.stop), "cudaEventCreate");
      !status.ok()) {
    return status;
  }
  std::vector<float> times;
  for (int i = 0; i < std::max(1, timing.repeats); ++i) {
    if (timing.flush != nullptr) {
      if (absl::Status status = CudaStatus(
              cudaMemsetAsync(timing.flush, i & 0xff, timing.flush_bytes, stream), "L2 flush");
          !status.ok()) {
        return status;
      }
    }
    cudaEventRecord(events.start, stream);
    if (absl::Status status = run(); !status.ok()) return status;
    cudaEventRecord(events.stop, stream);
    if (absl::Status status = CudaStatus(cudaEventSynchronize(events.stop), "attention run");
        !status.ok()) {
      return status;
    }
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, events.start, events.stop);
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return static_cast<double>(times[times.size() / 2]);
}

}  // namespace dflash::tuning
