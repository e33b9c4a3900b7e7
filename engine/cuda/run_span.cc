#include "engine/cuda/run_span.h"

#include "engine/cuda/cuda_status.h"

namespace dflash::cuda {

absl::StatusOr<std::unique_ptr<RunSpan>> RunSpan::Create() {
  cudaEvent_t begin = nullptr;
  cudaEvent_t end = nullptr;
  if (cudaError_t error = cudaEventCreate(&begin); error != cudaSuccess) {
    return CudaStatus(error, "cudaEventCreate");
  }
  if (cudaError_t error = cudaEventCreate(&end); error != cudaSuccess) {
    cudaEventDestroy(begin);
    return CudaStatus(error, "cudaEventCreate");
  }
  return std::unique_ptr<RunSpan>(new RunSpan(begin, end));
}

RunSpan::~RunSpan() {
  cudaEventDestroy(begin_);
  cudaEventDestroy(end_);
}

void RunSpan::Begin(cudaStream_t stream) {
  begun_ = cudaEventRecord(begin_, stream) == cudaSuccess;
  ended_ = false;
}

void RunSpan::End(cudaStream_t stream) {
  ended_ = begun_ && cudaEventRecord(end_, stream) == cudaSuccess;
}

double RunSpan::TakeSeconds() {
  const bool recorded = begun_ && ended_;
  begun_ = ended_ = false;
  float ms = 0.0f;
  if (!recorded || cudaEventElapsedTime(&ms, begin_, end_) != cudaSuccess) return -1;
  return ms / 1000.0;
}

}  // namespace dflash::cuda
