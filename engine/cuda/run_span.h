// The device's span of one engine run: CUDA events recorded on the stream before its first
// command and after its last. Serving reads it beside Run's wall time, so that the host's share of
// a batch (staging, launching, waking up, unpacking) shows apart from the GPU's.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/statusor.h"

namespace dflash::cuda {

class RunSpan {
 public:
  static absl::StatusOr<std::unique_ptr<RunSpan>> Create();
  ~RunSpan();
  RunSpan(const RunSpan&) = delete;
  RunSpan& operator=(const RunSpan&) = delete;

  // Not while `stream` is being captured into a graph: the events would become graph nodes. Begin
  // forgets an earlier span that was never taken.
  void Begin(cudaStream_t stream);
  void End(cudaStream_t stream);
  // Seconds from Begin to End once the stream has passed End (after a synchronisation); negative
  // when either was not recorded since the last call or the events cannot be read.
  double TakeSeconds();

 private:
  RunSpan(cudaEvent_t begin, cudaEvent_t end) : begin_(begin), end_(end) {}

  cudaEvent_t begin_;
  cudaEvent_t end_;
  bool begun_ = false;
  bool ended_ = false;
};

}  // namespace dflash::cuda
