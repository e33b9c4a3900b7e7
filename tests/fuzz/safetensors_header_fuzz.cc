// libFuzzer target: arbitrary bytes as a safetensors file. ParseSafetensorsHeader must never
// crash, and whatever it accepts must satisfy the guarantees its readers rely on (offsets inside
// the data section, byte sizes consistent with dtype and shape, no overlaps, sorted names);
// a violated guarantee aborts so the fuzzer reports it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/model/safetensors.h"

namespace {

[[noreturn]] void Violation(const char* what, const std::string& tensor) {
  std::fprintf(stderr, "safetensors_header_fuzz: invariant violated: %s (tensor '%s')\n", what,
               tensor.c_str());
  std::abort();
}

void CheckHeader(absl::string_view file, const dflash::SafetensorsHeader& header) {
  if (file.size() < 8) Violation("accepted a file shorter than 8 bytes", "");
  uint64_t header_length = 0;
  std::memcpy(&header_length, file.data(), 8);
  if (header_length > dflash::kMaxSafetensorsHeaderBytes) Violation("header over the limit", "");
  if (header.data_offset != 8 + header_length) Violation("data_offset != 8 + header length", "");
  if (header.data_offset > file.size()) Violation("data section starts past the end", "");
  const uint64_t data_size = file.size() - header.data_offset;

  std::vector<const dflash::TensorInfo*> non_empty;
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    const dflash::TensorInfo& info = header.tensors[i];
    if (info.name == "__metadata__") Violation("__metadata__ parsed as a tensor", info.name);
    if (i > 0 && !(header.tensors[i - 1].name < info.name)) {
      Violation("tensors not strictly sorted by name", info.name);
    }
    if (info.begin > info.end) Violation("begin > end", info.name);
    if (info.end > data_size) Violation("end past the data section", info.name);
    uint64_t bytes = dflash::DTypeSize(info.dtype);
    int64_t elements = 1;
    for (const int64_t extent : info.shape) {
      if (extent < 0) Violation("negative extent", info.name);
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(extent), &bytes)) {
        Violation("byte size overflows 64 bits", info.name);
      }
      if (__builtin_mul_overflow(elements, extent, &elements)) {
        Violation("element count overflows int64", info.name);
      }
    }
    if (elements != info.NumElements()) Violation("NumElements() disagrees", info.name);
    if (bytes != info.end - info.begin) Violation("numel * itemsize != end - begin", info.name);
    if (dflash::ParseDType(dflash::DTypeName(info.dtype)) != info.dtype) {
      Violation("dtype does not round-trip through its name", info.name);
    }
    if (info.begin != info.end) non_empty.push_back(&info);
  }
  std::sort(
      non_empty.begin(), non_empty.end(),
      [](const dflash::TensorInfo* a, const dflash::TensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < non_empty.size(); ++i) {
    if (non_empty[i]->begin < non_empty[i - 1]->end) {
      Violation("overlapping tensors accepted", non_empty[i]->name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<dflash::SafetensorsHeader> header = dflash::ParseSafetensorsHeader(file, "fuzz");
  if (header.ok()) {
    CheckHeader(file, *header);
  } else if (header.status().code() != absl::StatusCode::kInvalidArgument ||
             header.status().message().find("fuzz") == absl::string_view::npos) {
    std::fprintf(stderr, "safetensors_header_fuzz: unexpected error: %s\n",
                 header.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
