#include "engine/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"

namespace dflash::cuda {

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  DFLASH_RETURN_IF_CUDA_ERROR(cudaMalloc(&buffer.data_, bytes),
                              absl::StrCat("cudaMalloc(", bytes, " bytes)"));
  buffer.bytes_ = bytes;
  return buffer;
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Upload(const void* host, size_t bytes) {
  absl::StatusOr<DeviceBuffer> buffer = Allocate(bytes);
  if (!buffer.ok() || bytes == 0) return buffer;
  DFLASH_RETURN_IF_CUDA_ERROR(cudaMemcpy(buffer->data_, host, bytes, cudaMemcpyHostToDevice),
                              "uploading weights");
  return buffer;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  PinnedBuffer buffer;
  if (bytes == 0) return buffer;
  DFLASH_RETURN_IF_CUDA_ERROR(cudaMallocHost(&buffer.data_, bytes),
                              absl::StrCat("cudaMallocHost(", bytes, " bytes)"));
  buffer.bytes_ = bytes;
  return buffer;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void* ArenaLayout::Take(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t start = (offset_ + kAlignment - 1) / kAlignment * kAlignment;
  offset_ = start + bytes;
  return base_ == nullptr ? nullptr : base_ + start;
}

}  // namespace dflash::cuda
