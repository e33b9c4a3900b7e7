// Loading a Hugging Face DeBERTa-v2/v3 checkpoint directory: config.json, the weights
// (model.safetensors, a sharded model.safetensors.index.json, or PyTorch's pytorch_model.bin or
// sharded pytorch_model.bin.index.json, in that order of preference, as transformers has it),
// and the sentence-transformers pooling files when present.
// The tokenizer files of the same directory are read by the tokenizer (server/tokenizer).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace dflash {

enum class PoolingMode { kCls, kMean };

// How sentence embeddings are formed: from 1_Pooling/config.json and modules.json when the
// checkpoint is a sentence-transformers model; masked mean and L2 normalisation otherwise.
struct EmbeddingConfig {
  PoolingMode pooling = PoolingMode::kMean;
  bool normalize = true;
  bool from_sentence_transformers = false;
};

struct Checkpoint {
  std::filesystem::path directory;
  ModelConfig config;
  ModelWeights weights;
  EmbeddingConfig embedding;
  std::vector<std::filesystem::path> weight_files;
};

// Loads and validates everything before returning: a missing or mis-shaped tensor is reported by
// name with its expected shape; tensors of MLM/RTD heads and unused absolute position embeddings
// are skipped. Which weights file was used is logged.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::filesystem::path& directory);

// The key rules of the loader, exposed for tests: strips an optional "deberta." prefix and maps
// legacy LayerNorm names (".gamma"/".beta") to ".weight"/".bias".
std::string CanonicalTensorName(absl::string_view name);
// True for tensors the service never uses: MLM and replaced-token-detection heads, position_ids.
bool IsIgnoredTensorName(absl::string_view canonical_name);

}  // namespace dflash
