#include "engine/model/torch_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/model/pickle_reader.h"

namespace dflash {
namespace {

constexpr absl::string_view kLegacyFormatHint =
    "load it and save it again with PyTorch 1.6 or later (torch.save(torch.load(path), path)), "
    "or convert it once with: python3 scripts/convert_pytorch_checkpoint.py <model-dir> (needs: "
    "pip install torch safetensors)";

absl::Status FormatError(const std::filesystem::path& path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", problem));
}

// Row-major strides for `shape`; dimensions of extent 1 may have any stride.
bool IsContiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i > 0; --i) {
    if (shape[i - 1] != 1 && stride[i - 1] != expected) return false;
    expected *= shape[i - 1];
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> TorchCheckpointFile::Open(
    const std::filesystem::path& path) {
  DFLASH_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  const absl::string_view bytes = file.bytes();
  DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<TorchCheckpointFile> checkpoint, Parse(bytes, path));
  checkpoint->file_ = std::move(file);  // The mapping moves; the bytes stay where they are.
  return checkpoint;
}

absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> TorchCheckpointFile::Parse(
    absl::string_view bytes, const std::filesystem::path& path) {
  if (!absl::StartsWith(bytes, "PK\x03\x04")) {
    // The legacy format is a bare pickle stream (protocol 2: 0x80 0x02) led by a magic number.
    if (absl::StartsWith(bytes, "\x80\x02")) {
      return FormatError(path, absl::StrCat("is in PyTorch's legacy serialization format (before "
                                            "1.6), which this service does not read; ",
                                            kLegacyFormatHint));
    }
    return FormatError(path, absl::StrCat("is not a PyTorch zip checkpoint (torch.save's format "
                                          "since PyTorch 1.6); truncated or corrupt? ",
                                          "If it is an older PyTorch file, ", kLegacyFormatHint));
  }
  std::unique_ptr<TorchCheckpointFile> checkpoint(new TorchCheckpointFile(path));
  DFLASH_ASSIGN_OR_RETURN(checkpoint->archive_, ZipArchive::Open(bytes, path.string()));
  ZipArchive& archive = *checkpoint->archive_;
  if (archive.entries().empty()) return FormatError(path, "is an empty zip archive");

  // torch.save puts every record under one folder, named after the file; torch.load takes the
  // folder of the first entry, and so does this reader.
  const std::string& first = archive.entries().front().name;
  const size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0) {
    return FormatError(path, absl::StrCat("zip entry '", first,
                                          "' is not in a folder, as torch.save's records are"));
  }
  const std::string prefix = first.substr(0, slash + 1);
  const auto read_record = [&](absl::string_view name,
                               bool required) -> absl::StatusOr<std::optional<absl::string_view>> {
    const ZipEntry* entry = archive.Find(absl::StrCat(prefix, name));
    if (entry == nullptr) {
      if (!required) return std::nullopt;
      return FormatError(path, absl::StrCat("has no '", prefix, name,
                                            "' record, which every torch.save archive has"));
    }
    DFLASH_ASSIGN_OR_RETURN(absl::string_view content, archive.Read(*entry));
    return content;
  };

  // PyTorch's writer names the record .data/version from archive format 6 on, "version" before.
  DFLASH_ASSIGN_OR_RETURN(std::optional<absl::string_view> version,
                          read_record(".data/version", false));
  if (!version.has_value()) {
    DFLASH_ASSIGN_OR_RETURN(version, read_record("version", true));
  }
  int format_version = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*version), &format_version) ||
      format_version < 1) {
    return FormatError(path, absl::StrCat("record '", prefix, "version' is not a version number"));
  }
  DFLASH_ASSIGN_OR_RETURN(std::optional<absl::string_view> byteorder,
                          read_record("byteorder", false));
  if (byteorder.has_value() && *byteorder != "little") {
    return FormatError(path, absl::StrCat("record '", prefix, "byteorder' says \"",
                                          absl::CHexEscape(byteorder->substr(0, 16)),
                                          "\"; only little-endian checkpoints are supported"));
  }
  DFLASH_ASSIGN_OR_RETURN(std::optional<absl::string_view> pickle, read_record("data.pkl", true));
  DFLASH_ASSIGN_OR_RETURN(
      const PickledStateDict state,
      ReadTorchPickle(*pickle, absl::StrCat(path.string(), ": record '", prefix, "data.pkl'")));

  // Storages are read (and CRC-checked) once each, however many tensors view them.
  std::vector<absl::string_view> storages(state.storages.size());
  std::vector<bool> used(state.storages.size(), false);
  for (const PickledTensor& tensor : state.tensors) used[tensor.storage] = true;
  for (size_t i = 0; i < state.storages.size(); ++i) {
    if (!used[i]) continue;
    const PickledStorage& storage = state.storages[i];
    const std::string name = absl::StrCat(prefix, "data/", storage.key);
    const ZipEntry* entry = archive.Find(name);
    if (entry == nullptr) {
      return FormatError(path, absl::StrCat("has no record '", name, "' for storage '", storage.key,
                                            "' of data.pkl"));
    }
    uint64_t expected = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(storage.numel), DTypeSize(storage.dtype),
                               &expected) ||
        entry->size != expected) {
      return FormatError(path, absl::StrCat("record '", name, "' has ", entry->size,
                                            " bytes, but data.pkl declares ", storage.numel,
                                            " elements of ", DTypeName(storage.dtype)));
    }
    DFLASH_ASSIGN_OR_RETURN(storages[i], archive.Read(*entry));
  }

  for (const PickledTensor& tensor : state.tensors) {
    TensorInfo info;
    info.name = tensor.name;
    info.dtype = state.storages[tensor.storage].dtype;
    info.shape = tensor.shape;
    checkpoint->tensors_.push_back(std::move(info));
    checkpoint->views_[tensor.name] =
        View{storages[tensor.storage], tensor.storage_offset, tensor.stride};
  }
  std::sort(checkpoint->tensors_.begin(), checkpoint->tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return checkpoint;
}

absl::StatusOr<std::vector<float>> TorchCheckpointFile::ReadFloat32(
    const TensorInfo& tensor) const {
  const auto it = views_.find(tensor.name);
  if (it == views_.end()) {
    return absl::NotFoundError(absl::StrCat(path_.string(), ": no tensor '", tensor.name, "'"));
  }
  if (!IsFloatDType(tensor.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(path_.string(), ": tensor '", tensor.name,
                                                   "' has dtype ", DTypeName(tensor.dtype),
                                                   "; expected F32, F16, BF16 or F64"));
  }
  const View& view = it->second;
  const size_t item = DTypeSize(tensor.dtype);
  const auto count = static_cast<size_t>(tensor.NumElements());
  std::vector<float> values(count);
  if (count == 0) return values;
  if (IsContiguous(tensor.shape, view.stride)) {
    DecodeFloat32(tensor.dtype,
                  view.storage.substr(static_cast<size_t>(view.offset) * item, count * item),
                  values);
    return values;
  }
  // A strided view (a transpose, a slice of a wider tensor): gathered into row-major order, as
  // torch.load followed by .contiguous() would. The pickle reader checked that every element
  // lies inside the storage.
  std::string gathered(count * item, '\0');
  std::vector<int64_t> index(tensor.shape.size(), 0);
  for (size_t n = 0; n < count; ++n) {
    int64_t element = view.offset;
    for (size_t d = 0; d < index.size(); ++d) element += index[d] * view.stride[d];
    std::memcpy(&gathered[n * item], view.storage.data() + static_cast<size_t>(element) * item,
                item);
    for (size_t d = index.size(); d > 0; --d) {
      if (++index[d - 1] < tensor.shape[d - 1]) break;
      index[d - 1] = 0;
    }
  }
  DecodeFloat32(tensor.dtype, gathered, values);
  return values;
}

}  // namespace dflash
