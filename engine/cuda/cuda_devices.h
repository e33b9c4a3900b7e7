// What the CUDA driver offers this process, for backend selection (`auto`) before any engine is
// made. Safe to call on machines without a driver or GPU: the answer is then an error saying why.
#pragma once

#include "absl/status/statusor.h"

namespace dflash::cuda {

// The number of CUDA devices of compute capability 8.0 or newer (what the kernels need);
// UNAVAILABLE with the driver's reason when there is no usable device.
absl::StatusOr<int> CountUsableCudaDevices();

}  // namespace dflash::cuda
