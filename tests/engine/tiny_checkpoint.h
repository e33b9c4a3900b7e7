// Test-only helpers shared by checkpoint_test and cpu_engine_test: a per-test temporary
// directory, and tiny DeBERTa-v2/v3 checkpoints (config.json + model.safetensors) built from a
// config with every tensor LoadWeights expects, filled with seeded pseudo-random values.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model_config.h"
#include "engine/model/safetensors.h"

namespace dflash::test {

// A fresh, empty directory under the system temporary directory, removed with its content when
// the object dies.
class ScopedTempDir {
 public:
  ScopedTempDir();
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// One tensor of a checkpoint under its canonical name (no "deberta." prefix).
struct TinyTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// The tiny model of the tests: vocab 50, hidden 8, 1 layer, 2 heads, intermediate 16, v3
// settings (relative attention, position_buckets 4, max_relative_positions 8, p2c|c2p, shared
// keys, LayerNorm on the relative embeddings, no absolute positions), a sequence classifier with
// the labels NEG/POS.
nlohmann::json TinyConfigJson();

// Every tensor that LoadWeights reads for `config`, in a fixed order, with values drawn from a
// generator seeded by `seed` and the tensor name (LayerNorm gammas near 1).
std::vector<TinyTensor> MakeTinyTensors(const ModelConfig& config, uint32_t seed = 1);

// The name a tensor is stored under: backbone tensors (embeddings.*, encoder.*) get `prefix`;
// head tensors (pooler.*, classifier.*) never do, as in transformers' state dicts.
std::string StoredName(const std::string& canonical, absl::string_view prefix);

struct TinyWriteOptions {
  std::string prefix = "deberta.";
  DType dtype = DType::kF32;
  bool legacy_layer_norm_names = false;  // Store LayerNorm .weight/.bias as .gamma/.beta.
  bool pytorch_bin = false;              // pytorch_model.bin instead of model.safetensors.
};

// The name `canonical` is written under: StoredName with the options' prefix, and LayerNorm
// .weight/.bias renamed .gamma/.beta when legacy_layer_norm_names is set.
std::string WrittenName(const std::string& canonical, const TinyWriteOptions& options);

// Adds `tensors` to `writer` under their stored names.
void AddTensors(SafetensorsWriter& writer, const std::vector<TinyTensor>& tensors,
                const TinyWriteOptions& options);

absl::Status WriteTextFile(const std::filesystem::path& path, absl::string_view text);

// Writes `config` as directory/config.json and every tensor MakeTinyTensors makes for it as
// directory/model.safetensors (or pytorch_model.bin); returns the tensors (float32 values before
// any narrowing).
absl::StatusOr<std::vector<TinyTensor>> WriteTinyCheckpoint(const std::filesystem::path& directory,
                                                            const nlohmann::json& config,
                                                            const TinyWriteOptions& options = {},
                                                            uint32_t seed = 1);

// The tensor called `name` in `tensors`, or nullptr.
const TinyTensor* FindTensor(const std::vector<TinyTensor>& tensors, absl::string_view name);

}  // namespace dflash::test
