// A restricted unpickler for the data.pkl of a PyTorch zip checkpoint: the pickle (protocol 2)
// that torch.save writes for a state dict. It runs no code from the file: it knows the opcodes
// such pickles use and a fixed list of globals (collections.OrderedDict, torch._utils's
// _rebuild_tensor_v2, _rebuild_tensor and _rebuild_parameter, torch.Size and the torch.*Storage
// classes), whose effect it interprets itself; any other global or opcode is refused with an
// error naming it. Tensors come back as views of storages named by their persistent ids,
// ("storage", <torch.*Storage>, <key>, <location>, <numel>), whose bytes live in the archive's
// data/<key> entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/safetensors.h"

namespace dflash {

struct PickledStorage {
  std::string key;  // The archive entry <prefix>/data/<key> holds the bytes.
  DType dtype = DType::kF32;
  int64_t numel = 0;  // Elements of dtype, so the entry holds numel * DTypeSize(dtype) bytes.
};

// A strided view of a storage, as torch._utils._rebuild_tensor_v2 receives it. The reader
// guarantees a non-empty view lies inside its storage: storage_offset + sum((shape[i] - 1) *
// stride[i]) < numel, with every product and sum checked for overflow.
struct PickledTensor {
  std::string name;
  size_t storage = 0;  // Index into PickledStateDict::storages.
  int64_t storage_offset = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
};

struct PickledStateDict {
  std::vector<PickledStorage> storages;  // One per distinct key, shared by the tensors on it.
  std::vector<PickledTensor> tensors;    // In the pickle's order.
};

// Most dimensions a tensor may have (PyTorch's own limit is 64 too).
inline constexpr size_t kMaxPickledTensorRank = 64;

// Reads a pickled state dict (a dict or OrderedDict from tensor names to tensors). `source`
// names the file and the entry in errors, which are INVALID_ARGUMENT and give the byte offset.
absl::StatusOr<PickledStateDict> ReadTorchPickle(absl::string_view pickle,
                                                 absl::string_view source);

}  // namespace dflash
