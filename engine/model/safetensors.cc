#include "engine/model/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_document.h"
#include "common/status_macros.h"
#include "engine/model/half_precision.h"

namespace dflash {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

struct DTypeEntry {
  DType dtype;
  absl::string_view name;
  size_t size;
};

constexpr std::array<DTypeEntry, 15> kDTypes = {{
    {DType::kBool, "BOOL", 1},
    {DType::kU8, "U8", 1},
    {DType::kI8, "I8", 1},
    {DType::kI16, "I16", 2},
    {DType::kU16, "U16", 2},
    {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},
    {DType::kI32, "I32", 4},
    {DType::kU32, "U32", 4},
    {DType::kF32, "F32", 4},
    {DType::kI64, "I64", 8},
    {DType::kU64, "U64", 8},
    {DType::kF64, "F64", 8},
    {DType::kF8E4M3, "F8_E4M3", 1},
    {DType::kF8E5M2, "F8_E5M2", 1},
}};

const DTypeEntry& EntryOf(DType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  return kDTypes[0];  // Unreachable: every enumerator is listed.
}

absl::Status HeaderError(absl::string_view source, absl::string_view tensor,
                         absl::string_view problem) {
  if (tensor.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid safetensors header: ", problem));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": invalid safetensors header: tensor '", tensor, "': ", problem));
}

absl::StatusOr<TensorInfo> ParseTensorEntry(const std::string& name, const nlohmann::json& value,
                                            uint64_t data_size, absl::string_view source) {
  if (!value.is_object()) return HeaderError(source, name, "entry is not an object");
  TensorInfo info;
  info.name = name;

  const auto dtype_it = value.find("dtype");
  if (dtype_it == value.end() || !dtype_it->is_string()) {
    return HeaderError(source, name, "missing string field 'dtype'");
  }
  const std::optional<DType> dtype = ParseDType(dtype_it->get_ref<const std::string&>());
  if (!dtype) {
    return HeaderError(source, name, absl::StrCat("unknown dtype ", JsonExcerpt(*dtype_it)));
  }
  info.dtype = *dtype;

  const auto shape_it = value.find("shape");
  if (shape_it == value.end() || !shape_it->is_array()) {
    return HeaderError(source, name, "missing array field 'shape'");
  }
  // numel * itemsize must fit in 64 bits; track it with overflow checks.
  uint64_t bytes = DTypeSize(info.dtype);
  for (const nlohmann::json& dim : *shape_it) {
    if (!dim.is_number_unsigned()) {
      return HeaderError(
          source, name,
          absl::StrCat("shape entries must be non-negative integers, got ", JsonExcerpt(dim)));
    }
    const uint64_t extent = dim.get<uint64_t>();
    if (extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (extent != 0 && bytes > std::numeric_limits<uint64_t>::max() / extent)) {
      return HeaderError(source, name, "shape is too large");
    }
    bytes *= extent;
    info.shape.push_back(static_cast<int64_t>(extent));
  }

  const auto offsets_it = value.find("data_offsets");
  if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    return HeaderError(source, name, "'data_offsets' must be [begin, end] non-negative integers");
  }
  info.begin = (*offsets_it)[0].get<uint64_t>();
  info.end = (*offsets_it)[1].get<uint64_t>();
  if (info.begin > info.end) {
    return HeaderError(
        source, name, absl::StrCat("data_offsets [", info.begin, ", ", info.end, "] are reversed"));
  }
  if (info.end > data_size) {
    return HeaderError(source, name,
                       absl::StrCat("data_offsets [", info.begin, ", ", info.end,
                                    "] end past the data section (", data_size, " bytes)"));
  }
  if (info.end - info.begin != bytes) {
    return HeaderError(
        source, name,
        absl::StrCat("shape [", absl::StrJoin(info.shape, ", "), "] of ", DTypeName(info.dtype),
                     " needs ", bytes, " bytes but data_offsets span ", info.end - info.begin));
  }
  for (const auto& [key, unused] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return HeaderError(source, name, absl::StrCat("unknown field '", key, "'"));
    }
  }
  return info;
}

template <typename T>
T LoadUnaligned(const char* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

}  // namespace

absl::string_view DTypeName(DType dtype) { return EntryOf(dtype).name; }
size_t DTypeSize(DType dtype) { return EntryOf(dtype).size; }

std::optional<DType> ParseDType(absl::string_view name) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

bool IsFloatDType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kF64;
}

void DecodeFloat32(DType dtype, absl::string_view raw, std::span<float> out) {
  const size_t count = out.size();
  switch (dtype) {
    case DType::kF32:
      if (count > 0) std::memcpy(out.data(), raw.data(), count * sizeof(float));
      break;
    case DType::kF16:
      for (size_t i = 0; i < count; ++i) out[i] = HalfToFloat(LoadUnaligned<uint16_t>(&raw[2 * i]));
      break;
    case DType::kBF16:
      for (size_t i = 0; i < count; ++i) {
        out[i] = BFloat16ToFloat(LoadUnaligned<uint16_t>(&raw[2 * i]));
      }
      break;
    case DType::kF64:
      for (size_t i = 0; i < count; ++i) {
        out[i] = static_cast<float>(LoadUnaligned<double>(&raw[8 * i]));
      }
      break;
    default:
      break;  // Callers check IsFloatDType first.
  }
}

int64_t TensorInfo::NumElements() const {
  // A zero extent makes the tensor empty; checking first keeps the product of the other
  // (validated only through numel * itemsize = 0) extents from overflowing.
  for (int64_t extent : shape) {
    if (extent == 0) return 0;
  }
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view file,
                                                         absl::string_view source) {
  if (file.size() < 8) {
    return HeaderError(
        source, "",
        absl::StrCat("file is ", file.size(), " bytes, shorter than the 8-byte length prefix"));
  }
  const uint64_t header_size = LoadUnaligned<uint64_t>(file.data());
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return HeaderError(source, "",
                       absl::StrCat("header length ", header_size, " exceeds the limit of ",
                                    kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (header_size > file.size() - 8) {
    return HeaderError(source, "",
                       absl::StrCat("header length ", header_size, " runs past the end of the ",
                                    file.size(), "-byte file (truncated download?)"));
  }
  if (header_size < 2) return HeaderError(source, "", "header is shorter than '{}'");

  const absl::string_view json_text = file.substr(8, header_size);
  DFLASH_ASSIGN_OR_RETURN(nlohmann::json root,
                          ParseJsonDocument(json_text, absl::StrCat(source, " (header)"), 4));
  if (!root.is_object()) return HeaderError(source, "", "header is not a JSON object");

  SafetensorsHeader header;
  header.data_offset = 8 + header_size;
  const uint64_t data_size = file.size() - header.data_offset;
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) return HeaderError(source, "", "'__metadata__' is not an object");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) {
          return HeaderError(source, "",
                             absl::StrCat("'__metadata__' value for '", key, "' is not a string"));
        }
        header.metadata[key] = text.get<std::string>();
      }
      continue;
    }
    DFLASH_ASSIGN_OR_RETURN(TensorInfo info, ParseTensorEntry(name, value, data_size, source));
    header.tensors.push_back(std::move(info));
  }

  // No two tensors may share bytes (empty tensors occupy none).
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& info : header.tensors) {
    if (info.begin != info.end) by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      return HeaderError(source, by_offset[i]->name,
                         absl::StrCat("data overlaps tensor '", by_offset[i - 1]->name, "'"));
    }
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return header;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::filesystem::path& path) {
  DFLASH_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  DFLASH_ASSIGN_OR_RETURN(SafetensorsHeader header,
                          ParseSafetensorsHeader(file.bytes(), path.string()));
  return std::unique_ptr<SafetensorsFile>(
      new SafetensorsFile(path, std::move(file), std::move(header)));
}

const TensorInfo* SafetensorsFile::Find(absl::string_view name) const {
  const auto it = std::lower_bound(
      header_.tensors.begin(), header_.tensors.end(), name,
      [](const TensorInfo& info, absl::string_view key) { return info.name < key; });
  if (it == header_.tensors.end() || it->name != name) return nullptr;
  return &*it;
}

absl::string_view SafetensorsFile::RawBytes(const TensorInfo& tensor) const {
  return file_.bytes().substr(header_.data_offset + tensor.begin, tensor.end - tensor.begin);
}

absl::StatusOr<std::vector<float>> SafetensorsFile::ReadFloat32(const TensorInfo& tensor) const {
  if (!IsFloatDType(tensor.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(path_.string(), ": tensor '", tensor.name,
                                                   "' has dtype ", DTypeName(tensor.dtype),
                                                   "; expected F32, F16, BF16 or F64"));
  }
  std::vector<float> values(static_cast<size_t>(tensor.NumElements()));
  DecodeFloat32(tensor.dtype, RawBytes(tensor), values);
  return values;
}

absl::StatusOr<std::vector<int64_t>> SafetensorsFile::ReadInt64(const TensorInfo& tensor) const {
  const absl::string_view raw = RawBytes(tensor);
  const size_t count = static_cast<size_t>(tensor.NumElements());
  std::vector<int64_t> values(count);
  for (size_t i = 0; i < count; ++i) {
    switch (tensor.dtype) {
      case DType::kBool:
      case DType::kU8:
        values[i] = static_cast<uint8_t>(raw[i]);
        break;
      case DType::kI8:
        values[i] = static_cast<int8_t>(raw[i]);
        break;
      case DType::kI16:
        values[i] = LoadUnaligned<int16_t>(&raw[2 * i]);
        break;
      case DType::kU16:
        values[i] = LoadUnaligned<uint16_t>(&raw[2 * i]);
        break;
      case DType::kI32:
        values[i] = LoadUnaligned<int32_t>(&raw[4 * i]);
        break;
      case DType::kU32:
        values[i] = LoadUnaligned<uint32_t>(&raw[4 * i]);
        break;
      case DType::kI64:
        values[i] = LoadUnaligned<int64_t>(&raw[8 * i]);
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(path_.string(), ": tensor '", tensor.name,
                                                       "' has dtype ", DTypeName(tensor.dtype),
                                                       "; expected an integer dtype"));
    }
  }
  return values;
}

std::string EncodeFloats(std::span<const float> values, DType stored) {
  std::string bytes;
  switch (stored) {
    case DType::kF16:
    case DType::kBF16: {
      bytes.resize(values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t bits =
            stored == DType::kF16 ? FloatToHalf(values[i]) : FloatToBFloat16(values[i]);
        std::memcpy(&bytes[2 * i], &bits, 2);
      }
      break;
    }
    case DType::kF64: {
      bytes.resize(values.size() * 8);
      for (size_t i = 0; i < values.size(); ++i) {
        const double wide = values[i];
        std::memcpy(&bytes[8 * i], &wide, 8);
      }
      break;
    }
    default:
      bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
      break;
  }
  return bytes;
}

void SafetensorsWriter::AddFloat(std::string name, std::vector<int64_t> shape,
                                 std::span<const float> values, DType stored) {
  if (!IsFloatDType(stored)) stored = DType::kF32;
  AddRaw(std::move(name), stored, std::move(shape), EncodeFloats(values, stored));
}

void SafetensorsWriter::AddInt(std::string name, std::vector<int64_t> shape,
                               std::span<const int64_t> values, DType stored) {
  std::string bytes;
  if (stored == DType::kI32) {
    bytes.resize(values.size() * 4);
    for (size_t i = 0; i < values.size(); ++i) {
      const int32_t narrow = static_cast<int32_t>(values[i]);
      std::memcpy(&bytes[4 * i], &narrow, 4);
    }
  } else {
    stored = DType::kI64;
    bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  }
  AddRaw(std::move(name), stored, std::move(shape), std::move(bytes));
}

void SafetensorsWriter::AddRaw(std::string name, DType dtype, std::vector<int64_t> shape,
                               std::string bytes) {
  entries_.push_back({std::move(name), dtype, std::move(shape), std::move(bytes)});
}

void SafetensorsWriter::SetMetadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

std::string SafetensorsWriter::Serialize() const {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Entry& entry : entries_) {
    header[entry.name] = {{"dtype", DTypeName(entry.dtype)},
                          {"shape", entry.shape},
                          {"data_offsets", {offset, offset + entry.bytes.size()}}};
    offset += entry.bytes.size();
  }
  std::string json_text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  json_text.append((8 - json_text.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  const uint64_t length = json_text.size();
  std::memcpy(file.data(), &length, 8);
  file += json_text;
  for (const Entry& entry : entries_) file += entry.bytes;
  return file;
}

absl::Status SafetensorsWriter::WriteFile(const std::filesystem::path& path) const {
  const std::filesystem::path temporary = path.string() + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      return absl::InternalError(absl::StrCat(temporary.string(), ": cannot open for writing"));
    const std::string bytes = Serialize();
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) return absl::InternalError(absl::StrCat(temporary.string(), ": write failed"));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("rename ", temporary.string(), " -> ", path.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace dflash
