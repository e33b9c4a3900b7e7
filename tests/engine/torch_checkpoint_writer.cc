#include "tests/engine/torch_checkpoint_writer.h"

#include <zlib.h>

#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"

namespace dflash::test {
namespace {

void Le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t Crc32(absl::string_view bytes) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

// Raw deflate (no zlib header), as zip's method 8 stores it.
std::string Deflate(absl::string_view bytes) {
  z_stream stream{};
  deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&stream, bytes.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

const char* StorageTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return "HalfStorage";
    case DType::kBF16:
      return "BFloat16Storage";
    case DType::kF64:
      return "DoubleStorage";
    case DType::kI64:
      return "LongStorage";
    case DType::kI32:
      return "IntStorage";
    case DType::kU8:
      return "ByteStorage";
    default:
      return "FloatStorage";
  }
}

// Python's pickle.Pickler at protocol 2, for the objects of a state dict. Objects that Python
// would find in its memo (the same object pickled again) are named by an identity key.
class Pickler {
 public:
  std::string bytes;

  void Op(uint8_t opcode) { bytes.push_back(static_cast<char>(opcode)); }

  void Put() {
    const uint32_t index = next_memo_++;
    if (index < 256) {
      Op('q');
      Le(bytes, index, 1);
    } else {
      Op('r');
      Le(bytes, index, 4);
    }
  }

  bool Recall(const std::string& identity) {
    const auto it = memo_.find(identity);
    if (it == memo_.end()) return false;
    if (it->second < 256) {
      Op('h');
      Le(bytes, it->second, 1);
    } else {
      Op('j');
      Le(bytes, it->second, 4);
    }
    return true;
  }

  void Remember(const std::string& identity) {
    memo_[identity] = next_memo_;
    Put();
  }

  void Global(absl::string_view module, absl::string_view name) {
    const std::string identity = absl::StrCat("global ", module, ".", name);
    if (Recall(identity)) return;
    Op('c');
    absl::StrAppend(&bytes, module, "\n", name, "\n");
    Remember(identity);
  }

  // A str; `identity` names one Python object pickled more than once (empty: a fresh object).
  void String(absl::string_view text, const std::string& identity = "") {
    if (!identity.empty() && Recall(identity)) return;
    Op('X');
    Le(bytes, text.size(), 4);
    bytes.append(text.data(), text.size());
    if (identity.empty()) {
      Put();
    } else {
      Remember(identity);
    }
  }

  void Int(int64_t value) {
    if (value >= 0 && value <= 0xff) {
      Op('K');
      Le(bytes, static_cast<uint64_t>(value), 1);
    } else if (value >= 0 && value <= 0xffff) {
      Op('M');
      Le(bytes, static_cast<uint64_t>(value), 2);
    } else if (value >= INT32_MIN && value <= INT32_MAX) {
      Op('J');
      Le(bytes, static_cast<uint64_t>(value), 4);
    } else {
      // LONG1: the shortest two's complement that keeps the sign.
      std::string encoded;
      Le(encoded, static_cast<uint64_t>(value), 8);
      while (encoded.size() > 1 &&
             ((encoded.back() == 0 && (encoded[encoded.size() - 2] & 0x80) == 0) ||
              (encoded.back() == '\xff' && (encoded[encoded.size() - 2] & 0x80) != 0))) {
        encoded.pop_back();
      }
      Op(0x8a);
      Le(bytes, encoded.size(), 1);
      bytes += encoded;
    }
  }

  // A tuple whose items were just pickled by `items` (after MARK for more than three).
  template <typename Items>
  void Tuple(size_t count, Items items) {
    if (count == 0) {
      Op(')');
      return;
    }
    if (count > 3) Op('(');
    items();
    Op(count > 3 ? 't' : static_cast<uint8_t>(0x85 + count - 1));
    Put();
  }

  void IntTuple(const std::vector<int64_t>& values) {
    Tuple(values.size(), [&] {
      for (const int64_t value : values) Int(value);
    });
  }

  // collections.OrderedDict(): reduced, then memoized.
  void EmptyOrderedDict() {
    Global("collections", "OrderedDict");
    Op(')');
    Op('R');
    Put();
  }

 private:
  std::map<std::string, uint32_t> memo_;
  uint32_t next_memo_ = 0;
};

}  // namespace

std::string BuildZip(const std::vector<ZipRecord>& records) {
  constexpr uint64_t kAlignment = 64;  // PyTorch's kFieldAlignment.
  std::string archive;
  std::string directory;
  for (const ZipRecord& record : records) {
    const std::string data = record.deflate ? Deflate(record.content) : record.content;
    const uint64_t header_offset = archive.size();
    // The "FB" extra field pads the local header so that the data starts 64-byte aligned.
    const uint64_t data_start = header_offset + 30 + record.name.size() + 4;
    const uint64_t padding = (kAlignment - data_start % kAlignment) % kAlignment;
    const uint16_t method = record.deflate ? 8 : 0;
    const uint32_t crc = Crc32(record.content);
    auto common = [&](std::string& out) {
      Le(out, 0, 2);  // Flags.
      Le(out, method, 2);
      Le(out, 0, 2);       // Time.
      Le(out, 0x2100, 2);  // Date: 1980-01-01, as miniz writes without a time.
      Le(out, crc, 4);
      Le(out, data.size(), 4);
      Le(out, record.content.size(), 4);
      Le(out, record.name.size(), 2);
    };
    Le(archive, 0x04034b50, 4);
    Le(archive, method == 0 ? 0 : 20, 2);  // Version needed.
    common(archive);
    Le(archive, 4 + padding, 2);
    archive += record.name;
    archive += "FB";
    Le(archive, padding, 2);
    archive.append(padding, 'Z');
    archive += data;

    Le(directory, 0x02014b50, 4);
    Le(directory, 0x031e, 2);  // Made by: Unix, 3.0.
    Le(directory, method == 0 ? 0 : 20, 2);
    common(directory);
    Le(directory, 0, 2);  // Extra field.
    Le(directory, 0, 2);  // Comment.
    Le(directory, 0, 2);  // Disk.
    Le(directory, 0, 2);  // Internal attributes.
    Le(directory, 0, 4);  // External attributes.
    Le(directory, header_offset, 4);
    directory += record.name;
  }
  const uint64_t directory_offset = archive.size();
  archive += directory;
  // miniz writes the zip64 end records whenever zip64 is enabled, as PyTorch's writer does.
  const uint64_t zip64_end_offset = archive.size();
  Le(archive, 0x06064b50, 4);
  Le(archive, 44, 8);
  Le(archive, 0x031e, 2);
  Le(archive, 45, 2);
  Le(archive, 0, 4);
  Le(archive, 0, 4);
  Le(archive, records.size(), 8);
  Le(archive, records.size(), 8);
  Le(archive, directory.size(), 8);
  Le(archive, directory_offset, 8);
  Le(archive, 0x07064b50, 4);
  Le(archive, 0, 4);
  Le(archive, zip64_end_offset, 8);
  Le(archive, 1, 4);
  Le(archive, 0x06054b50, 4);
  Le(archive, 0, 2);
  Le(archive, 0, 2);
  Le(archive, records.size(), 2);
  Le(archive, records.size(), 2);
  Le(archive, directory.size(), 4);
  Le(archive, directory_offset, 4);
  Le(archive, 0, 2);
  return archive;
}

size_t TorchCheckpointWriter::AddStorage(DType dtype, std::string bytes) {
  storages_.push_back({dtype, std::move(bytes)});
  return storages_.size() - 1;
}

void TorchCheckpointWriter::AddView(std::string name, size_t storage, int64_t offset,
                                    std::vector<int64_t> shape, std::vector<int64_t> stride) {
  views_.push_back({std::move(name), storage, offset, std::move(shape), std::move(stride)});
}

void TorchCheckpointWriter::AddFloat(std::string name, std::vector<int64_t> shape,
                                     std::span<const float> values, DType dtype) {
  std::vector<int64_t> stride(shape.size(), 1);
  for (size_t i = shape.size(); i > 1; --i) stride[i - 2] = stride[i - 1] * shape[i - 1];
  const size_t storage = AddStorage(dtype, EncodeFloats(values, dtype));
  AddView(std::move(name), storage, 0, std::move(shape), std::move(stride));
}

std::string TorchCheckpointWriter::Pickle() const {
  Pickler p;
  p.Op(0x80);
  p.Op(2);
  if (container_ == Container::kDict) {
    p.Op('}');
    p.Put();
  } else {
    p.EmptyOrderedDict();
  }
  // Python's _batch_setitems: SETITEMS per 1000 items, a lone item with SETITEM.
  for (size_t begin = 0; begin < views_.size(); begin += 1000) {
    const size_t end = std::min(views_.size(), begin + 1000);
    if (end - begin > 1) p.Op('(');
    for (size_t i = begin; i < end; ++i) {
      const View& view = views_[i];
      const Storage& storage = storages_[view.storage];
      p.String(view.name);
      p.Global("torch._utils", "_rebuild_tensor_v2");
      p.Tuple(6, [&] {
        p.Tuple(5, [&] {
          p.String("storage", "str storage");
          p.Global("torch", StorageTypeName(storage.dtype));
          p.String(absl::StrCat(view.storage), absl::StrCat("key ", view.storage));
          p.String("cpu", "str cpu");
          p.Int(static_cast<int64_t>(storage.bytes.size() / DTypeSize(storage.dtype)));
        });
        p.Op('Q');
        p.Int(view.offset);
        p.IntTuple(view.shape);
        p.IntTuple(view.stride);
        p.Op(0x89);  // requires_grad=False.
        p.EmptyOrderedDict();
      });
      p.Op('R');
      p.Put();
    }
    p.Op(end - begin > 1 ? 'u' : 's');
  }
  if (container_ == Container::kOrderedDictWithMetadata) {
    // state_dict._metadata = OrderedDict([("", {"version": 1})]), restored by BUILD.
    p.Op('}');
    p.Put();
    p.String("_metadata");
    p.EmptyOrderedDict();
    p.String("");
    p.Op('}');
    p.Put();
    p.String("version");
    p.Int(1);
    p.Op('s');
    p.Op('s');
    p.Op('s');
    p.Op('b');
  }
  p.Op('.');
  return p.bytes;
}

std::vector<ZipRecord> TorchCheckpointWriter::Records(const std::string& archive_name) const {
  const std::string prefix = archive_name + "/";
  std::vector<ZipRecord> records = {
      {prefix + "data.pkl", Pickle()},
      {prefix + ".format_version", "1"},
      {prefix + ".storage_alignment", "64"},
      {prefix + "byteorder", "little"},
  };
  for (size_t i = 0; i < storages_.size(); ++i) {
    records.push_back({absl::StrCat(prefix, "data/", i), storages_[i].bytes});
  }
  records.push_back({prefix + "version", "3\n"});
  records.push_back(
      {prefix + ".data/serialization_id", "1234567890123456789012345678901234567890"});
  return records;
}

std::string TorchCheckpointWriter::Serialize(const std::string& archive_name) const {
  return BuildZip(Records(archive_name));
}

absl::Status TorchCheckpointWriter::WriteFile(const std::filesystem::path& path) const {
  return WriteTextFile(path, Serialize(path.stem().string()));
}

void AddTensors(TorchCheckpointWriter& writer, const std::vector<TinyTensor>& tensors,
                const TinyWriteOptions& options) {
  for (const TinyTensor& tensor : tensors) {
    writer.AddFloat(WrittenName(tensor.name, options), tensor.shape, tensor.values, options.dtype);
  }
}

}  // namespace dflash::test
