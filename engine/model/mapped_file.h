// A read-only memory mapping of a whole file, released when the object dies.
#pragma once

#include <cstddef>
#include <filesystem>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the file and the failing system call.
  static absl::StatusOr<MappedFile> Open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  absl::string_view bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  MappedFile(const char* data, size_t size) : data_(data), size_(size) {}
  void Release();

  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dflash
