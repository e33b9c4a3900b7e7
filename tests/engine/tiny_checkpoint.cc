#include "tests/engine/tiny_checkpoint.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <stdexcept>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/engine/torch_checkpoint_writer.h"

namespace dflash::test {
namespace {

namespace fs = std::filesystem;

uint64_t Fnv1a(absl::string_view text, uint64_t hash = 1469598103934665603ull) {
  for (const char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

TinyTensor Random(std::string name, std::vector<int64_t> shape, uint32_t seed, float center,
                  float spread) {
  int64_t count = 1;
  for (const int64_t extent : shape) count *= extent;
  std::mt19937_64 generator(Fnv1a(name, seed));
  std::uniform_real_distribution<float> uniform(-spread, spread);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& value : values) value = center + uniform(generator);
  return TinyTensor{std::move(name), std::move(shape), std::move(values)};
}

}  // namespace

ScopedTempDir::ScopedTempDir() {
  static std::atomic<int> counter{0};
  std::random_device entropy;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const fs::path candidate =
        fs::temp_directory_path() /
        absl::StrCat("dflash-engine-test-", ::getpid(), "-", counter++, "-", entropy() % 1000000);
    std::error_code error;
    if (fs::create_directory(candidate, error)) {
      path_ = candidate;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code error;
  fs::remove_all(path_, error);
}

nlohmann::json TinyConfigJson() {
  return nlohmann::json{
      {"model_type", "deberta-v2"},
      {"architectures", {"DebertaV2ForSequenceClassification"}},
      {"vocab_size", 50},
      {"hidden_size", 8},
      {"num_hidden_layers", 1},
      {"num_attention_heads", 2},
      {"intermediate_size", 16},
      {"hidden_act", "gelu"},
      {"max_position_embeddings", 64},
      {"type_vocab_size", 0},
      {"layer_norm_eps", 1e-7},
      {"relative_attention", true},
      {"position_buckets", 4},
      {"max_relative_positions", 8},
      {"pos_att_type", {"p2c", "c2p"}},
      {"share_att_key", true},
      {"norm_rel_ebd", "layer_norm"},
      {"position_biased_input", false},
      {"pooler_hidden_act", "gelu"},
      {"id2label", {{"0", "NEG"}, {"1", "POS"}}},
      {"label2id", {{"NEG", 0}, {"POS", 1}}},
  };
}

std::vector<TinyTensor> MakeTinyTensors(const ModelConfig& config, uint32_t seed) {
  const int64_t h = config.hidden_size;
  const int64_t e = config.embedding_size;
  const int64_t a = config.all_head_size();
  const int64_t inter = config.intermediate_size;
  std::vector<TinyTensor> tensors;
  auto weight = [&](const std::string& name, std::vector<int64_t> shape) {
    tensors.push_back(Random(name, std::move(shape), seed, 0.0f, 0.5f));
  };
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in) {
    weight(prefix + ".weight", {out, in});
    weight(prefix + ".bias", {out});
  };
  auto layer_norm = [&](const std::string& prefix) {
    tensors.push_back(Random(prefix + ".weight", {h}, seed, 1.0f, 0.2f));
    tensors.push_back(Random(prefix + ".bias", {h}, seed, 0.0f, 0.1f));
  };

  weight("embeddings.word_embeddings.weight", {config.vocab_size, e});
  if (config.position_biased_input) {
    weight("embeddings.position_embeddings.weight", {config.max_position_embeddings, e});
  }
  if (config.type_vocab_size > 0) {
    weight("embeddings.token_type_embeddings.weight", {config.type_vocab_size, e});
  }
  if (e != h) weight("embeddings.embed_proj.weight", {h, e});
  layer_norm("embeddings.LayerNorm");
  for (int i = 0; i < config.num_hidden_layers; ++i) {
    const std::string layer = absl::StrCat("encoder.layer.", i, ".");
    linear(layer + "attention.self.query_proj", a, h);
    linear(layer + "attention.self.key_proj", a, h);
    linear(layer + "attention.self.value_proj", a, h);
    if (config.relative_attention && !config.share_att_key && config.c2p) {
      linear(layer + "attention.self.pos_key_proj", a, h);
    }
    if (config.relative_attention && !config.share_att_key && config.p2c) {
      linear(layer + "attention.self.pos_query_proj", a, h);
    }
    linear(layer + "attention.output.dense", h, a);
    layer_norm(layer + "attention.output.LayerNorm");
    linear(layer + "intermediate.dense", inter, h);
    linear(layer + "output.dense", h, inter);
    layer_norm(layer + "output.LayerNorm");
  }
  if (config.relative_attention) {
    weight("encoder.rel_embeddings.weight", {config.RelativeEmbeddingRows(), h});
  }
  if (config.norm_rel_embeddings) layer_norm("encoder.LayerNorm");
  if (config.has_conv()) {
    weight("encoder.conv.conv.weight", {h, h / config.conv_groups, config.conv_kernel_size});
    weight("encoder.conv.conv.bias", {h});
    layer_norm("encoder.conv.LayerNorm");
  }
  if (config.head == HeadKind::kSequenceClassification) linear("pooler.dense", h, h);
  if (config.head != HeadKind::kEncoderOnly) linear("classifier", config.num_labels(), h);
  return tensors;
}

std::string StoredName(const std::string& canonical, absl::string_view prefix) {
  if (absl::StartsWith(canonical, "embeddings.") || absl::StartsWith(canonical, "encoder.")) {
    return absl::StrCat(prefix, canonical);
  }
  return canonical;
}

std::string WrittenName(const std::string& canonical, const TinyWriteOptions& options) {
  std::string name = StoredName(canonical, options.prefix);
  if (options.legacy_layer_norm_names && absl::StrContains(name, "LayerNorm.")) {
    if (absl::EndsWith(name, ".weight")) {
      name = absl::StrCat(name.substr(0, name.size() - 7), ".gamma");
    } else if (absl::EndsWith(name, ".bias")) {
      name = absl::StrCat(name.substr(0, name.size() - 5), ".beta");
    }
  }
  return name;
}

void AddTensors(SafetensorsWriter& writer, const std::vector<TinyTensor>& tensors,
                const TinyWriteOptions& options) {
  for (const TinyTensor& tensor : tensors) {
    writer.AddFloat(WrittenName(tensor.name, options), tensor.shape, tensor.values, options.dtype);
  }
}

absl::Status WriteTextFile(const fs::path& path, absl::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path.string(), ": write failed"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TinyTensor>> WriteTinyCheckpoint(const fs::path& directory,
                                                            const nlohmann::json& config,
                                                            const TinyWriteOptions& options,
                                                            uint32_t seed) {
  const std::string text = config.dump(2);
  absl::StatusOr<ModelConfig> parsed = ParseModelConfig(text, "tiny config.json");
  if (!parsed.ok()) return parsed.status();
  std::vector<TinyTensor> tensors = MakeTinyTensors(*parsed, seed);
  if (absl::Status status = WriteTextFile(directory / "config.json", text); !status.ok()) {
    return status;
  }
  if (options.pytorch_bin) {
    TorchCheckpointWriter writer;
    AddTensors(writer, tensors, options);
    if (absl::Status status = writer.WriteFile(directory / "pytorch_model.bin"); !status.ok()) {
      return status;
    }
    return tensors;
  }
  SafetensorsWriter writer;
  writer.SetMetadata("format", "pt");
  AddTensors(writer, tensors, options);
  if (absl::Status status = writer.WriteFile(directory / "model.safetensors"); !status.ok()) {
    return status;
  }
  return tensors;
}

const TinyTensor* FindTensor(const std::vector<TinyTensor>& tensors, absl::string_view name) {
  for (const TinyTensor& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

}  // namespace dflash::test
