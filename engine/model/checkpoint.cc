#include "engine/model/checkpoint.h"

#include <map>
#include <memory>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_document.h"
#include "common/logging.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "engine/model/safetensors.h"
#include "engine/model/torch_checkpoint.h"
#include "engine/model/weights_file.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A safetensors file as the catalog reads it.
class SafetensorsWeights : public WeightsFile {
 public:
  static absl::StatusOr<std::unique_ptr<WeightsFile>> Open(const fs::path& path) {
    DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    return std::make_unique<SafetensorsWeights>(std::move(file));
  }

  explicit SafetensorsWeights(std::unique_ptr<SafetensorsFile> file) : file_(std::move(file)) {}

  const fs::path& path() const override { return file_->path(); }
  const std::vector<TensorInfo>& tensors() const override { return file_->tensors(); }
  absl::StatusOr<std::vector<float>> ReadFloat32(const TensorInfo& tensor) const override {
    return file_->ReadFloat32(tensor);
  }

 private:
  std::unique_ptr<SafetensorsFile> file_;
};

absl::StatusOr<std::unique_ptr<WeightsFile>> OpenTorchWeights(const fs::path& path) {
  DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<TorchCheckpointFile> file,
                          TorchCheckpointFile::Open(path));
  return std::unique_ptr<WeightsFile>(std::move(file));
}

using WeightsOpener = absl::StatusOr<std::unique_ptr<WeightsFile>> (*)(const fs::path& path);

// All tensors of a checkpoint, by canonical name, across one or more weights files.
class TensorCatalog {
 public:
  absl::Status AddFile(std::unique_ptr<WeightsFile> file) {
    for (const TensorInfo& info : file->tensors()) {
      const std::string canonical = CanonicalTensorName(info.name);
      const auto [it, inserted] = entries_.emplace(canonical, Entry{file.get(), &info});
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat(file->path().string(), ": tensor '", info.name, "' duplicates '",
                         it->second.info->name, "' in ", it->second.file->path().string()));
      }
    }
    files_.push_back(std::move(file));
    return absl::OkStatus();
  }

  bool Contains(absl::string_view name) const { return entries_.contains(std::string(name)); }

  // Loads tensor `name` as float32 after checking its shape against `expected`.
  absl::StatusOr<DenseTensor> Take(const std::string& name, std::vector<int64_t> expected) {
    const auto it = entries_.find(name);
    if (it == entries_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Describe(), ": missing tensor '", name, "' (expected shape ", ShapeText(expected), ")"));
    }
    const Entry& entry = it->second;
    if (entry.info->shape != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry.file->path().string(), ": tensor '", entry.info->name, "' has shape ",
          ShapeText(entry.info->shape), ", expected ", ShapeText(expected), " from config.json"));
    }
    DFLASH_ASSIGN_OR_RETURN(std::vector<float> values, entry.file->ReadFloat32(*entry.info));
    used_.insert(name);
    return DenseTensor{std::move(expected), std::move(values)};
  }

  absl::StatusOr<std::vector<float>> TakeVector(const std::string& name, int64_t size) {
    DFLASH_ASSIGN_OR_RETURN(DenseTensor tensor, Take(name, {size}));
    return std::move(tensor.values);
  }

  absl::StatusOr<Linear> TakeLinear(const std::string& prefix, int64_t out, int64_t in,
                                    bool bias = true) {
    Linear linear;
    DFLASH_ASSIGN_OR_RETURN(linear.weight, Take(prefix + ".weight", {out, in}));
    if (bias) {
      DFLASH_ASSIGN_OR_RETURN(linear.bias, TakeVector(prefix + ".bias", out));
    }
    return linear;
  }

  absl::StatusOr<LayerNormParams> TakeLayerNorm(const std::string& prefix, int64_t size) {
    LayerNormParams norm;
    DFLASH_ASSIGN_OR_RETURN(norm.gamma, TakeVector(prefix + ".weight", size));
    DFLASH_ASSIGN_OR_RETURN(norm.beta, TakeVector(prefix + ".bias", size));
    return norm;
  }

  // Names that were neither loaded nor deliberately ignored.
  std::vector<std::string> Unused(const std::set<std::string>& ignored) const {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries_) {
      if (!used_.contains(name) && !ignored.contains(name) && !IsIgnoredTensorName(name)) {
        names.push_back(entry.info->name);
      }
    }
    return names;
  }

  std::vector<fs::path> Paths() const {
    std::vector<fs::path> paths;
    for (const auto& file : files_) paths.push_back(file->path());
    return paths;
  }

 private:
  struct Entry {
    const WeightsFile* file;
    const TensorInfo* info;
  };

  std::string Describe() const {
    if (files_.size() == 1) return files_.front()->path().string();
    return absl::StrCat(files_.size(), " shards");
  }

  std::vector<std::unique_ptr<WeightsFile>> files_;
  std::map<std::string, Entry> entries_;
  std::set<std::string> used_;
};

// A sharded checkpoint: an index (model.safetensors.index.json or pytorch_model.bin.index.json)
// whose weight_map names the shard of every tensor.
absl::Status AddShardsFromIndex(const fs::path& index_path, WeightsOpener open,
                                TensorCatalog& catalog) {
  DFLASH_ASSIGN_OR_RETURN(std::string text, ReadFile(index_path));
  DFLASH_ASSIGN_OR_RETURN(nlohmann::json index, ParseJsonDocument(text, index_path.string()));
  const auto map_it = index.is_object() ? index.find("weight_map") : index.end();
  if (map_it == index.end() || !map_it->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path.string(), ": field 'weight_map' must be an object"));
  }
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          index_path.string(), ": field 'weight_map' entry '", tensor, "' must be a file name"));
    }
    const std::string& name = shard.get_ref<const std::string&>();
    // Shards must sit beside the index: no paths, so a hostile index cannot reach other files.
    if (name.empty() || absl::StrContains(name, '/') || absl::StrContains(name, '\\') ||
        name == "." || name == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path.string(), ": field 'weight_map' entry '", tensor, "' names \"",
                       name, "\", which is not a plain file name"));
    }
    shard_names.insert(name);
  }
  std::map<std::string, std::set<std::string>> names_in_shard;
  for (const std::string& shard : shard_names) {
    DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<WeightsFile> file,
                            open(index_path.parent_path() / shard));
    for (const TensorInfo& info : file->tensors()) names_in_shard[shard].insert(info.name);
    DFLASH_RETURN_IF_ERROR(catalog.AddFile(std::move(file)));
  }
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!names_in_shard[shard.get<std::string>()].contains(tensor)) {
      return absl::InvalidArgumentError(absl::StrCat(index_path.string(), ": tensor '", tensor,
                                                     "' is mapped to ", shard.get<std::string>(),
                                                     ", which does not contain it"));
    }
  }
  return absl::OkStatus();
}

// The weight files of a checkpoint directory, in the order transformers prefers them:
// safetensors before PyTorch's pickled format, a single file before a sharded index.
struct WeightsLayout {
  absl::string_view file_name;
  bool sharded;
  WeightsOpener open;
};

constexpr WeightsLayout kWeightsLayouts[] = {
    {"model.safetensors", false, SafetensorsWeights::Open},
    {"model.safetensors.index.json", true, SafetensorsWeights::Open},
    {"pytorch_model.bin", false, OpenTorchWeights},
    {"pytorch_model.bin.index.json", true, OpenTorchWeights},
};

absl::StatusOr<TensorCatalog> OpenWeights(const fs::path& directory) {
  std::vector<const WeightsLayout*> present;
  std::error_code error;
  for (const WeightsLayout& layout : kWeightsLayouts) {
    if (fs::exists(directory / std::string(layout.file_name), error)) present.push_back(&layout);
  }
  if (present.empty()) {
    return absl::NotFoundError(absl::StrCat(directory.string(),
                                            ": no model.safetensors, model.safetensors.index.json, "
                                            "pytorch_model.bin or pytorch_model.bin.index.json"));
  }
  const WeightsLayout& chosen = *present.front();
  const fs::path path = directory / std::string(chosen.file_name);
  if (present.size() > 1) {
    Log().info("{}: weights from {} (preferred over {}, as transformers does)", directory.string(),
               chosen.file_name, present[1]->file_name);
  } else {
    Log().info("{}: weights from {}", directory.string(), chosen.file_name);
  }
  TensorCatalog catalog;
  if (chosen.sharded) {
    DFLASH_RETURN_IF_ERROR(AddShardsFromIndex(path, chosen.open, catalog));
  } else {
    DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<WeightsFile> file, chosen.open(path));
    DFLASH_RETURN_IF_ERROR(catalog.AddFile(std::move(file)));
  }
  return catalog;
}

absl::StatusOr<EmbeddingConfig> LoadEmbeddingConfig(const fs::path& directory) {
  EmbeddingConfig embedding;
  std::error_code error;
  const fs::path pooling_path = directory / "1_Pooling" / "config.json";
  if (!fs::exists(pooling_path, error)) return embedding;
  embedding.from_sentence_transformers = true;
  DFLASH_ASSIGN_OR_RETURN(std::string text, ReadFile(pooling_path));
  DFLASH_ASSIGN_OR_RETURN(nlohmann::json root, ParseJsonDocument(text, pooling_path.string()));
  const JsonFields fields(root, pooling_path.string());
  DFLASH_ASSIGN_OR_RETURN(bool cls, fields.Bool("pooling_mode_cls_token", false));
  DFLASH_ASSIGN_OR_RETURN(bool mean, fields.Bool("pooling_mode_mean_tokens", false));
  for (absl::string_view unsupported :
       {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
        "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"}) {
    DFLASH_ASSIGN_OR_RETURN(bool enabled, fields.Bool(unsupported, false));
    if (enabled) return fields.FieldError(unsupported, "is not supported (use CLS or mean)");
  }
  if (cls == mean) {
    return fields.FieldError("pooling_mode_cls_token",
                             "and pooling_mode_mean_tokens: exactly one must be true");
  }
  embedding.pooling = cls ? PoolingMode::kCls : PoolingMode::kMean;
  // modules.json lists a sentence_transformers.models.Normalize module when outputs are unit
  // length; without it the model's embeddings are left unnormalised by default.
  embedding.normalize = false;
  const fs::path modules_path = directory / "modules.json";
  if (fs::exists(modules_path, error)) {
    DFLASH_ASSIGN_OR_RETURN(std::string modules_text, ReadFile(modules_path));
    DFLASH_ASSIGN_OR_RETURN(nlohmann::json modules,
                            ParseJsonDocument(modules_text, modules_path.string()));
    if (modules.is_array()) {
      for (const nlohmann::json& module : modules) {
        // Type-check before comparing: nlohmann's value() throws on a non-string "type".
        const auto type = module.is_object() ? module.find("type") : module.end();
        if (type != module.end() && type->is_string() &&
            type->get_ref<const std::string&>() == "sentence_transformers.models.Normalize") {
          embedding.normalize = true;
        }
      }
    }
  }
  return embedding;
}

absl::StatusOr<ModelWeights> LoadWeights(const ModelConfig& config, TensorCatalog& catalog,
                                         std::set<std::string>& ignored) {
  const int64_t hidden = config.hidden_size;
  const int64_t embedding = config.embedding_size;
  const int64_t all_head = config.all_head_size();
  ModelWeights weights;

  DFLASH_ASSIGN_OR_RETURN(weights.word_embeddings, catalog.Take("embeddings.word_embeddings.weight",
                                                                {config.vocab_size, embedding}));
  if (config.position_biased_input) {
    DFLASH_ASSIGN_OR_RETURN(weights.position_embeddings,
                            catalog.Take("embeddings.position_embeddings.weight",
                                         {config.max_position_embeddings, embedding}));
  } else {
    // Present in many v3 checkpoints although unused (transformers ignores it too).
    ignored.insert("embeddings.position_embeddings.weight");
  }
  if (config.type_vocab_size > 0) {
    DFLASH_ASSIGN_OR_RETURN(weights.token_type_embeddings,
                            catalog.Take("embeddings.token_type_embeddings.weight",
                                         {config.type_vocab_size, embedding}));
  }
  if (embedding != hidden) {
    DFLASH_ASSIGN_OR_RETURN(weights.embed_proj,
                            catalog.Take("embeddings.embed_proj.weight", {hidden, embedding}));
  }
  DFLASH_ASSIGN_OR_RETURN(weights.embedding_norm,
                          catalog.TakeLayerNorm("embeddings.LayerNorm", hidden));

  const bool separate_pos_key = config.relative_attention && !config.share_att_key && config.c2p;
  const bool separate_pos_query = config.relative_attention && !config.share_att_key && config.p2c;
  for (int i = 0; i < config.num_hidden_layers; ++i) {
    const std::string layer = absl::StrCat("encoder.layer.", i, ".");
    EncoderLayerWeights& w = weights.layers.emplace_back();
    const std::string self = layer + "attention.self.";
    DFLASH_ASSIGN_OR_RETURN(w.query, catalog.TakeLinear(self + "query_proj", all_head, hidden));
    DFLASH_ASSIGN_OR_RETURN(w.key, catalog.TakeLinear(self + "key_proj", all_head, hidden));
    DFLASH_ASSIGN_OR_RETURN(w.value, catalog.TakeLinear(self + "value_proj", all_head, hidden));
    if (separate_pos_key) {
      DFLASH_ASSIGN_OR_RETURN(w.pos_key,
                              catalog.TakeLinear(self + "pos_key_proj", all_head, hidden));
    }
    if (separate_pos_query) {
      DFLASH_ASSIGN_OR_RETURN(w.pos_query,
                              catalog.TakeLinear(self + "pos_query_proj", all_head, hidden));
    }
    DFLASH_ASSIGN_OR_RETURN(w.attention_output,
                            catalog.TakeLinear(layer + "attention.output.dense", hidden, all_head));
    DFLASH_ASSIGN_OR_RETURN(w.attention_norm,
                            catalog.TakeLayerNorm(layer + "attention.output.LayerNorm", hidden));
    DFLASH_ASSIGN_OR_RETURN(w.intermediate, catalog.TakeLinear(layer + "intermediate.dense",
                                                               config.intermediate_size, hidden));
    DFLASH_ASSIGN_OR_RETURN(
        w.output, catalog.TakeLinear(layer + "output.dense", hidden, config.intermediate_size));
    DFLASH_ASSIGN_OR_RETURN(w.output_norm,
                            catalog.TakeLayerNorm(layer + "output.LayerNorm", hidden));
  }

  if (config.relative_attention) {
    DFLASH_ASSIGN_OR_RETURN(
        weights.relative_embeddings,
        catalog.Take("encoder.rel_embeddings.weight", {config.RelativeEmbeddingRows(), hidden}));
  }
  if (config.norm_rel_embeddings) {
    DFLASH_ASSIGN_OR_RETURN(weights.relative_norm,
                            catalog.TakeLayerNorm("encoder.LayerNorm", hidden));
  }
  if (config.has_conv()) {
    DFLASH_ASSIGN_OR_RETURN(weights.conv_weight, catalog.Take("encoder.conv.conv.weight",
                                                              {hidden, hidden / config.conv_groups,
                                                               config.conv_kernel_size}));
    DFLASH_ASSIGN_OR_RETURN(weights.conv_bias,
                            catalog.TakeVector("encoder.conv.conv.bias", hidden));
    DFLASH_ASSIGN_OR_RETURN(weights.conv_norm,
                            catalog.TakeLayerNorm("encoder.conv.LayerNorm", hidden));
  }

  switch (config.head) {
    case HeadKind::kSequenceClassification: {
      DFLASH_ASSIGN_OR_RETURN(weights.pooler, catalog.TakeLinear("pooler.dense", hidden, hidden));
      DFLASH_ASSIGN_OR_RETURN(weights.classifier,
                              catalog.TakeLinear("classifier", config.num_labels(), hidden));
      break;
    }
    case HeadKind::kTokenClassification: {
      DFLASH_ASSIGN_OR_RETURN(weights.classifier,
                              catalog.TakeLinear("classifier", config.num_labels(), hidden));
      break;
    }
    case HeadKind::kEncoderOnly:
      break;
  }
  return weights;
}

}  // namespace

std::string CanonicalTensorName(absl::string_view name) {
  std::string canonical(name);
  if (absl::StartsWith(canonical, "deberta.")) canonical.erase(0, 8);
  if (absl::EndsWith(canonical, ".gamma")) {
    canonical.replace(canonical.size() - 6, 6, ".weight");
  } else if (absl::EndsWith(canonical, ".beta")) {
    canonical.replace(canonical.size() - 5, 5, ".bias");
  }
  return canonical;
}

bool IsIgnoredTensorName(absl::string_view canonical_name) {
  return absl::StartsWith(canonical_name, "lm_predictions.") ||
         absl::StartsWith(canonical_name, "cls.predictions.") ||
         absl::StartsWith(canonical_name, "mask_predictions.") ||
         canonical_name == "embeddings.position_ids";
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const fs::path& directory) {
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    return absl::NotFoundError(absl::StrCat(directory.string(), ": not a directory"));
  }
  Checkpoint checkpoint;
  checkpoint.directory = directory;
  DFLASH_ASSIGN_OR_RETURN(checkpoint.config, LoadModelConfig(directory / "config.json"));
  DFLASH_ASSIGN_OR_RETURN(TensorCatalog catalog, OpenWeights(directory));
  checkpoint.weight_files = catalog.Paths();

  // A config without "architectures" (as some exports write) is read as a sequence classifier
  // when the classification head is in the weights.
  if (checkpoint.config.architectures.empty() && catalog.Contains("classifier.weight") &&
      catalog.Contains("pooler.dense.weight")) {
    checkpoint.config.head = HeadKind::kSequenceClassification;
  }
  std::set<std::string> ignored;
  DFLASH_ASSIGN_OR_RETURN(checkpoint.weights, LoadWeights(checkpoint.config, catalog, ignored));
  if (const std::vector<std::string> unused = catalog.Unused(ignored); !unused.empty()) {
    Log().warn("{}: {} tensor(s) not used by a {} model, e.g. {}", directory.string(),
               unused.size(), HeadKindName(checkpoint.config.head), unused.front());
  }
  DFLASH_ASSIGN_OR_RETURN(checkpoint.embedding, LoadEmbeddingConfig(directory));
  return checkpoint;
}

}  // namespace dflash
