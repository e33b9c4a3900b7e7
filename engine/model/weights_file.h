// What the checkpoint loader needs of a weights file, whatever its format (safetensors, or
// PyTorch's zip checkpoint): the tensors' names, dtypes and shapes, and their values as float32.
#pragma once

#include <filesystem>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/safetensors.h"

namespace dflash {

class WeightsFile {
 public:
  virtual ~WeightsFile() = default;

  virtual const std::filesystem::path& path() const = 0;
  // Every tensor of the file, sorted by name.
  virtual const std::vector<TensorInfo>& tensors() const = 0;
  // Converts one of tensors() to float32; a dtype other than F32, F16, BF16 and F64 is an error
  // naming the file and the tensor.
  virtual absl::StatusOr<std::vector<float>> ReadFloat32(const TensorInfo& tensor) const = 0;
};

}  // namespace dflash
