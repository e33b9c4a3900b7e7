// libFuzzer target: arbitrary bytes as a pytorch_model.bin. The zip directory (ZipArchive, over
// minizip) and then the whole archive (TorchCheckpointFile: layout, pickle, storages, views) must
// never crash or fail other than with INVALID_ARGUMENT naming the file; every entry read must lie
// inside the input (stored) or have its declared size (inflated), and every tensor of an accepted
// archive must convert to as many floats as it has elements. A violation aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "engine/model/torch_checkpoint.h"
#include "engine/model/zip_archive.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "zip_archive_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

void ExpectInvalidArgument(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument ||
      status.message().find("fuzz") == absl::string_view::npos) {
    Fail("unexpected error", status.ToString());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::unique_ptr<dflash::ZipArchive>> archive =
      dflash::ZipArchive::Open(bytes, "fuzz.zip");
  if (!archive.ok()) {
    ExpectInvalidArgument(archive.status());
  } else {
    for (const dflash::ZipEntry& entry : (*archive)->entries()) {
      absl::StatusOr<absl::string_view> content = (*archive)->Read(entry);
      if (!content.ok()) {
        ExpectInvalidArgument(content.status());
        continue;
      }
      if (content->size() != entry.size) Fail("read size differs from the declared", entry.name);
      if (entry.method == 0 && !content->empty() &&
          (content->data() < bytes.data() ||
           content->data() + content->size() > bytes.data() + bytes.size())) {
        Fail("stored entry outside the input", entry.name);
      }
    }
  }

  absl::StatusOr<std::unique_ptr<dflash::TorchCheckpointFile>> file =
      dflash::TorchCheckpointFile::Parse(bytes, "fuzz/pytorch_model.bin");
  if (!file.ok()) {
    ExpectInvalidArgument(file.status());
    return 0;
  }
  for (const dflash::TensorInfo& tensor : (*file)->tensors()) {
    absl::StatusOr<std::vector<float>> values = (*file)->ReadFloat32(tensor);
    if (!values.ok()) {
      ExpectInvalidArgument(values.status());
      continue;
    }
    if (values->size() != static_cast<size_t>(tensor.NumElements())) {
      Fail("converted element count differs", tensor.name);
    }
  }
  return 0;
}
