// engine/cpu: the float32 CPU engine on tiny checkpoints, and the disentangled attention kernel
// against an independent double-precision implementation of docs/deberta.md#disentangled-attention.
#include "engine/cpu/cpu_engine.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/disentangled_attention.h"
#include "engine/model/checkpoint.h"
#include "engine/model/relative_position.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tiny_checkpoint.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
using test::TinyTensor;
using ::testing::HasSubstr;
using Doubles = std::vector<double>;

// ||a - b||_2 / ||b||_2.
template <typename A, typename B>
double RelativeL2(const A& a, const B& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double delta = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    diff += delta * delta;
    norm += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-300);
}

std::vector<int32_t> RandomIds(int length, uint32_t seed, int vocab = 50) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(length));
  for (int32_t& value : ids) value = id(generator);
  return ids;
}

// ---------------------------------------------------------------------------------------------
// The independent reference (double precision), written from docs/deberta.md#forward-pass.

// idx(delta) = clamp(bucket(delta) + k, 0, 2k - 1) with bucket from docs/deberta.md#log-buckets in
// double.
int64_t ReferenceIndex(int64_t delta, int position_buckets, int max_relative_positions, int span) {
  int64_t bucket = delta;
  if (position_buckets > 0) {
    const int64_t mid = position_buckets / 2;
    const int64_t magnitude = delta < 0 ? -delta : delta;
    if (magnitude > mid) {
      const double log_position =
          std::ceil(std::log(static_cast<double>(magnitude) / mid) /
                    std::log(static_cast<double>(max_relative_positions - 1) / mid) *
                    static_cast<double>(mid - 1)) +
          static_cast<double>(mid);
      bucket = (delta < 0 ? -1 : 1) * static_cast<int64_t>(log_position);
    }
  }
  return std::clamp<int64_t>(bucket + span, 0, 2 * int64_t{span} - 1);
}

// One sequence of L tokens, heads of width d: q, k, v [L, nh*d]; pos_key / pos_query [2k, nh*d]
// or empty. S[i,j] = (Q_i.K_j + Q_i.PosK[idx(i-j)] + K_j.PosQ[idx(i-j)]) * scale,
// P = softmax_j S, O_i = sum_j P[i,j] V_j.
Doubles ReferenceAttention(const Doubles& q, const Doubles& k, const Doubles& v,
                           const Doubles& pos_key, const Doubles& pos_query, int64_t length,
                           int heads, int d, const std::function<int64_t(int64_t)>& idx,
                           double scale) {
  const int64_t width = int64_t{heads} * d;
  Doubles out(static_cast<size_t>(length * width), 0.0);
  auto dot = [&](const Doubles& a, int64_t row_a, const Doubles& b, int64_t row_b, int h) {
    double sum = 0.0;
    for (int t = 0; t < d; ++t) {
      sum += a[static_cast<size_t>(row_a * width + h * d + t)] *
             b[static_cast<size_t>(row_b * width + h * d + t)];
    }
    return sum;
  };
  std::vector<double> scores(static_cast<size_t>(length));
  for (int h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < length; ++i) {
      double max = -INFINITY;
      for (int64_t j = 0; j < length; ++j) {
        double s = dot(q, i, k, j, h);
        if (!pos_key.empty()) s += dot(q, i, pos_key, idx(i - j), h);
        if (!pos_query.empty()) s += dot(k, j, pos_query, idx(i - j), h);
        scores[static_cast<size_t>(j)] = s * scale;
        max = std::max(max, s * scale);
      }
      double total = 0.0;
      for (double& s : scores) {
        s = std::exp(s - max);
        total += s;
      }
      for (int64_t j = 0; j < length; ++j) {
        const double p = scores[static_cast<size_t>(j)] / total;
        for (int t = 0; t < d; ++t) {
          out[static_cast<size_t>(i * width + h * d + t)] +=
              p * v[static_cast<size_t>(j * width + h * d + t)];
        }
      }
    }
  }
  return out;
}

// A float32 checkpoint's tensors in double, by canonical name.
class ReferenceModel {
 public:
  ReferenceModel(ModelConfig config, const std::vector<TinyTensor>& tensors)
      : config_(std::move(config)) {
    for (const TinyTensor& tensor : tensors) {
      tensors_[tensor.name] = Doubles(tensor.values.begin(), tensor.values.end());
    }
  }

  // Hidden states [L, H] of one sequence run alone.
  Doubles Forward(const std::vector<int32_t>& ids, const std::vector<int32_t>& types) const {
    const int64_t length = static_cast<int64_t>(ids.size());
    const int64_t h = config_.hidden_size;
    const int64_t e = config_.embedding_size;
    Doubles x(static_cast<size_t>(length * e));
    for (int64_t t = 0; t < length; ++t) {
      for (int64_t c = 0; c < e; ++c) {
        double value = T("embeddings.word_embeddings.weight")[static_cast<size_t>(ids[t] * e + c)];
        if (config_.position_biased_input) {
          value += T("embeddings.position_embeddings.weight")[static_cast<size_t>(t * e + c)];
        }
        if (config_.type_vocab_size > 0) {
          const int64_t type = types.empty() ? 0 : types[static_cast<size_t>(t)];
          value += T("embeddings.token_type_embeddings.weight")[static_cast<size_t>(type * e + c)];
        }
        x[static_cast<size_t>(t * e + c)] = value;
      }
    }
    if (e != h) x = Linear(x, length, "embeddings.embed_proj", h, e, /*bias=*/false);
    LayerNorm(x, length, "embeddings.LayerNorm");
    const Doubles embeddings = x;

    const int span = config_.AttentionSpan();
    Doubles relative = T("encoder.rel_embeddings.weight");
    if (config_.norm_rel_embeddings) LayerNorm(relative, 2 * span, "encoder.LayerNorm");
    const int heads = config_.num_attention_heads;
    const int d = config_.attention_head_size;
    const int64_t all = config_.all_head_size();
    const double scale = 1.0 / std::sqrt(static_cast<double>(d) * config_.ScaleFactor());
    auto idx = [&](int64_t delta) {
      return ReferenceIndex(delta, config_.position_buckets,
                            config_.EffectiveMaxRelativePositions(), span);
    };
    for (int layer = 0; layer < config_.num_hidden_layers; ++layer) {
      const std::string self = absl::StrCat("encoder.layer.", layer, ".attention.self.");
      const Doubles q = Linear(x, length, self + "query_proj", all, h);
      const Doubles k = Linear(x, length, self + "key_proj", all, h);
      const Doubles v = Linear(x, length, self + "value_proj", all, h);
      Doubles pos_key;
      Doubles pos_query;
      if (config_.c2p) {
        pos_key = Linear(relative, 2 * span,
                         self + (config_.share_att_key ? "key_proj" : "pos_key_proj"), all, h);
      }
      if (config_.p2c) {
        pos_query =
            Linear(relative, 2 * span,
                   self + (config_.share_att_key ? "query_proj" : "pos_query_proj"), all, h);
      }
      const Doubles context =
          ReferenceAttention(q, k, v, pos_key, pos_query, length, heads, d, idx, scale);
      const std::string prefix = absl::StrCat("encoder.layer.", layer, ".");
      Doubles attention = Linear(context, length, prefix + "attention.output.dense", h, all);
      for (size_t i = 0; i < attention.size(); ++i) attention[i] += x[i];
      LayerNorm(attention, length, prefix + "attention.output.LayerNorm");
      Doubles inner =
          Linear(attention, length, prefix + "intermediate.dense", config_.intermediate_size, h);
      for (double& value : inner) value = Activate(config_.hidden_act, value);
      x = Linear(inner, length, prefix + "output.dense", h, config_.intermediate_size);
      for (size_t i = 0; i < x.size(); ++i) x[i] += attention[i];
      LayerNorm(x, length, prefix + "output.LayerNorm");
      if (layer == 0 && config_.has_conv()) {
        // c[t,o] = b[o] + sum_{ch,q} W[o,ch,q] E0[t+q-pad, g(o)*Cg + ch]; y = LN(x + act(c)).
        const int64_t kernel = config_.conv_kernel_size;
        const int64_t pad = (kernel - 1) / 2;
        const int64_t group_width = h / config_.conv_groups;
        const Doubles& w = T("encoder.conv.conv.weight");
        for (int64_t t = 0; t < length; ++t) {
          for (int64_t o = 0; o < h; ++o) {
            double c = T("encoder.conv.conv.bias")[static_cast<size_t>(o)];
            const int64_t group = o / group_width;
            for (int64_t ch = 0; ch < group_width; ++ch) {
              for (int64_t tap = 0; tap < kernel; ++tap) {
                const int64_t source = t + tap - pad;
                if (source < 0 || source >= length) continue;
                c += w[static_cast<size_t>((o * group_width + ch) * kernel + tap)] *
                     embeddings[static_cast<size_t>(source * h + group * group_width + ch)];
              }
            }
            x[static_cast<size_t>(t * h + o)] += Activate(config_.conv_act, c);
          }
        }
        LayerNorm(x, length, "encoder.conv.LayerNorm");
      }
    }
    return x;
  }

  // ContextPooler + classifier on the first row of `hidden`.
  Doubles SequenceLogits(const Doubles& hidden) const {
    const int64_t h = config_.hidden_size;
    Doubles first(hidden.begin(), hidden.begin() + h);
    Doubles pooled = Linear(first, 1, "pooler.dense", h, h);
    for (double& value : pooled) value = Activate(config_.pooler_hidden_act, value);
    return Linear(pooled, 1, "classifier", config_.num_labels(), h);
  }

  Doubles TokenLogits(const Doubles& hidden, int64_t rows) const {
    return Linear(hidden, rows, "classifier", config_.num_labels(), config_.hidden_size);
  }

 private:
  const Doubles& T(const std::string& name) const {
    const auto it = tensors_.find(name);
    EXPECT_NE(it, tensors_.end()) << name;
    static const Doubles kEmpty;
    return it == tensors_.end() ? kEmpty : it->second;
  }

  // y[rows, out] = x[rows, in] W^T + b.
  Doubles Linear(const Doubles& x, int64_t rows, const std::string& prefix, int64_t out, int64_t in,
                 bool bias = true) const {
    const Doubles& w = T(prefix + ".weight");
    Doubles y(static_cast<size_t>(rows * out));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double sum = bias ? T(prefix + ".bias")[static_cast<size_t>(o)] : 0.0;
        for (int64_t i = 0; i < in; ++i) {
          sum += x[static_cast<size_t>(r * in + i)] * w[static_cast<size_t>(o * in + i)];
        }
        y[static_cast<size_t>(r * out + o)] = sum;
      }
    }
    return y;
  }

  void LayerNorm(Doubles& x, int64_t rows, const std::string& prefix) const {
    const int64_t cols = config_.hidden_size;
    const Doubles& gamma = T(prefix + ".weight");
    const Doubles& beta = T(prefix + ".bias");
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0.0;
      for (int64_t c = 0; c < cols; ++c) mean += x[static_cast<size_t>(r * cols + c)];
      mean /= static_cast<double>(cols);
      double variance = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double centered = x[static_cast<size_t>(r * cols + c)] - mean;
        variance += centered * centered;
      }
      variance /= static_cast<double>(cols);
      for (int64_t c = 0; c < cols; ++c) {
        double& value = x[static_cast<size_t>(r * cols + c)];
        value = (value - mean) / std::sqrt(variance + config_.layer_norm_eps) *
                    gamma[static_cast<size_t>(c)] +
                beta[static_cast<size_t>(c)];
      }
    }
  }

  static double Activate(Activation activation, double x) {
    switch (activation) {
      case Activation::kGeluErf:
        return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
      case Activation::kTanh:
        return std::tanh(x);
      default:
        ADD_FAILURE() << "activation not covered by the reference";
        return x;
    }
  }

  ModelConfig config_;
  std::map<std::string, Doubles> tensors_;
};

// ---------------------------------------------------------------------------------------------
// The engine on tiny checkpoints.

class CpuEngineTest : public ::testing::Test {
 protected:
  struct Loaded {
    std::unique_ptr<CpuEngine> engine;
    std::vector<TinyTensor> tensors;
    ModelConfig config;
  };

  Loaded Make(const nlohmann::json& json, uint32_t seed = 1,
              const test::TinyWriteOptions& options = {}) {
    const fs::path directory = dir_.path() / absl::StrCat("model", count_++);
    fs::create_directory(directory);
    Loaded loaded;
    absl::StatusOr<std::vector<TinyTensor>> tensors =
        test::WriteTinyCheckpoint(directory, json, options, seed);
    EXPECT_TRUE(tensors.ok()) << tensors.status();
    if (!tensors.ok()) return loaded;
    loaded.tensors = *std::move(tensors);
    absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(directory);
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    if (!checkpoint.ok()) return loaded;
    loaded.config = checkpoint->config;
    absl::StatusOr<std::unique_ptr<CpuEngine>> engine =
        CpuEngine::Create(*std::move(checkpoint), CpuEngine::Options{});
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (engine.ok()) loaded.engine = *std::move(engine);
    return loaded;
  }

  static PackedBatch Batch(const std::vector<std::vector<int32_t>>& sequences) {
    PackedBatch batch;
    for (const auto& ids : sequences) batch.Append(ids);
    return batch;
  }

  static std::vector<std::vector<int32_t>> ThreeSequences() {
    return {RandomIds(5, 11), RandomIds(17, 12), RandomIds(40, 13)};
  }

  test::ScopedTempDir dir_;
  int count_ = 0;
};

RunOptions Outputs(uint32_t outputs, PoolingMode pooling = PoolingMode::kMean,
                   bool normalize = false) {
  RunOptions options;
  options.outputs = outputs;
  options.pooling = pooling;
  options.normalize = normalize;
  return options;
}

TEST_F(CpuEngineTest, RejectsInvalidBatches) {
  Loaded loaded = Make(test::TinyConfigJson());
  ASSERT_NE(loaded.engine, nullptr);
  CpuEngine& engine = *loaded.engine;

  absl::StatusOr<BatchOutput> output = engine.Run(PackedBatch{}, RunOptions{});
  EXPECT_EQ(output.status().code(), absl::StatusCode::kInvalidArgument);

  PackedBatch batch = Batch({{1, 2, 50}});
  output = engine.Run(batch, RunOptions{});
  EXPECT_EQ(output.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(output.status().message(), HasSubstr("sequence 0 has id 50 at token 2"));

  batch = Batch({{1, 2, 3}});
  batch.max_seqlen = 2;
  EXPECT_EQ(engine.Run(batch, RunOptions{}).status().code(), absl::StatusCode::kInvalidArgument);

  batch = Batch({{1, 2, 3}});
  batch.cu_seqlens = {0, 2};
  EXPECT_EQ(engine.Run(batch, RunOptions{}).status().code(), absl::StatusCode::kInvalidArgument);

  batch = Batch({{1, 2, 3}});
  output = engine.Run(batch, Outputs(kTokenLogits));
  EXPECT_EQ(output.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine.Run(batch, Outputs(0)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CpuEngineTest, OutputsHaveTheDocumentedSizes) {
  Loaded loaded = Make(test::TinyConfigJson());
  ASSERT_NE(loaded.engine, nullptr);
  const PackedBatch batch = Batch(ThreeSequences());
  absl::StatusOr<BatchOutput> output =
      loaded.engine->Run(batch, Outputs(kSequenceLogits | kEmbeddings | kHiddenStates));
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_EQ(output->num_sequences, 3);
  EXPECT_EQ(output->total_tokens, 62);
  EXPECT_EQ(output->num_labels, 2);
  EXPECT_EQ(output->hidden_size, 8);
  EXPECT_EQ(output->sequence_logits.size(), 3u * 2);
  EXPECT_EQ(output->embeddings.size(), 3u * 8);
  EXPECT_EQ(output->hidden_states.size(), 62u * 8);
  EXPECT_TRUE(output->token_logits.empty());
  for (const float value : output->hidden_states) ASSERT_TRUE(std::isfinite(value));

  output = loaded.engine->Run(batch, Outputs(kSequenceLogits));
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_EQ(output->sequence_logits.size(), 6u);
  EXPECT_TRUE(output->embeddings.empty());
  EXPECT_TRUE(output->hidden_states.empty());

  nlohmann::json token = test::TinyConfigJson();
  token["architectures"] = {"DebertaV2ForTokenClassification"};
  token["id2label"] = {{"0", "O"}, {"1", "B-PER"}, {"2", "I-PER"}};
  token.erase("label2id");
  Loaded tagger = Make(token);
  ASSERT_NE(tagger.engine, nullptr);
  output = tagger.engine->Run(batch, Outputs(kTokenLogits | kEmbeddings));
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_EQ(output->num_labels, 3);
  EXPECT_EQ(output->token_logits.size(), 62u * 3);
  EXPECT_EQ(output->embeddings.size(), 3u * 8);
  EXPECT_TRUE(output->sequence_logits.empty());
  EXPECT_TRUE(output->hidden_states.empty());
}

TEST_F(CpuEngineTest, InfoDescribesTheEngine) {
  Loaded loaded = Make(test::TinyConfigJson());
  ASSERT_NE(loaded.engine, nullptr);
  const EngineInfo info = loaded.engine->Info();
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_EQ(info.dtype, "float32");
  EXPECT_FALSE(info.device.empty());
  // word 50x8; fused QKV 24x8 + 24; PosK and PosQ 8x8 each; attention output 8x8 + 8;
  // intermediate 16x8 + 16; output 8x16 + 8; pooler 8x8 + 8; classifier 2x8 + 2.
  const int64_t floats = 400 + 216 + 128 + 72 + 144 + 136 + 72 + 18;
  EXPECT_EQ(info.weight_bytes, floats * 4);
  EXPECT_EQ(loaded.engine->config().hidden_size, 8);
}

TEST_F(CpuEngineTest, EachSequenceIsIndependentOfItsBatch) {
  Loaded loaded = Make(test::TinyConfigJson());
  ASSERT_NE(loaded.engine, nullptr);
  const auto sequences = ThreeSequences();
  const RunOptions options = Outputs(kSequenceLogits | kHiddenStates | kEmbeddings);
  absl::StatusOr<BatchOutput> together = loaded.engine->Run(Batch(sequences), options);
  ASSERT_TRUE(together.ok()) << together.status();
  int64_t offset = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    absl::StatusOr<BatchOutput> alone = loaded.engine->Run(Batch({sequences[s]}), options);
    ASSERT_TRUE(alone.ok()) << alone.status();
    const int64_t rows = static_cast<int64_t>(sequences[s].size());
    const std::vector<float> slice(together->hidden_states.begin() + offset * 8,
                                   together->hidden_states.begin() + (offset + rows) * 8);
    EXPECT_LE(RelativeL2(slice, alone->hidden_states), 1e-6) << "sequence " << s;
    const std::vector<float> logits(together->sequence_logits.begin() + 2 * s,
                                    together->sequence_logits.begin() + 2 * s + 2);
    EXPECT_LE(RelativeL2(logits, alone->sequence_logits), 1e-6) << "sequence " << s;
    const std::vector<float> embedding(together->embeddings.begin() + 8 * s,
                                       together->embeddings.begin() + 8 * s + 8);
    EXPECT_LE(RelativeL2(embedding, alone->embeddings), 1e-6) << "sequence " << s;
    offset += rows;
  }
  // The order of the sequences in the batch does not matter either.
  absl::StatusOr<BatchOutput> reversed =
      loaded.engine->Run(Batch({sequences[2], sequences[1], sequences[0]}), options);
  ASSERT_TRUE(reversed.ok());
  for (int s = 0; s < 3; ++s) {
    for (int c = 0; c < 2; ++c) {
      EXPECT_NEAR(reversed->sequence_logits[static_cast<size_t>(2 * (2 - s) + c)],
                  together->sequence_logits[static_cast<size_t>(2 * s + c)], 1e-5);
    }
  }
}

TEST_F(CpuEngineTest, ClsPoolingIsTheFirstHiddenState) {
  Loaded loaded = Make(test::TinyConfigJson());
  ASSERT_NE(loaded.engine, nullptr);
  const PackedBatch batch = Batch(ThreeSequences());
  absl::StatusOr<BatchOutput> output =
      loaded.engine->Run(batch, Outputs(kEmbeddings | kHiddenStates, PoolingMode::kCls, false));
  ASSERT_TRUE(output.ok()) << output.status();
  for (int s = 0; s < 3; ++s) {
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(output->embeddings[static_cast<size_t>(s * 8 + c)],
                output->hidden_states[static_cast<size_t>(batch.cu_seqlens[s] * 8 + c)])
          << s << "," << c;
    }
  }
}

TEST_F(CpuEngineTest, MeanPoolingIsTheMeanOfTheSequence) {
  Loaded loaded = Make(test::TinyConfigJson());
  ASSERT_NE(loaded.engine, nullptr);
  const PackedBatch batch = Batch(ThreeSequences());
  absl::StatusOr<BatchOutput> output =
      loaded.engine->Run(batch, Outputs(kEmbeddings | kHiddenStates, PoolingMode::kMean, false));
  ASSERT_TRUE(output.ok()) << output.status();
  for (int s = 0; s < 3; ++s) {
    Doubles mean(8, 0.0);
    for (int t = batch.cu_seqlens[s]; t < batch.cu_seqlens[s + 1]; ++t) {
      for (int c = 0; c < 8; ++c) mean[c] += output->hidden_states[static_cast<size_t>(t * 8 + c)];
    }
    for (double& value : mean) value /= batch.sequence_length(s);
    const std::vector<float> pooled(output->embeddings.begin() + s * 8,
                                    output->embeddings.begin() + s * 8 + 8);
    EXPECT_LE(RelativeL2(pooled, mean), 1e-6) << s;
  }
}

TEST_F(CpuEngineTest, NormalizeGivesUnitLength) {
  Loaded loaded = Make(test::TinyConfigJson());
  ASSERT_NE(loaded.engine, nullptr);
  const PackedBatch batch = Batch(ThreeSequences());
  for (const PoolingMode pooling : {PoolingMode::kMean, PoolingMode::kCls}) {
    absl::StatusOr<BatchOutput> raw = loaded.engine->Run(batch, Outputs(kEmbeddings, pooling));
    absl::StatusOr<BatchOutput> unit =
        loaded.engine->Run(batch, Outputs(kEmbeddings, pooling, true));
    ASSERT_TRUE(raw.ok() && unit.ok());
    for (int s = 0; s < 3; ++s) {
      double norm = 0.0;
      double raw_norm = 0.0;
      for (int c = 0; c < 8; ++c) {
        norm += std::pow(unit->embeddings[static_cast<size_t>(s * 8 + c)], 2);
        raw_norm += std::pow(raw->embeddings[static_cast<size_t>(s * 8 + c)], 2);
      }
      EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-6) << s;
      raw_norm = std::sqrt(raw_norm);
      EXPECT_GT(std::abs(raw_norm - 1.0), 1e-3) << "the test needs non-unit raw embeddings";
      for (int c = 0; c < 8; ++c) {
        EXPECT_NEAR(unit->embeddings[static_cast<size_t>(s * 8 + c)],
                    raw->embeddings[static_cast<size_t>(s * 8 + c)] / raw_norm, 1e-6);
      }
    }
  }
}

TEST_F(CpuEngineTest, RunsAreBitwiseDeterministic) {
  Loaded loaded = Make(test::TinyConfigJson());
  ASSERT_NE(loaded.engine, nullptr);
  const PackedBatch batch = Batch(ThreeSequences());
  const RunOptions options = Outputs(kSequenceLogits | kEmbeddings | kHiddenStates);
  absl::StatusOr<BatchOutput> first = loaded.engine->Run(batch, options);
  ASSERT_TRUE(first.ok());
  for (int run = 0; run < 3; ++run) {
    absl::StatusOr<BatchOutput> again = loaded.engine->Run(batch, options);
    ASSERT_TRUE(again.ok());
    ASSERT_EQ(again->hidden_states.size(), first->hidden_states.size());
    EXPECT_EQ(std::memcmp(again->hidden_states.data(), first->hidden_states.data(),
                          first->hidden_states.size() * sizeof(float)),
              0);
    EXPECT_EQ(std::memcmp(again->sequence_logits.data(), first->sequence_logits.data(),
                          first->sequence_logits.size() * sizeof(float)),
              0);
    EXPECT_EQ(std::memcmp(again->embeddings.data(), first->embeddings.data(),
                          first->embeddings.size() * sizeof(float)),
              0);
  }
}

TEST_F(CpuEngineTest, PytorchBinCheckpointGivesTheSafetensorsOutputsBitForBit) {
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    Loaded safetensors = Make(test::TinyConfigJson(), 1, {.dtype = dtype});
    Loaded bin = Make(test::TinyConfigJson(), 1, {.dtype = dtype, .pytorch_bin = true});
    ASSERT_NE(safetensors.engine, nullptr);
    ASSERT_NE(bin.engine, nullptr);
    const PackedBatch batch = Batch(ThreeSequences());
    const RunOptions options = Outputs(kSequenceLogits | kEmbeddings | kHiddenStates);
    absl::StatusOr<BatchOutput> expected = safetensors.engine->Run(batch, options);
    absl::StatusOr<BatchOutput> actual = bin.engine->Run(batch, options);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_TRUE(actual.ok()) << actual.status();
    for (const auto member :
         {&BatchOutput::hidden_states, &BatchOutput::sequence_logits, &BatchOutput::embeddings}) {
      const std::vector<float>& a = *actual.*member;
      const std::vector<float>& e = *expected.*member;
      ASSERT_EQ(a.size(), e.size());
      ASSERT_FALSE(e.empty());
      EXPECT_EQ(std::memcmp(a.data(), e.data(), e.size() * sizeof(float)), 0) << DTypeName(dtype);
    }
  }
}

// The whole forward against the double-precision reference, per sequence.
void ExpectMatchesReference(CpuEngine& engine, const ModelConfig& config,
                            const std::vector<TinyTensor>& tensors,
                            const std::vector<std::vector<int32_t>>& sequences,
                            const std::vector<std::vector<int32_t>>& types = {}) {
  PackedBatch batch;
  for (size_t s = 0; s < sequences.size(); ++s) {
    batch.Append(sequences[s], types.empty() ? std::vector<int32_t>{} : types[s]);
  }
  uint32_t outputs = kHiddenStates;
  if (config.head == HeadKind::kSequenceClassification) outputs |= kSequenceLogits;
  if (config.head == HeadKind::kTokenClassification) outputs |= kTokenLogits;
  absl::StatusOr<BatchOutput> output = engine.Run(batch, Outputs(outputs));
  ASSERT_TRUE(output.ok()) << output.status();
  const ReferenceModel reference(config, tensors);
  const int64_t h = config.hidden_size;
  const int64_t labels = config.num_labels();
  for (size_t s = 0; s < sequences.size(); ++s) {
    const Doubles expected =
        reference.Forward(sequences[s], types.empty() ? std::vector<int32_t>{} : types[s]);
    const int64_t begin = batch.cu_seqlens[s];
    const int64_t rows = batch.sequence_length(static_cast<int>(s));
    const std::vector<float> actual(output->hidden_states.begin() + begin * h,
                                    output->hidden_states.begin() + (begin + rows) * h);
    EXPECT_LE(RelativeL2(actual, expected), 1e-5) << "hidden states of sequence " << s;
    if (config.head == HeadKind::kSequenceClassification) {
      const std::vector<float> logits(output->sequence_logits.begin() + s * labels,
                                      output->sequence_logits.begin() + (s + 1) * labels);
      EXPECT_LE(RelativeL2(logits, reference.SequenceLogits(expected)), 1e-5)
          << "logits of sequence " << s;
    }
    if (config.head == HeadKind::kTokenClassification) {
      const std::vector<float> logits(output->token_logits.begin() + begin * labels,
                                      output->token_logits.begin() + (begin + rows) * labels);
      EXPECT_LE(RelativeL2(logits, reference.TokenLogits(expected, rows)), 1e-5)
          << "token logits of sequence " << s;
    }
  }
}

TEST_F(CpuEngineTest, V3StyleForwardMatchesTheDoubleReference) {
  Loaded loaded = Make(test::TinyConfigJson());
  ASSERT_NE(loaded.engine, nullptr);
  ExpectMatchesReference(*loaded.engine, loaded.config, loaded.tensors, ThreeSequences());
}

TEST_F(CpuEngineTest, TwoLayerTokenClassifierMatchesTheDoubleReference) {
  nlohmann::json json = test::TinyConfigJson();
  json.update({{"architectures", {"DebertaV2ForTokenClassification"}},
               {"num_hidden_layers", 2},
               {"pos_att_type", "c2p"}});
  Loaded loaded = Make(json, 7);
  ASSERT_NE(loaded.engine, nullptr);
  ExpectMatchesReference(*loaded.engine, loaded.config, loaded.tensors, ThreeSequences());
}

TEST_F(CpuEngineTest, LegacyForwardWithConvMatchesTheDoubleReference) {
  // Absolute positions, token types, an embedding projection, unshared position projections,
  // no buckets and a grouped ConvLayer with gelu.
  nlohmann::json json = test::TinyConfigJson();
  json.update({{"position_biased_input", true},
               {"max_position_embeddings", 64},
               {"type_vocab_size", 2},
               {"embedding_size", 6},
               {"share_att_key", false},
               {"position_buckets", -1},
               {"max_relative_positions", 6},
               {"norm_rel_ebd", "none"},
               {"conv_kernel_size", 3},
               {"conv_groups", 2},
               {"conv_act", "gelu"},
               {"num_hidden_layers", 2}});
  Loaded loaded = Make(json, 3);
  ASSERT_NE(loaded.engine, nullptr);
  const auto sequences = ThreeSequences();
  std::vector<std::vector<int32_t>> types;
  for (const auto& ids : sequences) {
    std::vector<int32_t> type(ids.size(), 0);
    std::fill(type.begin() + static_cast<int64_t>(type.size()) / 2, type.end(), 1);
    types.push_back(type);
  }
  ExpectMatchesReference(*loaded.engine, loaded.config, loaded.tensors, sequences, types);
}

// ---------------------------------------------------------------------------------------------
// cpu::DisentangledAttention against the reference on random inputs.

struct AttentionCase {
  std::string label;
  int position_buckets;  // -1: no buckets.
  int max_relative_positions;
  bool c2p;
  bool p2c;
  std::vector<int32_t> lengths = {5, 40};
};

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.label; }

class DisentangledAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(DisentangledAttentionTest, MatchesTheDoubleReference) {
  const AttentionCase& c = GetParam();
  constexpr int kHeads = 2;
  constexpr int kDim = 8;
  constexpr int64_t kWidth = kHeads * kDim;
  constexpr int kSpan = 4;
  ModelConfig config;
  config.relative_attention = true;
  config.position_buckets = c.position_buckets;
  config.max_relative_positions = c.max_relative_positions;
  ASSERT_EQ(config.AttentionSpan(), kSpan);
  const RelativePositionIndex index(config);
  auto idx = [&](int64_t delta) {
    return ReferenceIndex(delta, c.position_buckets, c.max_relative_positions, kSpan);
  };
  for (int64_t delta = -300; delta <= 300; ++delta) ASSERT_EQ(index(delta), idx(delta)) << delta;

  std::vector<int32_t> cu_seqlens = {0};
  for (const int32_t length : c.lengths) cu_seqlens.push_back(cu_seqlens.back() + length);
  const int64_t tokens = cu_seqlens.back();

  // Q, K and V interleaved in one [T, 3*W + 5] buffer, PosK / PosQ with a padded row stride, and
  // an output with a padded stride whose extra columns must stay untouched.
  std::mt19937 generator(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t ld_qkv = 3 * kWidth + 5;
  const int64_t ld_pos = kWidth + 3;
  const int64_t ld_out = kWidth + 4;
  std::vector<float> qkv(static_cast<size_t>(tokens * ld_qkv));
  for (float& value : qkv) value = normal(generator);
  std::vector<float> pos_key(static_cast<size_t>(2 * kSpan * ld_pos));
  std::vector<float> pos_query(pos_key.size());
  for (float& value : pos_key) value = normal(generator);
  for (float& value : pos_query) value = normal(generator);
  std::vector<float> out(static_cast<size_t>(tokens * ld_out), 7.0f);

  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim * (1 + c.c2p + c.p2c)));
  cpu::DisentangledAttentionArgs args;
  args.num_heads = kHeads;
  args.head_dim = kDim;
  args.q = qkv.data();
  args.k = qkv.data() + kWidth;
  args.v = qkv.data() + 2 * kWidth;
  args.ld_q = args.ld_k = args.ld_v = ld_qkv;
  args.pos_key = c.c2p ? pos_key.data() : nullptr;
  args.pos_query = c.p2c ? pos_query.data() : nullptr;
  args.ld_pos = ld_pos;
  args.index = &index;
  args.scale = scale;
  args.cu_seqlens = cu_seqlens.data();
  args.num_sequences = static_cast<int>(c.lengths.size());
  args.out = out.data();
  args.ld_out = ld_out;
  cpu::DisentangledAttention(args);

  auto dense = [](const std::vector<float>& source, int64_t first, int64_t rows, int64_t ld,
                  int64_t column) {
    Doubles result(static_cast<size_t>(rows * kWidth));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t col = 0; col < kWidth; ++col) {
        result[static_cast<size_t>(r * kWidth + col)] =
            source[static_cast<size_t>((first + r) * ld + column + col)];
      }
    }
    return result;
  };
  const Doubles pk = c.c2p ? dense(pos_key, 0, 2 * kSpan, ld_pos, 0) : Doubles{};
  const Doubles pq = c.p2c ? dense(pos_query, 0, 2 * kSpan, ld_pos, 0) : Doubles{};
  for (size_t s = 0; s < c.lengths.size(); ++s) {
    const int64_t first = cu_seqlens[s];
    const int64_t length = c.lengths[s];
    const Doubles expected = ReferenceAttention(
        dense(qkv, first, length, ld_qkv, 0), dense(qkv, first, length, ld_qkv, kWidth),
        dense(qkv, first, length, ld_qkv, 2 * kWidth), pk, pq, length, kHeads, kDim, idx,
        static_cast<double>(scale));
    const Doubles actual = dense(out, first, length, ld_out, 0);
    EXPECT_LE(RelativeL2(actual, expected), 1e-5) << "sequence " << s;
  }
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t col = kWidth; col < ld_out; ++col) {
      ASSERT_EQ(out[static_cast<size_t>(t * ld_out + col)], 7.0f) << t << "," << col;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DisentangledAttentionTest,
    ::testing::Values(AttentionCase{"buckets_both", 4, 16, true, true},
                      AttentionCase{"buckets_c2p", 4, 16, true, false},
                      AttentionCase{"buckets_p2c", 4, 16, false, true},
                      AttentionCase{"no_buckets_both", -1, 4, true, true},
                      AttentionCase{"no_buckets_c2p", -1, 4, true, false},
                      AttentionCase{"no_buckets_p2c", -1, 4, false, true},
                      AttentionCase{"no_position_terms", -1, 4, false, false},
                      AttentionCase{"buckets_long_blocks", 4, 16, true, true, {3, 200, 1}}),
    [](const ::testing::TestParamInfo<AttentionCase>& param_info) {
      return param_info.param.label;
    });

}  // namespace
}  // namespace dflash
