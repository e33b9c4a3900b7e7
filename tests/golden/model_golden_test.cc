// The CPU engine against Hugging Face transformers 5.17 on the golden families
// (make_model_goldens.py): hidden states and logits in float32 within 1e-5 relative L2, and
// every sequence's output independent of the batch it is packed into.
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "engine/cpu/cpu_engine.h"
#include "engine/model/checkpoint.h"
#include "engine/model/relative_position.h"
#include "engine/model/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/golden/golden_family.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;

constexpr double kFloat32Tolerance = 1e-5;

using test::GoldenReference;
using test::RelativeL2;

// One golden family: its checkpoint in a CPU engine, its reference outputs, and its inputs as a
// packed batch.
class GoldenFamily {
 protected:
  void Load(const std::string& family) {
    const fs::path dir = test::kGoldenModels / family;
    absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    absl::StatusOr<std::unique_ptr<CpuEngine>> engine =
        CpuEngine::Create(*std::move(checkpoint), CpuEngine::Options{});
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    ASSERT_NO_FATAL_FAILURE(test::LoadGoldenInputs(family, reference_, batch_));
  }

  uint32_t HeadOutput() const { return test::HeadOutput(engine_->config()); }

  std::unique_ptr<CpuEngine> engine_;
  GoldenReference reference_;
  PackedBatch batch_;
};

class ModelGoldenTest : public GoldenFamily, public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Load(GetParam())); }
};

class EncoderGoldenTest : public GoldenFamily, public testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Load("encoder_only")); }
};

TEST_P(ModelGoldenTest, HiddenStatesAndLogitsMatchTransformers) {
  RunOptions options;
  options.outputs = kHiddenStates | HeadOutput();
  absl::StatusOr<BatchOutput> output = engine_->Run(batch_, options);
  ASSERT_TRUE(output.ok()) << output.status();

  const int64_t hidden = engine_->config().hidden_size;
  const std::vector<float> expected_hidden = reference_.Floats("hidden_states");
  ASSERT_EQ(output->hidden_states.size(), expected_hidden.size());
  double worst_hidden = 0.0;
  for (int s = 0; s < batch_.num_sequences(); ++s) {
    const double error = RelativeL2(output->hidden_states, expected_hidden, hidden,
                                    batch_.cu_seqlens[s], batch_.cu_seqlens[s + 1]);
    EXPECT_LE(error, kFloat32Tolerance)
        << "sequence " << s << " of length " << batch_.sequence_length(s);
    worst_hidden = std::max(worst_hidden, error);
  }
  std::cout << "[golden] " << GetParam() << ": worst per-sequence relative L2, hidden states "
            << worst_hidden;

  const int64_t labels = engine_->config().num_labels();
  if (options.outputs & kSequenceLogits) {
    const std::vector<float> expected = reference_.Floats("sequence_logits");
    const std::vector<float> expected64 = reference_.Floats("sequence_logits_fp64");
    ASSERT_EQ(output->sequence_logits.size(), expected.size());
    const double error =
        RelativeL2(output->sequence_logits, expected, labels, 0, batch_.num_sequences());
    const double error64 =
        RelativeL2(output->sequence_logits, expected64, labels, 0, batch_.num_sequences());
    EXPECT_LE(error, kFloat32Tolerance);
    std::cout << "; logits vs HF fp32 " << error << ", vs HF fp64 " << error64;
  }
  if (options.outputs & kTokenLogits) {
    const std::vector<float> expected = reference_.Floats("token_logits");
    ASSERT_EQ(output->token_logits.size(), expected.size());
    const double error =
        RelativeL2(output->token_logits, expected, labels, 0, batch_.total_tokens());
    EXPECT_LE(error, kFloat32Tolerance);
    std::cout << "; token logits vs HF fp32 " << error;
  }
  std::cout << "\n";
}

TEST_F(EncoderGoldenTest, EmbeddingsMatchPooledTransformersHiddenStates) {
  const int64_t hidden = engine_->config().hidden_size;
  const int sequences = batch_.num_sequences();
  for (const test::EmbeddingReference& c : test::kEmbeddingReferences) {
    RunOptions options;
    options.outputs = kEmbeddings;
    options.pooling = c.pooling;
    options.normalize = c.normalize;
    absl::StatusOr<BatchOutput> output = engine_->Run(batch_, options);
    ASSERT_TRUE(output.ok()) << output.status();
    const std::vector<float> expected = reference_.Floats(c.tensor);
    ASSERT_EQ(output->embeddings.size(), expected.size());
    EXPECT_LE(RelativeL2(output->embeddings, expected, hidden, 0, sequences), kFloat32Tolerance)
        << c.tensor;
  }
}

TEST_P(ModelGoldenTest, SequenceOutputDoesNotDependOnBatchMates) {
  RunOptions options;
  options.outputs = kHiddenStates;
  absl::StatusOr<BatchOutput> packed = engine_->Run(batch_, options);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const int64_t hidden = engine_->config().hidden_size;
  for (int s = 0; s < batch_.num_sequences(); ++s) {
    const PackedBatch alone = test::SequenceAlone(batch_, s);
    absl::StatusOr<BatchOutput> single = engine_->Run(alone, options);
    ASSERT_TRUE(single.ok()) << single.status();
    const std::vector<float> packed_rows =
        test::SequenceRows(packed->hidden_states, batch_, s, hidden);
    // The same arithmetic on the same rows: only BLAS blocking may differ.
    EXPECT_LE(RelativeL2(single->hidden_states, packed_rows, hidden, 0, alone.total_tokens()), 1e-6)
        << "sequence " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ModelGoldenTest, testing::ValuesIn(test::kGoldenFamilies),
                         [](const testing::TestParamInfo<std::string>& family) {
                           return family.param;
                         });

TEST(LogBucketGoldenTest, MatchesTransformersValueByValue) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(test::kGoldenModels / "log_buckets.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_FALSE((*file)->tensors().empty());
  for (const TensorInfo& table : (*file)->tensors()) {
    int buckets = 0;
    int max_position = 0;
    ASSERT_EQ(std::sscanf(table.name.c_str(), "buckets_%d_max_%d", &buckets, &max_position), 2)
        << table.name;
    absl::StatusOr<std::vector<int64_t>> expected = (*file)->ReadInt64(table);
    ASSERT_TRUE(expected.ok()) << expected.status();
    int mismatches = 0;
    for (size_t i = 0; i < expected->size(); ++i) {
      const int64_t delta = static_cast<int64_t>(i) - 4096;
      if (LogBucketPosition(delta, buckets, max_position) != (*expected)[i] && ++mismatches < 5) {
        ADD_FAILURE() << table.name << " delta " << delta << ": ours "
                      << LogBucketPosition(delta, buckets, max_position) << ", transformers "
                      << (*expected)[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << table.name;
  }
}

}  // namespace
}  // namespace dflash
