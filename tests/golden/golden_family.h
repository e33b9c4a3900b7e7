// The golden families (make_model_goldens.py) as test inputs for any engine: a family's reference
// outputs from transformers, its inputs as a packed batch, and the relative error measure.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/safetensors.h"
#include "engine/packed_batch.h"
#include "gtest/gtest.h"

namespace dflash::test {

// The fixtures of the source tree this test was built from, or of $DFLASH_SOURCE_DIR when set
// (tests carried to a GPU host run from another checkout path).
inline const std::filesystem::path kGoldenModels =
    std::filesystem::path(std::getenv("DFLASH_SOURCE_DIR") != nullptr
                              ? std::getenv("DFLASH_SOURCE_DIR")
                              : DFLASH_SOURCE_DIR) /
    "tests/golden/models";

// Every golden family's directory name.
inline const std::vector<std::string> kGoldenFamilies = {
    "v3_like",   "v2_xlarge_like", "legacy",          "c2p_only",
    "token_cls", "encoder_only",   "mdeberta_v3_like"};

struct GoldenReference {
  std::unique_ptr<SafetensorsFile> file;

  std::vector<float> Floats(const std::string& name) const {
    const TensorInfo* info = file->Find(name);
    EXPECT_NE(info, nullptr) << name;
    if (info == nullptr) return {};
    absl::StatusOr<std::vector<float>> values = file->ReadFloat32(*info);
    EXPECT_TRUE(values.ok()) << values.status();
    return values.ok() ? *values : std::vector<float>{};
  }
  std::vector<int32_t> Ints(const std::string& name) const {
    const TensorInfo* info = file->Find(name);
    EXPECT_NE(info, nullptr) << name;
    if (info == nullptr) return {};
    absl::StatusOr<std::vector<int64_t>> values = file->ReadInt64(*info);
    EXPECT_TRUE(values.ok()) << values.status();
    return values.ok() ? std::vector<int32_t>(values->begin(), values->end())
                       : std::vector<int32_t>{};
  }
};

// ||a - b||_2 / ||b||_2 over rows [first, last) of [rows, width] matrices.
inline double RelativeL2(const std::vector<float>& a, const std::vector<float>& b, int64_t width,
                         int64_t first, int64_t last) {
  double diff = 0.0;
  double norm = 0.0;
  for (int64_t i = first * width; i < last * width; ++i) {
    const double delta = static_cast<double>(a[i]) - b[i];
    diff += delta * delta;
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// Opens `family`'s reference outputs and packs its inputs (fatal failures on missing files).
inline void LoadGoldenInputs(const std::string& family, GoldenReference& reference,
                             PackedBatch& batch) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(kGoldenModels / family / "reference.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  reference.file = *std::move(file);
  const std::vector<int32_t> ids = reference.Ints("input_ids");
  const std::vector<int32_t> types = reference.Ints("token_type_ids");
  const std::vector<int32_t> cu = reference.Ints("cu_seqlens");
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    batch.Append(std::vector<int32_t>(ids.begin() + cu[s], ids.begin() + cu[s + 1]),
                 std::vector<int32_t>(types.begin() + cu[s], types.begin() + cu[s + 1]));
  }
}

// The pooled embeddings stored for encoder_only: how each was pooled and its tensor name.
struct EmbeddingReference {
  PoolingMode pooling;
  bool normalize;
  const char* tensor;
};
inline constexpr EmbeddingReference kEmbeddingReferences[] = {
    {PoolingMode::kMean, true, "embeddings_mean_normalized"},
    {PoolingMode::kMean, false, "embeddings_mean"},
    {PoolingMode::kCls, true, "embeddings_cls_normalized"},
};

// Sequence `s` of `batch` as a batch of its own.
inline PackedBatch SequenceAlone(const PackedBatch& batch, int s) {
  PackedBatch alone;
  const auto begin = batch.token_ids.begin() + batch.cu_seqlens[s];
  std::vector<int32_t> types;
  if (!batch.token_type_ids.empty()) {
    const auto type_begin = batch.token_type_ids.begin() + batch.cu_seqlens[s];
    types.assign(type_begin, type_begin + batch.sequence_length(s));
  }
  alone.Append(std::vector<int32_t>(begin, begin + batch.sequence_length(s)), types);
  return alone;
}

// The rows of sequence `s` of `batch` in a [total_tokens, width] output.
inline std::vector<float> SequenceRows(const std::vector<float>& rows, const PackedBatch& batch,
                                       int s, int64_t width) {
  return std::vector<float>(rows.begin() + int64_t{batch.cu_seqlens[s]} * width,
                            rows.begin() + int64_t{batch.cu_seqlens[s + 1]} * width);
}

// The output the family's head produces: sequence logits, token logits or embeddings.
inline uint32_t HeadOutput(const ModelConfig& config) {
  switch (config.head) {
    case HeadKind::kSequenceClassification:
      return kSequenceLogits;
    case HeadKind::kTokenClassification:
      return kTokenLogits;
    case HeadKind::kEncoderOnly:
      return kEmbeddings;
  }
  return 0;
}

}  // namespace dflash::test
