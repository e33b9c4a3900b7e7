// PyTorch checkpoints (pytorch_model.bin) in the zip format torch.save writes since PyTorch 1.6:
//   <prefix>/data.pkl     the state dict, pickled (protocol 2) with storages as persistent ids
//   <prefix>/data/<key>   the raw little-endian bytes of storage <key>
//   <prefix>/byteorder    "little" (absent before PyTorch 1.13, when little-endian is implied)
//   <prefix>/version      the archive format version
// The archive is mapped; stored entries (what torch.save writes) are read in place, deflated ones
// are inflated into memory. The pickle is read by the restricted unpickler of pickle_reader.h, so
// nothing in the file is executed. The legacy format of PyTorch before 1.6 (a bare pickle
// stream) is refused with how to convert it.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/mapped_file.h"
#include "engine/model/weights_file.h"
#include "engine/model/zip_archive.h"

namespace dflash {

class TorchCheckpointFile : public WeightsFile {
 public:
  // Maps and validates `path`: the layout, the pickle, every storage a tensor uses (its size
  // and CRC-32) and every view's bounds, before any tensor is converted.
  static absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> Open(
      const std::filesystem::path& path);
  // The same from bytes that must outlive the result; `path` names them in errors.
  static absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> Parse(
      absl::string_view bytes, const std::filesystem::path& path);

  const std::filesystem::path& path() const override { return path_; }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  // Views with gaps or permuted strides are copied element by element into row-major order.
  absl::StatusOr<std::vector<float>> ReadFloat32(const TensorInfo& tensor) const override;

 private:
  // Where a tensor's elements are: a strided view of a storage's bytes.
  struct View {
    absl::string_view storage;
    int64_t offset = 0;  // In elements.
    std::vector<int64_t> stride;
  };

  explicit TorchCheckpointFile(std::filesystem::path path) : path_(std::move(path)) {}

  std::filesystem::path path_;
  MappedFile file_;
  std::unique_ptr<ZipArchive> archive_;
  std::vector<TensorInfo> tensors_;  // begin and end are unused: views_ locates the bytes.
  std::map<std::string, View> views_;
};

}  // namespace dflash
