// Reading and writing the safetensors format (https://github.com/huggingface/safetensors):
//   [u64 little-endian N][N bytes of JSON header][data section]
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} with offsets
// relative to the data section, plus an optional "__metadata__" string map. Everything in the
// header is validated before any tensor byte is read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/mapped_file.h"

namespace dflash {

enum class DType : uint8_t {
  kBool,
  kU8,
  kI8,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kI64,
  kU64,
  kF64,
  kF8E4M3,
  kF8E5M2
};

absl::string_view DTypeName(DType dtype);
size_t DTypeSize(DType dtype);
std::optional<DType> ParseDType(absl::string_view name);
// True for the dtypes DecodeFloat32 converts: F32, F16, BF16 and F64.
bool IsFloatDType(DType dtype);
// Converts out.size() little-endian values of the float dtype `dtype` from `raw` (at least
// out.size() * DTypeSize(dtype) bytes) to float32.
void DecodeFloat32(DType dtype, absl::string_view raw, std::span<float> out);
// The little-endian bytes of `values` as `stored` (F32, F16, BF16 or F64; round-to-nearest-even
// when narrowing); F32 for any other dtype.
std::string EncodeFloats(std::span<const float> values, DType stored);

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // Byte offsets into the data section, [begin, end).
  uint64_t end = 0;

  int64_t NumElements() const;
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // Sorted by name.
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // File offset of the data section: 8 + header length.
};

// Largest header accepted, as in the reference implementation.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Validates the whole header of `file` (the complete file content): length prefix within bounds,
// JSON object, known dtypes, non-negative shapes, numel * itemsize == end - begin without
// overflow, offsets inside the data section and no two tensors overlapping.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view file,
                                                         absl::string_view source);

// A validated, memory-mapped safetensors file.
class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* Find(absl::string_view name) const;

  // The raw little-endian bytes of one tensor.
  absl::string_view RawBytes(const TensorInfo& tensor) const;
  // Converts F32, F16, BF16 and F64 to float32; other dtypes are an error naming the tensor.
  absl::StatusOr<std::vector<float>> ReadFloat32(const TensorInfo& tensor) const;
  // Widens I8..I64 and U8..U32 (and BOOL) to int64.
  absl::StatusOr<std::vector<int64_t>> ReadInt64(const TensorInfo& tensor) const;

 private:
  SafetensorsFile(std::filesystem::path path, MappedFile file, SafetensorsHeader header)
      : path_(std::move(path)), file_(std::move(file)), header_(std::move(header)) {}

  std::filesystem::path path_;
  MappedFile file_;
  SafetensorsHeader header_;
};

// Builds a safetensors file in memory. Used by the demo-model generator and by tests.
class SafetensorsWriter {
 public:
  // Stores `values` as `stored` (F32, F16, BF16 or F64), converting with round-to-nearest-even.
  void AddFloat(std::string name, std::vector<int64_t> shape, std::span<const float> values,
                DType stored = DType::kF32);
  // Stores `values` as `stored` (I32 or I64).
  void AddInt(std::string name, std::vector<int64_t> shape, std::span<const int64_t> values,
              DType stored = DType::kI64);
  // Stores raw bytes with a declared dtype and shape, unchecked: tests build malformed files so.
  void AddRaw(std::string name, DType dtype, std::vector<int64_t> shape, std::string bytes);
  void SetMetadata(std::string key, std::string value);

  std::string Serialize() const;
  // Writes through a temporary file and a rename, so readers never see a partial file.
  absl::Status WriteFile(const std::filesystem::path& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace dflash
