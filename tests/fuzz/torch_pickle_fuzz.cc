// libFuzzer target: arbitrary bytes as the data.pkl of a PyTorch checkpoint. ReadTorchPickle must
// never crash, run away with memory or time, or fail other than with INVALID_ARGUMENT naming the
// source; whatever it accepts must satisfy the guarantees TorchCheckpointFile relies on (storage
// indices in range, as many strides as sizes, every non-empty view inside its storage, unique
// names); a violated guarantee aborts so the fuzzer reports it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "engine/model/pickle_reader.h"

namespace {

[[noreturn]] void Violation(const char* what, const std::string& tensor) {
  std::fprintf(stderr, "torch_pickle_fuzz: invariant violated: %s (tensor '%s')\n", what,
               tensor.c_str());
  std::abort();
}

void CheckStateDict(const dflash::PickledStateDict& state) {
  std::set<std::string> names;
  std::set<std::string> keys;
  for (const dflash::PickledStorage& storage : state.storages) {
    if (storage.numel < 0) Violation("negative storage numel", storage.key);
    if (!keys.insert(storage.key).second) Violation("storage key listed twice", storage.key);
  }
  for (const dflash::PickledTensor& tensor : state.tensors) {
    if (!names.insert(tensor.name).second) Violation("duplicate tensor name", tensor.name);
    if (tensor.storage >= state.storages.size())
      Violation("storage index out of range", tensor.name);
    if (tensor.shape.size() != tensor.stride.size()) Violation("sizes != strides", tensor.name);
    if (tensor.shape.size() > dflash::kMaxPickledTensorRank) Violation("rank", tensor.name);
    if (tensor.storage_offset < 0) Violation("negative offset", tensor.name);
    int64_t last = tensor.storage_offset;
    bool empty = false;
    for (size_t i = 0; i < tensor.shape.size(); ++i) {
      if (tensor.shape[i] < 0 || tensor.stride[i] < 0) Violation("negative size", tensor.name);
      if (tensor.shape[i] == 0) empty = true;
      int64_t span = 0;
      if (tensor.shape[i] > 0 &&
          (__builtin_mul_overflow(tensor.shape[i] - 1, tensor.stride[i], &span) ||
           __builtin_add_overflow(last, span, &last))) {
        Violation("view overflows 64-bit indices", tensor.name);
      }
    }
    if (!empty && last >= state.storages[tensor.storage].numel) {
      Violation("view outside its storage", tensor.name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view pickle(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<dflash::PickledStateDict> state = dflash::ReadTorchPickle(pickle, "fuzz");
  if (state.ok()) {
    CheckStateDict(*state);
  } else if (state.status().code() != absl::StatusCode::kInvalidArgument ||
             state.status().message().find("fuzz") == absl::string_view::npos) {
    std::fprintf(stderr, "torch_pickle_fuzz: unexpected error: %s\n",
                 state.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
