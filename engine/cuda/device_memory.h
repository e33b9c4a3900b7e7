// Owned device and pinned host allocations. The engine allocates everything at load: the weights
// as DeviceBuffers, the activations as slices of one DeviceArena sized for the largest batch, and
// the transfer staging as PinnedBuffers; nothing is allocated or freed while serving.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace dflash::cuda {

// One cudaMalloc, freed on destruction (on the device that was current when it was made: the
// engine creates and destroys everything with its device current).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  // Allocates and copies `bytes` from host memory (synchronously).
  static absl::StatusOr<DeviceBuffer> Upload(const void* host, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory for asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Carves 256-byte-aligned slices out of one allocation in two passes: a planning pass over a
// null base that only adds up sizes, then the real pass over the allocation. Slices live as long
// as the arena and are reused by every batch.
class ArenaLayout {
 public:
  static constexpr size_t kAlignment = 256;

  explicit ArenaLayout(void* base = nullptr) : base_(static_cast<char*>(base)) {}
  // The next slice of `bytes` (0 bytes give a null pointer).
  void* Take(size_t bytes);
  template <typename T>
  T* Take(int64_t count) {
    return static_cast<T*>(Take(static_cast<size_t>(count) * sizeof(T)));
  }
  size_t used() const { return offset_; }

 private:
  char* base_;
  size_t offset_ = 0;
};

}  // namespace dflash::cuda
