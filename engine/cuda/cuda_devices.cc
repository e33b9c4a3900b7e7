#include "engine/cuda/cuda_devices.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

namespace dflash::cuda {

absl::StatusOr<int> CountUsableCudaDevices() {
  int count = 0;
  if (cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    cudaGetLastError();  // Not sticky; leave no trace for later calls.
    return absl::UnavailableError(
        absl::StrCat("no usable CUDA device: ", cudaGetErrorString(error)));
  }
  int usable = 0;
  for (int device = 0; device < count; ++device) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        major >= 8) {
      ++usable;
    }
  }
  if (usable == 0) {
    return absl::UnavailableError(absl::StrCat("no usable CUDA device: ", count,
                                               " device(s), none of compute capability 8.0+"));
  }
  return usable;
}

}  // namespace dflash::cuda
