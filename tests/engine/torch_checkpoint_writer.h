// Test-only writer of PyTorch checkpoints in torch.save's zip format, byte for byte as PyTorch 2.x
// writes a state dict (so that tests need neither Python nor torch):
//  - data.pkl: Python's pickler at protocol 2, with torch's persistent ids for storages
//    ("storage", torch.<Type>Storage, "<key>", "cpu", numel), tensors reduced to
//    torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()), and
//    the state dict an OrderedDict whose _metadata attribute is set by BUILD (Module.state_dict)
//    or a plain dict (transformers' shards);
//  - the records <archive>/data.pkl, .format_version, .storage_alignment, byteorder, data/<key>,
//    version and .data/serialization_id, stored uncompressed, each one's data 64-byte aligned by
//    an "FB" extra field, with zip64 end records, as PyTorch's writer (miniz) lays them out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/model/safetensors.h"
#include "tests/engine/tiny_checkpoint.h"

namespace dflash::test {

struct ZipRecord {
  std::string name;
  std::string content;
  bool deflate = false;  // torch.save never compresses; tests of the inflating path do.
};

// A zip archive of `records` laid out as PyTorch's writer does (see above).
std::string BuildZip(const std::vector<ZipRecord>& records);

class TorchCheckpointWriter {
 public:
  enum class Container { kOrderedDictWithMetadata, kOrderedDict, kDict };

  // Adds a storage of `bytes` (little-endian elements of `dtype`); returns its index, which is
  // also its key ("0", "1", ...).
  size_t AddStorage(DType dtype, std::string bytes);
  // Adds a tensor viewing storage `storage` (element offset and strides).
  void AddView(std::string name, size_t storage, int64_t offset, std::vector<int64_t> shape,
               std::vector<int64_t> stride);
  // Adds a contiguous tensor of `values` stored as `dtype` in a storage of its own.
  void AddFloat(std::string name, std::vector<int64_t> shape, std::span<const float> values,
                DType dtype = DType::kF32);
  void SetContainer(Container container) { container_ = container; }

  std::string Pickle() const;
  // The records of the archive, in torch.save's order, for tests that alter them.
  std::vector<ZipRecord> Records(const std::string& archive_name = "pytorch_model") const;
  std::string Serialize(const std::string& archive_name = "pytorch_model") const;
  // Writes the archive under the name torch.save gives it: the file name without extension.
  absl::Status WriteFile(const std::filesystem::path& path) const;

 private:
  struct Storage {
    DType dtype;
    std::string bytes;
  };
  struct View {
    std::string name;
    size_t storage;
    int64_t offset;
    std::vector<int64_t> shape;
    std::vector<int64_t> stride;
  };
  std::vector<Storage> storages_;
  std::vector<View> views_;
  Container container_ = Container::kOrderedDictWithMetadata;
};

// Adds `tensors` to `writer` under their stored names (as AddTensors does for safetensors).
void AddTensors(TorchCheckpointWriter& writer, const std::vector<TinyTensor>& tensors,
                const TinyWriteOptions& options);

}  // namespace dflash::test
