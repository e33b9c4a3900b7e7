// engine/model/checkpoint.{h,cc}: loading checkpoint directories built from tiny tensors.
#include "engine/model/checkpoint.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/half_precision.h"
#include "engine/model/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tiny_checkpoint.h"
#include "tests/engine/torch_checkpoint_writer.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
using test::FindTensor;
using test::TinyTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CheckpointTest : public ::testing::Test {
 protected:
  const fs::path& dir() const { return dir_.path(); }

  // Writes the tiny config and returns its tensors, without writing any weights.
  std::vector<TinyTensor> ConfigOnly(const nlohmann::json& json = test::TinyConfigJson()) {
    EXPECT_TRUE(test::WriteTextFile(dir() / "config.json", json.dump(2)).ok());
    absl::StatusOr<ModelConfig> config = ParseModelConfig(json.dump(), "config");
    EXPECT_TRUE(config.ok()) << config.status();
    return test::MakeTinyTensors(*config);
  }

  void WriteWeights(const std::vector<TinyTensor>& tensors, const test::TinyWriteOptions& options,
                    const std::string& file = "model.safetensors") {
    SafetensorsWriter writer;
    test::AddTensors(writer, tensors, options);
    const absl::Status status = writer.WriteFile(dir() / file);
    ASSERT_TRUE(status.ok()) << status;
  }

  absl::Status LoadError() {
    absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
    EXPECT_FALSE(checkpoint.ok());
    return checkpoint.ok() ? absl::OkStatus() : checkpoint.status();
  }

  test::ScopedTempDir dir_;
};

// Every loaded parameter equals the written one after `narrow` (identity for F32).
template <typename Narrow>
void ExpectWeightsEqual(const ModelWeights& w, const std::vector<TinyTensor>& tensors,
                        Narrow narrow) {
  auto check = [&](const std::string& name, const std::vector<float>& loaded) {
    const TinyTensor* tensor = FindTensor(tensors, name);
    ASSERT_NE(tensor, nullptr) << name;
    ASSERT_EQ(loaded.size(), tensor->values.size()) << name;
    for (size_t i = 0; i < loaded.size(); ++i) {
      ASSERT_EQ(loaded[i], narrow(tensor->values[i])) << name << "[" << i << "]";
    }
  };
  check("embeddings.word_embeddings.weight", w.word_embeddings.values);
  EXPECT_THAT(w.word_embeddings.shape, ElementsAre(50, 8));
  check("embeddings.LayerNorm.weight", w.embedding_norm.gamma);
  check("embeddings.LayerNorm.bias", w.embedding_norm.beta);
  ASSERT_EQ(w.layers.size(), 1u);
  const EncoderLayerWeights& layer = w.layers[0];
  const std::string p = "encoder.layer.0.";
  check(p + "attention.self.query_proj.weight", layer.query.weight.values);
  check(p + "attention.self.query_proj.bias", layer.query.bias);
  check(p + "attention.self.key_proj.weight", layer.key.weight.values);
  check(p + "attention.self.key_proj.bias", layer.key.bias);
  check(p + "attention.self.value_proj.weight", layer.value.weight.values);
  check(p + "attention.self.value_proj.bias", layer.value.bias);
  check(p + "attention.output.dense.weight", layer.attention_output.weight.values);
  check(p + "attention.output.dense.bias", layer.attention_output.bias);
  check(p + "attention.output.LayerNorm.weight", layer.attention_norm.gamma);
  check(p + "attention.output.LayerNorm.bias", layer.attention_norm.beta);
  check(p + "intermediate.dense.weight", layer.intermediate.weight.values);
  check(p + "intermediate.dense.bias", layer.intermediate.bias);
  check(p + "output.dense.weight", layer.output.weight.values);
  check(p + "output.dense.bias", layer.output.bias);
  check(p + "output.LayerNorm.weight", layer.output_norm.gamma);
  check(p + "output.LayerNorm.bias", layer.output_norm.beta);
  EXPECT_THAT(layer.intermediate.weight.shape, ElementsAre(16, 8));
  EXPECT_THAT(layer.output.weight.shape, ElementsAre(8, 16));
  EXPECT_TRUE(layer.pos_key.weight.empty());
  EXPECT_TRUE(layer.pos_query.weight.empty());
  check("encoder.rel_embeddings.weight", w.relative_embeddings.values);
  EXPECT_THAT(w.relative_embeddings.shape, ElementsAre(8, 8));
  check("encoder.LayerNorm.weight", w.relative_norm.gamma);
  check("encoder.LayerNorm.bias", w.relative_norm.beta);
  check("pooler.dense.weight", w.pooler.weight.values);
  check("pooler.dense.bias", w.pooler.bias);
  check("classifier.weight", w.classifier.weight.values);
  check("classifier.bias", w.classifier.bias);
  EXPECT_THAT(w.classifier.weight.shape, ElementsAre(2, 8));
  EXPECT_TRUE(w.position_embeddings.empty());
  EXPECT_TRUE(w.token_type_embeddings.empty());
  EXPECT_TRUE(w.embed_proj.empty());
  EXPECT_TRUE(w.conv_weight.empty());
}

float Identity(float x) { return x; }

TEST_F(CheckpointTest, LoadsTheTinyCheckpoint) {
  absl::StatusOr<std::vector<TinyTensor>> tensors =
      test::WriteTinyCheckpoint(dir(), test::TinyConfigJson());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->directory, dir());
  EXPECT_THAT(checkpoint->weight_files, ElementsAre(dir() / "model.safetensors"));
  const ModelConfig& config = checkpoint->config;
  EXPECT_EQ(config.head, HeadKind::kSequenceClassification);
  EXPECT_EQ(config.hidden_size, 8);
  EXPECT_EQ(config.AttentionSpan(), 4);
  EXPECT_THAT(config.id2label, ElementsAre("NEG", "POS"));
  EXPECT_EQ(checkpoint->embedding.pooling, PoolingMode::kMean);
  EXPECT_TRUE(checkpoint->embedding.normalize);
  EXPECT_FALSE(checkpoint->embedding.from_sentence_transformers);
  ExpectWeightsEqual(checkpoint->weights, *tensors, Identity);
}

TEST_F(CheckpointTest, DebertaPrefixIsOptional) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  WriteWeights(tensors, {.prefix = ""});
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ExpectWeightsEqual(checkpoint->weights, tensors, Identity);
}

TEST_F(CheckpointTest, LegacyGammaBetaNames) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  WriteWeights(tensors, {.prefix = "deberta.", .legacy_layer_norm_names = true});
  {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
        SafetensorsFile::Open(dir() / "model.safetensors");
    ASSERT_TRUE(file.ok());
    ASSERT_NE((*file)->Find("deberta.embeddings.LayerNorm.gamma"), nullptr);
    ASSERT_NE((*file)->Find("deberta.encoder.layer.0.output.LayerNorm.beta"), nullptr);
    ASSERT_EQ((*file)->Find("deberta.embeddings.LayerNorm.weight"), nullptr);
  }
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ExpectWeightsEqual(checkpoint->weights, tensors, Identity);
}

TEST(CanonicalTensorNameTest, Rules) {
  EXPECT_EQ(CanonicalTensorName("deberta.embeddings.LayerNorm.gamma"),
            "embeddings.LayerNorm.weight");
  EXPECT_EQ(CanonicalTensorName("encoder.LayerNorm.beta"), "encoder.LayerNorm.bias");
  EXPECT_EQ(CanonicalTensorName("classifier.weight"), "classifier.weight");
  EXPECT_EQ(CanonicalTensorName("deberta.deberta.x"), "deberta.x");
  EXPECT_EQ(CanonicalTensorName("mydeberta.x"), "mydeberta.x");
  EXPECT_TRUE(IsIgnoredTensorName("lm_predictions.lm_head.bias"));
  EXPECT_TRUE(IsIgnoredTensorName("cls.predictions.transform.dense.weight"));
  EXPECT_TRUE(IsIgnoredTensorName("mask_predictions.classifier.weight"));
  EXPECT_TRUE(IsIgnoredTensorName("embeddings.position_ids"));
  EXPECT_FALSE(IsIgnoredTensorName("classifier.weight"));
  EXPECT_FALSE(IsIgnoredTensorName("embeddings.position_embeddings.weight"));
}

TEST_F(CheckpointTest, PretrainingHeadsAndUnusedPositionEmbeddingsAreIgnored) {
  std::vector<TinyTensor> tensors = ConfigOnly();
  SafetensorsWriter writer;
  test::AddTensors(writer, tensors, {});
  const std::vector<float> values(8 * 8, 0.25f);
  writer.AddFloat("lm_predictions.lm_head.dense.weight", {8, 8}, values);
  writer.AddFloat("lm_predictions.lm_head.bias", {50}, std::vector<float>(50, 1.0f));
  writer.AddFloat("cls.predictions.transform.dense.weight", {8, 8}, values);
  writer.AddFloat("mask_predictions.dense.weight", {8, 8}, values);
  writer.AddFloat("deberta.mask_predictions.classifier.weight", {1, 8},
                  std::vector<float>(8, 1.0f));
  writer.AddFloat("deberta.embeddings.position_embeddings.weight", {512, 8},
                  std::vector<float>(512 * 8, 0.5f));
  writer.AddInt("deberta.embeddings.position_ids", {1, 4}, std::vector<int64_t>{0, 1, 2, 3});
  ASSERT_TRUE(writer.WriteFile(dir() / "model.safetensors").ok());
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ExpectWeightsEqual(checkpoint->weights, tensors, Identity);
}

TEST_F(CheckpointTest, MissingTensorIsNamedWithItsExpectedShape) {
  std::vector<TinyTensor> tensors = ConfigOnly();
  std::erase_if(tensors, [](const TinyTensor& t) {
    return t.name == "encoder.layer.0.attention.self.key_proj.weight";
  });
  WriteWeights(tensors, {});
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr((dir() / "model.safetensors").string()));
  EXPECT_THAT(status.message(),
              HasSubstr("missing tensor 'encoder.layer.0.attention.self.key_proj.weight' "
                        "(expected shape [8, 8])"));
}

TEST_F(CheckpointTest, MissingRelativeEmbeddingsAreNamed) {
  std::vector<TinyTensor> tensors = ConfigOnly();
  std::erase_if(tensors,
                [](const TinyTensor& t) { return t.name == "encoder.rel_embeddings.weight"; });
  WriteWeights(tensors, {});
  const absl::Status status = LoadError();
  EXPECT_THAT(status.message(),
              HasSubstr("missing tensor 'encoder.rel_embeddings.weight' (expected shape [8, 8])"));
}

TEST_F(CheckpointTest, MisShapedTensorNamesActualAndExpectedShapes) {
  std::vector<TinyTensor> tensors = ConfigOnly();
  for (TinyTensor& t : tensors) {
    if (t.name == "encoder.layer.0.intermediate.dense.weight") {
      t.shape = {16, 7};
      t.values.resize(16 * 7);
    }
  }
  WriteWeights(tensors, {});
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr((dir() / "model.safetensors").string()));
  EXPECT_THAT(status.message(),
              HasSubstr("tensor 'deberta.encoder.layer.0.intermediate.dense.weight' has shape "
                        "[16, 7], expected [16, 8]"));
}

TEST_F(CheckpointTest, IntegerWeightIsAnErrorNamingIt) {
  std::vector<TinyTensor> tensors = ConfigOnly();
  std::erase_if(tensors, [](const TinyTensor& t) { return t.name == "classifier.bias"; });
  SafetensorsWriter writer;
  test::AddTensors(writer, tensors, {});
  writer.AddInt("classifier.bias", {2}, std::vector<int64_t>{1, 2});
  ASSERT_TRUE(writer.WriteFile(dir() / "model.safetensors").ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor 'classifier.bias' has dtype I64"));
}

TEST_F(CheckpointTest, HalfPrecisionWeightsAreConverted) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  WriteWeights(tensors, {.dtype = DType::kF16});
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ExpectWeightsEqual(checkpoint->weights, tensors,
                     [](float x) { return HalfToFloat(FloatToHalf(x)); });
  // The narrowing really happened (so the comparison above is not vacuous).
  const float original = FindTensor(tensors, "classifier.weight")->values[0];
  EXPECT_NE(checkpoint->weights.classifier.weight.values[0], original);
}

TEST_F(CheckpointTest, BFloat16WeightsAreConverted) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  WriteWeights(tensors, {.dtype = DType::kBF16});
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ExpectWeightsEqual(checkpoint->weights, tensors,
                     [](float x) { return BFloat16ToFloat(FloatToBFloat16(x)); });
  const float original = FindTensor(tensors, "classifier.weight")->values[0];
  EXPECT_NE(checkpoint->weights.classifier.weight.values[0], original);
}

TEST_F(CheckpointTest, MixedDTypesPerTensor) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  SafetensorsWriter writer;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const DType dtype = i % 3 == 0 ? DType::kF16 : (i % 3 == 1 ? DType::kBF16 : DType::kF64);
    writer.AddFloat(test::StoredName(tensors[i].name, "deberta."), tensors[i].shape,
                    tensors[i].values, dtype);
  }
  ASSERT_TRUE(writer.WriteFile(dir() / "model.safetensors").ok());
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
}

TEST_F(CheckpointTest, PytorchBinLoadsBitIdenticalToSafetensors) {
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    test::ScopedTempDir safetensors_dir;
    test::ScopedTempDir bin_dir;
    absl::StatusOr<std::vector<TinyTensor>> tensors =
        test::WriteTinyCheckpoint(safetensors_dir.path(), test::TinyConfigJson(), {.dtype = dtype});
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    ASSERT_TRUE(test::WriteTinyCheckpoint(bin_dir.path(), test::TinyConfigJson(),
                                          {.dtype = dtype, .pytorch_bin = true})
                    .ok());
    absl::StatusOr<Checkpoint> expected = LoadCheckpoint(safetensors_dir.path());
    absl::StatusOr<Checkpoint> actual = LoadCheckpoint(bin_dir.path());
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_TRUE(actual.ok()) << actual.status();
    EXPECT_THAT(actual->weight_files, ElementsAre(bin_dir.path() / "pytorch_model.bin"));
    // Both equal the written values after the same narrowing, so they are bit-identical.
    const auto narrow = [&](float x) {
      float narrowed = 0;
      DecodeFloat32(dtype, EncodeFloats({&x, 1}, dtype), {&narrowed, 1});
      return narrowed;
    };
    ExpectWeightsEqual(expected->weights, *tensors, narrow);
    ExpectWeightsEqual(actual->weights, *tensors, narrow);
  }
}

TEST_F(CheckpointTest, PytorchBinWithLegacyNamesAndNoPrefix) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  test::TorchCheckpointWriter writer;
  test::AddTensors(writer, tensors, {.prefix = "", .legacy_layer_norm_names = true});
  ASSERT_TRUE(writer.WriteFile(dir() / "pytorch_model.bin").ok());
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ExpectWeightsEqual(checkpoint->weights, tensors, Identity);
}

TEST_F(CheckpointTest, SafetensorsWinsOverPytorchBin) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  WriteWeights(tensors, {});
  // Never opened: transformers prefers safetensors too.
  ASSERT_TRUE(test::WriteTextFile(dir() / "pytorch_model.bin", "not a checkpoint").ok());
  ASSERT_TRUE(test::WriteTextFile(dir() / "pytorch_model.bin.index.json", "{}").ok());
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_THAT(checkpoint->weight_files, ElementsAre(dir() / "model.safetensors"));
}

TEST_F(CheckpointTest, PytorchBinInTheLegacyFormatSaysHowToConvert) {
  ConfigOnly();
  ASSERT_TRUE(
      test::WriteTextFile(dir() / "pytorch_model.bin", std::string("\x80\x02\x8a\x0al\xfc\x9c"
                                                                   "F\xf9 j\xa8P\x19.",
                                                                   13))
          .ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr((dir() / "pytorch_model.bin").string()));
  EXPECT_THAT(status.message(), HasSubstr("legacy serialization format"));
  EXPECT_THAT(status.message(), HasSubstr("scripts/convert_pytorch_checkpoint.py"));
}

TEST_F(CheckpointTest, TruncatedPytorchBinIsAnErrorNamingIt) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  test::TorchCheckpointWriter writer;
  test::AddTensors(writer, tensors, {});
  const std::string bytes = writer.Serialize();
  ASSERT_TRUE(
      test::WriteTextFile(dir() / "pytorch_model.bin", bytes.substr(0, bytes.size() / 2)).ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("pytorch_model.bin"));
  EXPECT_THAT(status.message(), HasSubstr("truncated"));
}

TEST_F(CheckpointTest, ShardedPytorchBinIndexWithoutWeightMapIsRejected) {
  ConfigOnly();
  ASSERT_TRUE(test::WriteTextFile(dir() / "pytorch_model.bin.index.json", "{}").ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("pytorch_model.bin.index.json"));
  EXPECT_THAT(status.message(), HasSubstr("field 'weight_map' must be an object"));
}

TEST_F(CheckpointTest, NoWeightsIsNotFound) {
  ConfigOnly();
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(dir().string()));
  EXPECT_THAT(status.message(), HasSubstr("model.safetensors"));
}

TEST_F(CheckpointTest, MissingConfigIsNotFoundNamingIt) {
  ASSERT_TRUE(test::WriteTinyCheckpoint(dir(), test::TinyConfigJson()).ok());
  fs::remove(dir() / "config.json");
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr((dir() / "config.json").string()));
}

TEST_F(CheckpointTest, NotADirectoryIsNotFound) {
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir() / "nowhere");
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("nowhere"));
}

TEST_F(CheckpointTest, BadConfigIsReportedBeforeWeights) {
  ASSERT_TRUE(test::WriteTextFile(dir() / "config.json", R"({"model_type": "bert"})").ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr((dir() / "config.json").string()));
  EXPECT_THAT(status.message(), HasSubstr("field 'model_type'"));
}

// Splits the tensors over two shards, <stem>-0000N-of-00002<extension> written by `first` and
// `second` (SafetensorsWriter or TorchCheckpointWriter); returns the index JSON.
template <typename Writer>
nlohmann::json WriteShardsWith(const fs::path& dir, const std::vector<TinyTensor>& tensors,
                               Writer first, Writer second, const std::string& stem,
                               const std::string& extension) {
  const std::string first_name = stem + "-00001-of-00002" + extension;
  const std::string second_name = stem + "-00002-of-00002" + extension;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = test::StoredName(tensors[i].name, "deberta.");
    const bool in_first = i < tensors.size() / 2;
    (in_first ? first : second).AddFloat(name, tensors[i].shape, tensors[i].values);
    weight_map[name] = in_first ? first_name : second_name;
  }
  EXPECT_TRUE(first.WriteFile(dir / first_name).ok());
  EXPECT_TRUE(second.WriteFile(dir / second_name).ok());
  return nlohmann::json{{"metadata", {{"total_size", 12345}}}, {"weight_map", weight_map}};
}

nlohmann::json WriteShards(const fs::path& dir, const std::vector<TinyTensor>& tensors) {
  return WriteShardsWith(dir, tensors, SafetensorsWriter(), SafetensorsWriter(), "model",
                         ".safetensors");
}

TEST_F(CheckpointTest, ShardedCheckpointLoads) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  const nlohmann::json index = WriteShards(dir(), tensors);
  ASSERT_TRUE(test::WriteTextFile(dir() / "model.safetensors.index.json", index.dump(2)).ok());
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_THAT(checkpoint->weight_files, ElementsAre(dir() / "model-00001-of-00002.safetensors",
                                                    dir() / "model-00002-of-00002.safetensors"));
  ExpectWeightsEqual(checkpoint->weights, tensors, Identity);
}

TEST_F(CheckpointTest, ShardedPytorchBinLoads) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  // transformers' shards are plain dicts.
  test::TorchCheckpointWriter shard;
  shard.SetContainer(test::TorchCheckpointWriter::Container::kDict);
  nlohmann::json index = WriteShardsWith(dir(), tensors, shard, shard, "pytorch_model", ".bin");
  ASSERT_TRUE(test::WriteTextFile(dir() / "pytorch_model.bin.index.json", index.dump(2)).ok());
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_THAT(checkpoint->weight_files, ElementsAre(dir() / "pytorch_model-00001-of-00002.bin",
                                                    dir() / "pytorch_model-00002-of-00002.bin"));
  ExpectWeightsEqual(checkpoint->weights, tensors, Identity);

  index["weight_map"]["classifier.bias"] = "../pytorch_model.bin";
  ASSERT_TRUE(test::WriteTextFile(dir() / "pytorch_model.bin.index.json", index.dump(2)).ok());
  const absl::Status status = LoadError();
  EXPECT_THAT(status.message(), HasSubstr("pytorch_model.bin.index.json"));
  EXPECT_THAT(status.message(), HasSubstr("not a plain file name"));
}

TEST_F(CheckpointTest, IndexWithAPathIsRejected) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  nlohmann::json index = WriteShards(dir(), tensors);
  index["weight_map"]["classifier.bias"] = "../x.safetensors";
  ASSERT_TRUE(test::WriteTextFile(dir() / "model.safetensors.index.json", index.dump(2)).ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("model.safetensors.index.json"));
  EXPECT_THAT(status.message(), HasSubstr("'classifier.bias'"));
  EXPECT_THAT(status.message(), HasSubstr("\"../x.safetensors\", which is not a plain file name"));

  for (const char* name : {"..", ".", "", "sub/x.safetensors", "/etc/passwd", "a\\b"}) {
    index["weight_map"]["classifier.bias"] = name;
    ASSERT_TRUE(test::WriteTextFile(dir() / "model.safetensors.index.json", index.dump()).ok());
    const absl::Status error = LoadError();
    EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(error.message(), HasSubstr("not a plain file name")) << name;
  }
}

TEST_F(CheckpointTest, IndexMappingATensorToTheWrongShardIsRejected) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  nlohmann::json index = WriteShards(dir(), tensors);
  // classifier.bias is the last tensor, so it lives in shard 2.
  index["weight_map"]["classifier.bias"] = "model-00001-of-00002.safetensors";
  ASSERT_TRUE(test::WriteTextFile(dir() / "model.safetensors.index.json", index.dump(2)).ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("model.safetensors.index.json"));
  EXPECT_THAT(status.message(), HasSubstr("tensor 'classifier.bias' is mapped to "
                                          "model-00001-of-00002.safetensors, which does not "
                                          "contain it"));
}

TEST_F(CheckpointTest, IndexNamingAMissingShardIsNotFound) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  nlohmann::json index = WriteShards(dir(), tensors);
  index["weight_map"]["classifier.bias"] = "model-00003-of-00002.safetensors";
  ASSERT_TRUE(test::WriteTextFile(dir() / "model.safetensors.index.json", index.dump(2)).ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("model-00003-of-00002.safetensors"));
}

TEST_F(CheckpointTest, IndexWithoutWeightMapIsRejected) {
  ConfigOnly();
  ASSERT_TRUE(test::WriteTextFile(dir() / "model.safetensors.index.json",
                                  R"({"metadata": {}, "weight_map": []})")
                  .ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("field 'weight_map' must be an object"));
}

TEST_F(CheckpointTest, DuplicatedTensorWithAndWithoutPrefixIsRejected) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  SafetensorsWriter writer;
  test::AddTensors(writer, tensors, {});
  const TinyTensor* word = FindTensor(tensors, "embeddings.word_embeddings.weight");
  writer.AddFloat("embeddings.word_embeddings.weight", word->shape, word->values);
  ASSERT_TRUE(writer.WriteFile(dir() / "model.safetensors").ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("model.safetensors"));
  EXPECT_THAT(status.message(), HasSubstr("embeddings.word_embeddings.weight"));
  EXPECT_THAT(status.message(), HasSubstr("duplicates"));
}

TEST_F(CheckpointTest, DuplicatedLegacyAndModernLayerNormNamesAreRejected) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  SafetensorsWriter writer;
  test::AddTensors(writer, tensors, {});
  writer.AddFloat("deberta.embeddings.LayerNorm.gamma", {8}, std::vector<float>(8, 1.0f));
  ASSERT_TRUE(writer.WriteFile(dir() / "model.safetensors").ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("duplicates"));
}

TEST_F(CheckpointTest, DuplicatedTensorAcrossShardsIsRejected) {
  const std::vector<TinyTensor> tensors = ConfigOnly();
  nlohmann::json index = WriteShards(dir(), tensors);
  // Rewrite shard 2 with an extra copy of a shard-1 tensor under the prefix-less name.
  SafetensorsWriter second;
  for (size_t i = tensors.size() / 2; i < tensors.size(); ++i) {
    second.AddFloat(test::StoredName(tensors[i].name, "deberta."), tensors[i].shape,
                    tensors[i].values);
  }
  second.AddFloat(tensors[0].name, tensors[0].shape, tensors[0].values);
  ASSERT_TRUE(second.WriteFile(dir() / "model-00002-of-00002.safetensors").ok());
  index["weight_map"][tensors[0].name] = "model-00002-of-00002.safetensors";
  ASSERT_TRUE(test::WriteTextFile(dir() / "model.safetensors.index.json", index.dump(2)).ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("duplicates"));
  EXPECT_THAT(status.message(), HasSubstr(tensors[0].name));
}

TEST_F(CheckpointTest, NumLabelsDisagreeingWithClassifierIsNamed) {
  const std::vector<TinyTensor> tensors = ConfigOnly();  // 2 labels.
  nlohmann::json json = test::TinyConfigJson();
  json["id2label"] = {{"0", "a"}, {"1", "b"}, {"2", "c"}};
  json.erase("label2id");
  ASSERT_TRUE(test::WriteTextFile(dir() / "config.json", json.dump()).ok());
  WriteWeights(tensors, {});
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("tensor 'classifier.weight' has shape [2, 8], expected [3, 8]"));
}

TEST_F(CheckpointTest, NoArchitecturesButAClassifierMakesASequenceClassifier) {
  nlohmann::json json = test::TinyConfigJson();
  json.erase("architectures");
  std::vector<TinyTensor> tensors = ConfigOnly(json);
  {
    // ConfigOnly built an encoder-only tensor set; add the head from the classifier config.
    absl::StatusOr<ModelConfig> with_head =
        ParseModelConfig(test::TinyConfigJson().dump(), "config");
    ASSERT_TRUE(with_head.ok());
    tensors = test::MakeTinyTensors(*with_head);
  }
  WriteWeights(tensors, {});
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->config.head, HeadKind::kSequenceClassification);
  ExpectWeightsEqual(checkpoint->weights, tensors, Identity);
}

TEST_F(CheckpointTest, NoArchitecturesAndNoHeadIsAnEncoder) {
  nlohmann::json json = test::TinyConfigJson();
  json.erase("architectures");
  const std::vector<TinyTensor> tensors = ConfigOnly(json);
  EXPECT_EQ(FindTensor(tensors, "classifier.weight"), nullptr);
  WriteWeights(tensors, {});
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->config.head, HeadKind::kEncoderOnly);
  EXPECT_TRUE(checkpoint->weights.classifier.weight.empty());
}

TEST_F(CheckpointTest, TokenClassifierHasNoPooler) {
  nlohmann::json json = test::TinyConfigJson();
  json["architectures"] = {"DebertaV2ForTokenClassification"};
  const std::vector<TinyTensor> tensors = ConfigOnly(json);
  EXPECT_EQ(FindTensor(tensors, "pooler.dense.weight"), nullptr);
  WriteWeights(tensors, {});
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->config.head, HeadKind::kTokenClassification);
  EXPECT_TRUE(checkpoint->weights.pooler.weight.empty());
  EXPECT_THAT(checkpoint->weights.classifier.weight.shape, ElementsAre(2, 8));
}

TEST_F(CheckpointTest, LegacyConfigurationTensors) {
  // Absolute positions, token types, an embedding projection, unshared position projections
  // and the ConvLayer: every optional tensor of LoadWeights.
  nlohmann::json json = test::TinyConfigJson();
  json.update({{"position_biased_input", true},
               {"max_position_embeddings", 16},
               {"type_vocab_size", 2},
               {"embedding_size", 6},
               {"share_att_key", false},
               {"position_buckets", -1},
               {"max_relative_positions", 6},
               {"conv_kernel_size", 3},
               {"conv_act", "gelu"}});
  const std::vector<TinyTensor> tensors = ConfigOnly(json);
  WriteWeights(tensors, {});
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const ModelWeights& w = checkpoint->weights;
  EXPECT_THAT(w.position_embeddings.shape, ElementsAre(16, 6));
  EXPECT_THAT(w.token_type_embeddings.shape, ElementsAre(2, 6));
  EXPECT_THAT(w.embed_proj.shape, ElementsAre(8, 6));
  EXPECT_THAT(w.layers[0].pos_key.weight.shape, ElementsAre(8, 8));
  EXPECT_THAT(w.layers[0].pos_query.weight.shape, ElementsAre(8, 8));
  EXPECT_THAT(w.relative_embeddings.shape, ElementsAre(12, 8));
  EXPECT_THAT(w.conv_weight.shape, ElementsAre(8, 8, 3));
  EXPECT_EQ(w.conv_weight.values, FindTensor(tensors, "encoder.conv.conv.weight")->values);
  EXPECT_EQ(w.layers[0].pos_query.bias,
            FindTensor(tensors, "encoder.layer.0.attention.self.pos_query_proj.bias")->values);

  // Now the absolute position table is required.
  std::vector<TinyTensor> without = tensors;
  std::erase_if(without, [](const TinyTensor& t) {
    return t.name == "embeddings.position_embeddings.weight";
  });
  fs::remove(dir() / "model.safetensors");
  WriteWeights(without, {});
  const absl::Status status = LoadError();
  EXPECT_THAT(status.message(),
              HasSubstr("missing tensor 'embeddings.position_embeddings.weight' (expected shape "
                        "[16, 6])"));
}

TEST_F(CheckpointTest, SentenceTransformersPooling) {
  ASSERT_TRUE(test::WriteTinyCheckpoint(dir(), test::TinyConfigJson()).ok());
  fs::create_directory(dir() / "1_Pooling");
  const fs::path pooling = dir() / "1_Pooling" / "config.json";

  ASSERT_TRUE(test::WriteTextFile(pooling,
                                  R"({"word_embedding_dimension": 8, "pooling_mode_cls_token": true,
                               "pooling_mode_mean_tokens": false})")
                  .ok());
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->embedding.pooling, PoolingMode::kCls);
  EXPECT_FALSE(checkpoint->embedding.normalize);
  EXPECT_TRUE(checkpoint->embedding.from_sentence_transformers);

  ASSERT_TRUE(test::WriteTextFile(pooling, R"({"pooling_mode_mean_tokens": true})").ok());
  checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->embedding.pooling, PoolingMode::kMean);
  EXPECT_FALSE(checkpoint->embedding.normalize);

  ASSERT_TRUE(test::WriteTextFile(dir() / "modules.json", R"([
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
  ])")
                  .ok());
  checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->embedding.pooling, PoolingMode::kMean);
  EXPECT_TRUE(checkpoint->embedding.normalize);

  ASSERT_TRUE(test::WriteTextFile(dir() / "modules.json", R"([
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
  ])")
                  .ok());
  checkpoint = LoadCheckpoint(dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_FALSE(checkpoint->embedding.normalize);
}

TEST_F(CheckpointTest, SentenceTransformersPoolingErrors) {
  ASSERT_TRUE(test::WriteTinyCheckpoint(dir(), test::TinyConfigJson()).ok());
  fs::create_directory(dir() / "1_Pooling");
  const fs::path pooling = dir() / "1_Pooling" / "config.json";
  struct Case {
    std::string json;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true})",
            "exactly one must be true"},
           {R"({"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": false})",
            "exactly one must be true"},
           {"{}", "exactly one must be true"},
           {R"({"pooling_mode_max_tokens": true})",
            "field 'pooling_mode_max_tokens' is not supported"},
           {R"({"pooling_mode_mean_tokens": true, "pooling_mode_mean_sqrt_len_tokens": true})",
            "field 'pooling_mode_mean_sqrt_len_tokens' is not supported"},
           {R"({"pooling_mode_lasttoken": true})", "field 'pooling_mode_lasttoken'"},
           {R"({"pooling_mode_cls_token": "yes"})", "field 'pooling_mode_cls_token' must be"},
           {R"({"pooling_mode_cls_token": true,})", "invalid JSON"},
       }) {
    ASSERT_TRUE(test::WriteTextFile(pooling, c.json).ok());
    const absl::Status status = LoadError();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(status.message(), HasSubstr(pooling.string())) << c.json;
    EXPECT_THAT(status.message(), HasSubstr(c.expected)) << c.json;
  }
}

TEST_F(CheckpointTest, ModulesJsonWithoutNormalizeOrNotAList) {
  ASSERT_TRUE(test::WriteTinyCheckpoint(dir(), test::TinyConfigJson()).ok());
  fs::create_directory(dir() / "1_Pooling");
  ASSERT_TRUE(test::WriteTextFile(dir() / "1_Pooling" / "config.json",
                                  R"({"pooling_mode_cls_token": true})")
                  .ok());
  for (const char* modules : {"{}", "[]", "[1, \"x\"]", R"([{"path": "2_Normalize"}])"}) {
    ASSERT_TRUE(test::WriteTextFile(dir() / "modules.json", modules).ok());
    absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir());
    ASSERT_TRUE(checkpoint.ok()) << modules << ": " << checkpoint.status();
    EXPECT_FALSE(checkpoint->embedding.normalize) << modules;
  }
  ASSERT_TRUE(test::WriteTextFile(dir() / "modules.json", "[{\"type\": ").ok());
  const absl::Status status = LoadError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr((dir() / "modules.json").string()));
}

// Regression (LoadEmbeddingConfig): modules.json entries were read with nlohmann's
// module.value("type", ""), which throws nlohmann::json::type_error when "type" is present but
// not a string; the exception escaped LoadCheckpoint.
TEST_F(CheckpointTest, ModulesJsonWithANonStringTypeIsAnErrorNotAnException) {
  ASSERT_TRUE(test::WriteTinyCheckpoint(dir(), test::TinyConfigJson()).ok());
  fs::create_directory(dir() / "1_Pooling");
  ASSERT_TRUE(test::WriteTextFile(dir() / "1_Pooling" / "config.json",
                                  R"({"pooling_mode_mean_tokens": true})")
                  .ok());
  for (const char* modules :
       {R"([{"type": 5}])", R"([{"type": null}])", R"([{"type": {"name": "Normalize"}}])"}) {
    ASSERT_TRUE(test::WriteTextFile(dir() / "modules.json", modules).ok());
    absl::StatusOr<Checkpoint> checkpoint = absl::UnknownError("not run");
    EXPECT_NO_THROW(checkpoint = LoadCheckpoint(dir())) << modules;
    if (!checkpoint.ok()) {
      EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kInvalidArgument) << modules;
      EXPECT_THAT(checkpoint.status().message(), HasSubstr("modules.json")) << modules;
    }
  }
}

TEST_F(CheckpointTest, TruncatedSafetensorsIsAnErrorNotACrash) {
  ASSERT_TRUE(test::WriteTinyCheckpoint(dir(), test::TinyConfigJson()).ok());
  const fs::path path = dir() / "model.safetensors";
  const uintmax_t size = fs::file_size(path);
  for (const uintmax_t keep :
       {size / 2, size - 1, uintmax_t{100}, uintmax_t{8}, uintmax_t{3}, uintmax_t{0}}) {
    ASSERT_TRUE(test::WriteTinyCheckpoint(dir(), test::TinyConfigJson()).ok());
    fs::resize_file(path, keep);
    const absl::Status status = LoadError();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << keep << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(path.string())) << keep;
  }
  // Cut in the middle of the data: the header survives, a tensor ends past the data section.
  ASSERT_TRUE(test::WriteTinyCheckpoint(dir(), test::TinyConfigJson()).ok());
  fs::resize_file(path, size / 2);
  EXPECT_THAT(LoadError().message(), HasSubstr("end past the data section"));
}

}  // namespace
}  // namespace dflash
