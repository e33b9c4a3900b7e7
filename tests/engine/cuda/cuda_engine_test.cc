// The CUDA engine against transformers' reference outputs and the CPU engine (itself within 1e-5
// of transformers) on the golden families, in float32 (<= 1e-4 relative L2), float16 and
// bfloat16; long and mixed batches; batch invariance; capacity and input errors; no device
// allocation while serving; two GPUs when present. GPU cases skip with a message without a GPU.
#include "engine/cuda/cuda_engine.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/golden/golden_family.h"
#include "tests/kernels/cuda_test_support.h"

namespace dflash {
namespace {

using cuda::CudaEngine;
using kernels::DataType;
using test::GoldenReference;
using test::RelativeL2;

constexpr double kFloat32Tolerance = 1e-4;

// Measured relative L2 against float32 on the golden families is below these by a margin of
// about 3x (see the test output); a wrong kernel is off by O(1).
double HalfTolerance(DataType dtype) { return dtype == DataType::kBFloat16 ? 3e-2 : 4e-3; }

using test::Name;

Checkpoint LoadFamily(const std::string& family) {
  absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(test::kGoldenModels / family);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  return checkpoint.ok() ? *std::move(checkpoint) : Checkpoint{};
}

std::unique_ptr<CudaEngine> MakeCudaEngine(const std::string& family, DataType dtype,
                                           int64_t max_batch_tokens = 16384, int device = 0,
                                           bool allow_tf32 = false) {
  CudaEngine::Options options;
  options.dtype = dtype;
  options.allow_tf32 = allow_tf32;
  options.max_batch_tokens = max_batch_tokens;
  options.device = device;
  absl::StatusOr<std::unique_ptr<CudaEngine>> engine =
      CudaEngine::Create(LoadFamily(family), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

std::unique_ptr<CpuEngine> MakeCpuEngine(const std::string& family) {
  absl::StatusOr<std::unique_ptr<CpuEngine>> engine =
      CpuEngine::Create(LoadFamily(family), CpuEngine::Options{});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

bool AllFinite(const std::vector<float>& values) {
  for (float v : values) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

// Random sequences of the given lengths ([CLS] ... [SEP]) over the model's vocabulary.
PackedBatch RandomBatch(const std::vector<int>& lengths, int vocab, uint32_t seed,
                        bool with_types = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(4, vocab - 1);
  PackedBatch batch;
  for (int length : lengths) {
    std::vector<int32_t> ids(static_cast<size_t>(length));
    std::vector<int32_t> types(static_cast<size_t>(length), 0);
    for (int t = 0; t < length; ++t) {
      ids[t] = id(rng);
      if (with_types && t >= length / 2) types[t] = 1;
    }
    ids.front() = 1;
    if (length > 1) ids.back() = 2;
    batch.Append(ids, with_types ? types : std::vector<int32_t>{});
  }
  return batch;
}

class CudaEngineGoldenTest : public testing::TestWithParam<std::tuple<std::string, DataType>> {
 protected:
  void SetUp() override {
    DFLASH_REQUIRE_GPU();
    ASSERT_NO_FATAL_FAILURE(test::LoadGoldenInputs(family(), reference_, batch_));
  }
  const std::string& family() const { return std::get<0>(GetParam()); }
  DataType dtype() const { return std::get<1>(GetParam()); }

  GoldenReference reference_;
  PackedBatch batch_;
};

TEST_P(CudaEngineGoldenTest, MatchesTransformersAndTheCpuEngine) {
  std::unique_ptr<CudaEngine> engine = MakeCudaEngine(family(), dtype());
  ASSERT_NE(engine, nullptr);
  std::unique_ptr<CpuEngine> cpu = MakeCpuEngine(family());
  ASSERT_NE(cpu, nullptr);
  const ModelConfig& config = engine->config();
  RunOptions options;
  options.outputs = kHiddenStates | test::HeadOutput(config);
  absl::StatusOr<BatchOutput> output = engine->Run(batch_, options);
  ASSERT_TRUE(output.ok()) << output.status();
  absl::StatusOr<BatchOutput> expected = cpu->Run(batch_, options);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_TRUE(AllFinite(output->hidden_states));

  const double tolerance =
      dtype() == DataType::kFloat32 ? kFloat32Tolerance : HalfTolerance(dtype());
  const int64_t hidden = config.hidden_size;
  const std::vector<float> hf_hidden = reference_.Floats("hidden_states");
  ASSERT_EQ(output->hidden_states.size(), hf_hidden.size());
  double worst_hidden = 0.0;
  for (int s = 0; s < batch_.num_sequences(); ++s) {
    const double error = RelativeL2(output->hidden_states, hf_hidden, hidden, batch_.cu_seqlens[s],
                                    batch_.cu_seqlens[s + 1]);
    EXPECT_LE(error, tolerance) << "sequence " << s << " of length " << batch_.sequence_length(s);
    worst_hidden = std::max(worst_hidden, error);
  }
  const double vs_cpu =
      RelativeL2(output->hidden_states, expected->hidden_states, hidden, 0, batch_.total_tokens());
  EXPECT_LE(vs_cpu, tolerance);
  std::cout << "[cuda-golden] " << family() << " " << Name(dtype())
            << ": hidden states worst sequence vs HF " << worst_hidden << ", all vs CPU " << vs_cpu;
  const int64_t labels = config.num_labels();
  if (options.outputs & kSequenceLogits) {
    const std::vector<float> hf = reference_.Floats("sequence_logits");
    ASSERT_EQ(output->sequence_logits.size(), hf.size());
    const double error = RelativeL2(output->sequence_logits, hf, labels, 0, batch_.num_sequences());
    EXPECT_LE(error, tolerance);
    std::cout << "; logits vs HF " << error;
  }
  if (options.outputs & kTokenLogits) {
    const std::vector<float> hf = reference_.Floats("token_logits");
    ASSERT_EQ(output->token_logits.size(), hf.size());
    const double error = RelativeL2(output->token_logits, hf, labels, 0, batch_.total_tokens());
    EXPECT_LE(error, tolerance);
    std::cout << "; token logits vs HF " << error;
  }
  if (options.outputs & kEmbeddings) {
    ASSERT_EQ(output->embeddings.size(), expected->embeddings.size());
    const double error =
        RelativeL2(output->embeddings, expected->embeddings, hidden, 0, batch_.num_sequences());
    EXPECT_LE(error, tolerance);
    std::cout << "; embeddings vs CPU " << error;
  }
  std::cout << "\n";
}

TEST_P(CudaEngineGoldenTest, SequenceOutputDoesNotDependOnBatchMates) {
  std::unique_ptr<CudaEngine> engine = MakeCudaEngine(family(), dtype());
  ASSERT_NE(engine, nullptr);
  RunOptions options;
  options.outputs = kHiddenStates;
  absl::StatusOr<BatchOutput> packed = engine->Run(batch_, options);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const int64_t hidden = engine->config().hidden_size;
  // Alone, the GEMMs may pick another algorithm (another token-count bucket): rounding differs,
  // nothing else may.
  const double tolerance = dtype() == DataType::kFloat32 ? 1e-5 : HalfTolerance(dtype()) / 4;
  for (int s = 0; s < batch_.num_sequences(); ++s) {
    const PackedBatch alone = test::SequenceAlone(batch_, s);
    absl::StatusOr<BatchOutput> single = engine->Run(alone, options);
    ASSERT_TRUE(single.ok()) << single.status();
    const std::vector<float> rows = test::SequenceRows(packed->hidden_states, batch_, s, hidden);
    EXPECT_LE(RelativeL2(single->hidden_states, rows, hidden, 0, alone.total_tokens()), tolerance)
        << "sequence " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaEngineGoldenTest,
                         testing::Combine(testing::ValuesIn(test::kGoldenFamilies),
                                          testing::Values(DataType::kFloat32, DataType::kFloat16,
                                                          DataType::kBFloat16)),
                         [](const testing::TestParamInfo<std::tuple<std::string, DataType>>& p) {
                           return std::get<0>(p.param) + "_" + Name(std::get<1>(p.param));
                         });

TEST(CudaEngineTest, EmbeddingsMatchPooledTransformersHiddenStates) {
  DFLASH_REQUIRE_GPU();
  GoldenReference reference;
  PackedBatch batch;
  ASSERT_NO_FATAL_FAILURE(test::LoadGoldenInputs("encoder_only", reference, batch));
  std::unique_ptr<CudaEngine> engine = MakeCudaEngine("encoder_only", DataType::kFloat32);
  ASSERT_NE(engine, nullptr);
  for (const test::EmbeddingReference& c : test::kEmbeddingReferences) {
    RunOptions options;
    options.outputs = kEmbeddings;
    options.pooling = c.pooling;
    options.normalize = c.normalize;
    absl::StatusOr<BatchOutput> output = engine->Run(batch, options);
    ASSERT_TRUE(output.ok()) << output.status();
    const std::vector<float> expected = reference.Floats(c.tensor);
    ASSERT_EQ(output->embeddings.size(), expected.size());
    EXPECT_LE(RelativeL2(output->embeddings, expected, engine->config().hidden_size, 0,
                         batch.num_sequences()),
              kFloat32Tolerance)
        << c.tensor;
  }
}

// Lengths across the attention kernel's regimes (computed windows up to 1024, tables beyond, the
// saturated band of v3-like buckets), mixed in one batch, against the CPU engine.
TEST(CudaEngineTest, LongAndMixedLengthsMatchTheCpuEngine) {
  DFLASH_REQUIRE_GPU();
  for (const char* family : {"v3_like", "legacy", "v2_xlarge_like"}) {
    std::unique_ptr<CudaEngine> engine = MakeCudaEngine(family, DataType::kFloat32, 16384);
    ASSERT_NE(engine, nullptr);
    std::unique_ptr<CpuEngine> cpu = MakeCpuEngine(family);
    ASSERT_NE(cpu, nullptr);
    const ModelConfig& config = engine->config();
    std::vector<std::vector<int>> batches = {{1, 2, 63, 64, 65, 127, 255, 257, 511, 513, 1000},
                                             {4097}};
    // Absolute-position models stop at max_position_embeddings.
    if (config.position_biased_input) {
      batches = {{1, 2, 63, 64, 65, 127, config.max_position_embeddings}};
    } else {
      batches.push_back({8192});
    }
    for (const std::vector<int>& lengths : batches) {
      PackedBatch batch = RandomBatch(lengths, config.vocab_size, 7, config.type_vocab_size > 0);
      RunOptions options;
      options.outputs = kHiddenStates | test::HeadOutput(config);
      absl::StatusOr<BatchOutput> output = engine->Run(batch, options);
      ASSERT_TRUE(output.ok()) << output.status();
      absl::StatusOr<BatchOutput> expected = cpu->Run(batch, options);
      ASSERT_TRUE(expected.ok()) << expected.status();
      ASSERT_TRUE(AllFinite(output->hidden_states));
      for (int s = 0; s < batch.num_sequences(); ++s) {
        EXPECT_LE(RelativeL2(output->hidden_states, expected->hidden_states, config.hidden_size,
                             batch.cu_seqlens[s], batch.cu_seqlens[s + 1]),
                  kFloat32Tolerance)
            << family << ": sequence of length " << batch.sequence_length(s);
      }
      if (options.outputs & kSequenceLogits) {
        EXPECT_LE(RelativeL2(output->sequence_logits, expected->sequence_logits,
                             config.num_labels(), 0, batch.num_sequences()),
                  kFloat32Tolerance)
            << family;
      }
    }
  }
}

// A float32 engine with allow_tf32 (GEMMs and attention on TF32 tensor cores) against the CPU
// engine, over lengths that reach the attention's band and saturated tiles.
TEST(CudaEngineTest, Tf32EngineMatchesTheCpuEngine) {
  DFLASH_REQUIRE_GPU();
  std::unique_ptr<CudaEngine> engine = MakeCudaEngine("v3_like", DataType::kFloat32, 16384, 0,
                                                      /*allow_tf32=*/true);
  ASSERT_NE(engine, nullptr);
  std::unique_ptr<CpuEngine> cpu = MakeCpuEngine("v3_like");
  ASSERT_NE(cpu, nullptr);
  const ModelConfig& config = engine->config();
  PackedBatch batch = RandomBatch({1, 63, 65, 257, 513, 1000, 2048}, config.vocab_size, 5);
  RunOptions options;
  options.outputs = kHiddenStates;
  absl::StatusOr<BatchOutput> output = engine->Run(batch, options);
  ASSERT_TRUE(output.ok()) << output.status();
  absl::StatusOr<BatchOutput> expected = cpu->Run(batch, options);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(AllFinite(output->hidden_states));
  double worst = 0.0;
  for (int s = 0; s < batch.num_sequences(); ++s) {
    const double error =
        RelativeL2(output->hidden_states, expected->hidden_states, config.hidden_size,
                   batch.cu_seqlens[s], batch.cu_seqlens[s + 1]);
    // TF32 keeps 10 mantissa bits: fp16's resolution with float32's range.
    EXPECT_LE(error, HalfTolerance(DataType::kFloat16))
        << "sequence of length " << batch.sequence_length(s);
    worst = std::max(worst, error);
  }
  std::cout << "[cuda engine] v3_like float32 + TF32 vs CPU engine: worst rel L2 " << worst << "\n";
}

TEST(CudaEngineTest, RunsOneSequenceOf32768Tokens) {
  DFLASH_REQUIRE_GPU();
  std::unique_ptr<CudaEngine> engine = MakeCudaEngine("v3_like", DataType::kFloat16, 32768);
  ASSERT_NE(engine, nullptr);
  PackedBatch batch = RandomBatch({32768}, engine->config().vocab_size, 11);
  RunOptions options;
  options.outputs = kSequenceLogits | kHiddenStates;
  absl::StatusOr<BatchOutput> output = engine->Run(batch, options);
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_EQ(output->hidden_states.size(), size_t{32768} * engine->config().hidden_size);
  EXPECT_TRUE(AllFinite(output->hidden_states));
  EXPECT_TRUE(AllFinite(output->sequence_logits));
  // Its first 4096 tokens alone differ: attention sees the whole sequence.
  PackedBatch prefix;
  prefix.Append(std::vector<int32_t>(batch.token_ids.begin(), batch.token_ids.begin() + 4096));
  absl::StatusOr<BatchOutput> short_output = engine->Run(prefix, options);
  ASSERT_TRUE(short_output.ok()) << short_output.status();
  EXPECT_GT(RelativeL2(short_output->hidden_states, output->hidden_states,
                       engine->config().hidden_size, 0, 4096),
            1e-3);
}

// Small batches replay CUDA graphs captured per shape bucket: every batch of a bucket (other
// lengths, other sequence counts) must give what a direct run gives.
TEST(CudaEngineTest, GraphsMatchDirectRunsAcrossABucket) {
  DFLASH_REQUIRE_GPU();
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    CudaEngine::Options options;
    options.dtype = dtype;
    options.max_batch_tokens = 4096;
    absl::StatusOr<std::unique_ptr<CudaEngine>> graphed =
        CudaEngine::Create(LoadFamily("legacy"), options);
    options.graph_max_tokens = 0;
    absl::StatusOr<std::unique_ptr<CudaEngine>> direct =
        CudaEngine::Create(LoadFamily("legacy"), options);
    ASSERT_TRUE(graphed.ok()) << graphed.status();
    ASSERT_TRUE(direct.ok()) << direct.status();
    const ModelConfig& config = (*direct)->config();
    RunOptions run;
    run.outputs = kSequenceLogits | kHiddenStates | kEmbeddings;
    // Same bucket (<= 256 tokens, <= 4 sequences, longest <= 128), then others, then back.
    for (const std::vector<int>& lengths : std::vector<std::vector<int>>{{100},
                                                                         {7, 90},
                                                                         {1, 2, 120},
                                                                         {128},
                                                                         {150, 5},
                                                                         {1},
                                                                         {64, 64, 64},
                                                                         {33, 90},
                                                                         {10, 10, 10, 10, 23},
                                                                         {20, 20, 24}}) {
      const PackedBatch batch = RandomBatch(lengths, config.vocab_size, 17, true);
      const absl::Time start = absl::Now();
      absl::StatusOr<BatchOutput> a = (*graphed)->Run(batch, run);
      const absl::Duration graphed_wall = absl::Now() - start;
      absl::StatusOr<BatchOutput> b = (*direct)->Run(batch, run);
      const absl::Duration direct_wall = absl::Now() - start - graphed_wall;
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      // Both paths (a graph's first run is direct, later ones launch the graph) measure the
      // device's span, and it lies within Run.
      EXPECT_GT(a->device_seconds, 0);
      EXPECT_LE(a->device_seconds, absl::ToDoubleSeconds(graphed_wall));
      EXPECT_GT(b->device_seconds, 0);
      EXPECT_LE(b->device_seconds, absl::ToDoubleSeconds(direct_wall));
      ASSERT_EQ(a->hidden_states.size(), b->hidden_states.size());
      ASSERT_EQ(a->sequence_logits.size(), b->sequence_logits.size());
      ASSERT_EQ(a->embeddings.size(), b->embeddings.size());
      // Padding changes the GEMMs' row count, hence possibly their algorithm: rounding only.
      const double tolerance = dtype == DataType::kFloat32 ? 1e-5 : HalfTolerance(dtype) / 4;
      EXPECT_LE(RelativeL2(a->hidden_states, b->hidden_states, config.hidden_size, 0,
                           batch.total_tokens()),
                tolerance)
          << Name(dtype) << " batch of " << batch.num_sequences();
      EXPECT_LE(RelativeL2(a->sequence_logits, b->sequence_logits, config.num_labels(), 0,
                           batch.num_sequences()),
                tolerance);
      EXPECT_LE(
          RelativeL2(a->embeddings, b->embeddings, config.hidden_size, 0, batch.num_sequences()),
          tolerance);
    }
  }
}

TEST(CudaEngineTest, RefusesBatchesBeyondItsCapacityAndInvalidInput) {
  DFLASH_REQUIRE_GPU();
  std::unique_ptr<CudaEngine> engine = MakeCudaEngine("v3_like", DataType::kFloat16, 256);
  ASSERT_NE(engine, nullptr);
  RunOptions options;
  PackedBatch too_long = RandomBatch({200, 57}, engine->config().vocab_size, 3);
  absl::StatusOr<BatchOutput> output = engine->Run(too_long, options);
  EXPECT_EQ(output.status().code(), absl::StatusCode::kInvalidArgument) << output.status();
  EXPECT_NE(output.status().message().find("capacity"), std::string::npos) << output.status();

  PackedBatch bad_id = RandomBatch({10}, engine->config().vocab_size, 3);
  bad_id.token_ids[4] = engine->config().vocab_size;
  output = engine->Run(bad_id, options);
  EXPECT_EQ(output.status().code(), absl::StatusCode::kInvalidArgument) << output.status();

  // The engine is still fine afterwards.
  EXPECT_TRUE(engine->Health().ok());
  output = engine->Run(RandomBatch({200, 56}, engine->config().vocab_size, 3), options);
  EXPECT_TRUE(output.ok()) << output.status();
}

TEST(CudaEngineTest, AllocatesNothingWhileServing) {
  DFLASH_REQUIRE_GPU();
  std::unique_ptr<CudaEngine> engine = MakeCudaEngine("v2_xlarge_like", DataType::kFloat16, 4096);
  ASSERT_NE(engine, nullptr);
  RunOptions options;
  options.outputs = kSequenceLogits | kHiddenStates | kEmbeddings;
  // First use of each shape may initialise libraries; after one round nothing may change.
  const std::vector<std::vector<int>> shapes = {{1}, {5, 17, 300}, {4096}, {1000, 1000, 33}};
  for (const std::vector<int>& lengths : shapes) {
    absl::StatusOr<BatchOutput> output =
        engine->Run(RandomBatch(lengths, engine->config().vocab_size, 1), options);
    ASSERT_TRUE(output.ok()) << output.status();
  }
  size_t free_before = 0, total = 0;
  DFLASH_CUDA_OK(cudaMemGetInfo(&free_before, &total));
  for (int round = 0; round < 3; ++round) {
    for (const std::vector<int>& lengths : shapes) {
      absl::StatusOr<BatchOutput> output =
          engine->Run(RandomBatch(lengths, engine->config().vocab_size, round), options);
      ASSERT_TRUE(output.ok()) << output.status();
    }
  }
  size_t free_after = 0;
  DFLASH_CUDA_OK(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_before, free_after);
}

TEST(CudaEngineTest, InfoDescribesTheDeviceAndMemory) {
  DFLASH_REQUIRE_GPU();
  std::unique_ptr<CudaEngine> engine = MakeCudaEngine("v3_like", DataType::kBFloat16, 1024);
  ASSERT_NE(engine, nullptr);
  const EngineInfo info = engine->Info();
  EXPECT_EQ(info.backend, "cuda");
  EXPECT_EQ(info.dtype, "bfloat16");
  EXPECT_NE(info.device.find("CUDA device 0"), std::string::npos) << info.device;
  EXPECT_GT(info.weight_bytes, 0);
  EXPECT_GT(info.workspace_bytes, 0);
  EXPECT_GT(info.device_total_bytes, info.device_free_bytes);
  EXPECT_GT(info.device_free_bytes, 0);
}

TEST(CudaEngineTest, TwoDevicesComputeTheSameResults) {
  DFLASH_REQUIRE_GPU();
  int devices = 0;
  DFLASH_CUDA_OK(cudaGetDeviceCount(&devices));
  if (devices < 2) GTEST_SKIP() << "GPU test skipped: needs two CUDA devices, found " << devices;
  std::unique_ptr<CudaEngine> first = MakeCudaEngine("v3_like", DataType::kFloat16, 4096, 0);
  std::unique_ptr<CudaEngine> second = MakeCudaEngine("v3_like", DataType::kFloat16, 4096, 1);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second->Info().device.find("CUDA device 1"), std::string::npos);
  const PackedBatch batch = RandomBatch({3, 100, 700}, first->config().vocab_size, 5);
  RunOptions options;
  options.outputs = kHiddenStates | kSequenceLogits;
  absl::StatusOr<BatchOutput> a = first->Run(batch, options);
  absl::StatusOr<BatchOutput> b = second->Run(batch, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_LE(RelativeL2(b->hidden_states, a->hidden_states, first->config().hidden_size, 0,
                       batch.total_tokens()),
            1e-6);
}

// Refusals that need no GPU: what the kernels cannot compute is refused at creation.
TEST(CudaEngineTest, RefusesModelsTheKernelsCannotRun) {
  Checkpoint checkpoint = LoadFamily("v3_like");
  checkpoint.config.attention_head_size = 16;
  CudaEngine::Options options;
  absl::StatusOr<std::unique_ptr<CudaEngine>> engine =
      CudaEngine::Create(std::move(checkpoint), options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition) << engine.status();
  EXPECT_NE(engine.status().message().find("head sizes"), std::string::npos) << engine.status();

  checkpoint = LoadFamily("v3_like");
  checkpoint.config.hidden_act = Activation::kSilu;
  engine = CudaEngine::Create(std::move(checkpoint), options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition) << engine.status();
}

}  // namespace
}  // namespace dflash
