#include "engine/cpu/cpu_engine.h"

#include <cmath>
#include <fstream>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cpu/disentangled_attention.h"
#include "engine/cpu/elementwise.h"
#include "engine/cpu/gemm.h"
#include "engine/encoder_prelude.h"

namespace dflash {
namespace {

int64_t FloatBytes(const std::vector<float>& values) {
  return static_cast<int64_t>(values.size() * sizeof(float));
}

int64_t LinearBytes(const Linear& linear) {
  return FloatBytes(linear.weight.values) + FloatBytes(linear.bias);
}

struct HostMemory {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
};

// MemTotal and MemAvailable of /proc/meminfo (kB there); zeros where it cannot be read.
HostMemory ReadHostMemory() {
  HostMemory memory;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kilobytes = 0;
  std::string unit;
  while (meminfo >> key >> kilobytes >> unit) {
    if (key == "MemTotal:") memory.total_bytes = kilobytes * 1024;
    if (key == "MemAvailable:") memory.available_bytes = kilobytes * 1024;
  }
  return memory;
}

}  // namespace

CpuEngine::CpuEngine(Checkpoint checkpoint, int blas_threads)
    : config_(std::move(checkpoint.config)),
      weights_(std::move(checkpoint.weights)),
      blas_threads_(blas_threads) {}

absl::StatusOr<std::unique_ptr<CpuEngine>> CpuEngine::Create(Checkpoint checkpoint,
                                                             const Options& options) {
  const int threads = cpu::SetBlasThreads(options.blas_threads);
  std::unique_ptr<CpuEngine> engine(new CpuEngine(std::move(checkpoint), threads));
  const ModelConfig& config = engine->config_;
  ModelWeights& weights = engine->weights_;

  const float scale_denominator = std::sqrt(static_cast<float>(config.attention_head_size) *
                                            static_cast<float>(config.ScaleFactor()));
  engine->scale_ = 1.0f / scale_denominator;

  if (config.relative_attention) engine->index_.emplace(config);
  engine->plans_ = BuildEncoderPrelude(config, weights);

  // ConvLayer weight [H_out, H/groups, kernel] regrouped once as taps[q] = W[:, :, q]
  // ([H_out, H/groups] each, contiguous for the BLAS); the original layout is not used again.
  if (config.has_conv()) {
    const int64_t h = config.hidden_size;
    const int64_t kernel = config.conv_kernel_size;
    const int64_t group_width = h / config.conv_groups;
    engine->conv_taps_.resize(static_cast<size_t>(kernel * h * group_width));
    for (int64_t o = 0; o < h; ++o) {
      for (int64_t ch = 0; ch < group_width; ++ch) {
        for (int64_t q = 0; q < kernel; ++q) {
          engine->conv_taps_[static_cast<size_t>((q * h + o) * group_width + ch)] =
              weights.conv_weight.values[static_cast<size_t>((o * group_width + ch) * kernel + q)];
        }
      }
    }
    weights.conv_weight = DenseTensor{};
  }
  return engine;
}

EngineInfo CpuEngine::Info() const {
  EngineInfo info;
  info.backend = "cpu";
  info.device = absl::StrCat("host CPU, ", blas_threads_, " BLAS thread(s), ",
                             std::thread::hardware_concurrency(), " core(s)");
  info.dtype = "float32";
  int64_t bytes = FloatBytes(weights_.word_embeddings.values) +
                  FloatBytes(weights_.position_embeddings.values) +
                  FloatBytes(weights_.token_type_embeddings.values) +
                  FloatBytes(weights_.embed_proj.values) + FloatBytes(conv_taps_) +
                  LinearBytes(weights_.pooler) + LinearBytes(weights_.classifier);
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    const EncoderLayerWeights& layer = weights_.layers[l];
    bytes += LinearBytes(plans_[l].qkv) + FloatBytes(plans_[l].pos_key) +
             FloatBytes(plans_[l].pos_query) + LinearBytes(layer.attention_output) +
             LinearBytes(layer.intermediate) + LinearBytes(layer.output);
  }
  info.weight_bytes = bytes;
  // The CPU engine's device is the host: its memory feeds the same gauges as a GPU's.
  const HostMemory memory = ReadHostMemory();
  info.device_total_bytes = memory.total_bytes;
  info.device_free_bytes = memory.available_bytes;
  return info;
}

int64_t CpuEngine::FreeDeviceBytes() const { return ReadHostMemory().available_bytes; }

void CpuEngine::Embed(const PackedBatch& batch, std::vector<float>& hidden) const {
  const int64_t tokens = batch.total_tokens();
  const int64_t width = config_.embedding_size;
  std::vector<float> sum(static_cast<size_t>(tokens * width));
  for (int s = 0; s < batch.num_sequences(); ++s) {
    for (int32_t t = batch.cu_seqlens[s]; t < batch.cu_seqlens[s + 1]; ++t) {
      float* row = sum.data() + int64_t{t} * width;
      const float* word = weights_.word_embeddings.data() + int64_t{batch.token_ids[t]} * width;
      std::copy(word, word + width, row);
      if (config_.position_biased_input) {
        // Positions restart at 0 in every sequence, as each row of a padded HF batch does.
        const float* position =
            weights_.position_embeddings.data() + int64_t{t - batch.cu_seqlens[s]} * width;
        for (int64_t c = 0; c < width; ++c) row[c] += position[c];
      }
      if (config_.type_vocab_size > 0) {
        const int32_t type = batch.token_type_ids.empty() ? 0 : batch.token_type_ids[t];
        const float* type_row = weights_.token_type_embeddings.data() + int64_t{type} * width;
        for (int64_t c = 0; c < width; ++c) row[c] += type_row[c];
      }
    }
  }
  const int64_t hidden_size = config_.hidden_size;
  if (config_.embedding_size != config_.hidden_size) {
    hidden.resize(static_cast<size_t>(tokens * hidden_size));
    cpu::LinearRows(sum.data(), width, tokens, weights_.embed_proj.data(), nullptr, width,
                    hidden_size, hidden.data(), hidden_size);
  } else {
    hidden = std::move(sum);
  }
  cpu::AddLayerNorm(hidden.data(), nullptr, tokens, hidden_size, weights_.embedding_norm,
                    config_.layer_norm_eps);
}

void CpuEngine::EncoderLayer(int layer, const PackedBatch& batch, std::vector<float>& hidden,
                             std::vector<float>& scratch) const {
  const EncoderLayerPrelude& plan = plans_[static_cast<size_t>(layer)];
  const EncoderLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const int64_t tokens = batch.total_tokens();
  const int64_t hidden_size = config_.hidden_size;
  const int64_t all_head = config_.all_head_size();
  const int64_t intermediate = config_.intermediate_size;

  // qkv: [T, 3*nh*d].
  std::vector<float> qkv(static_cast<size_t>(tokens * 3 * all_head));
  cpu::LinearRows(hidden.data(), hidden_size, tokens, plan.qkv.weight.data(), plan.qkv.bias.data(),
                  hidden_size, 3 * all_head, qkv.data(), 3 * all_head);
  // context: [T, nh*d].
  std::vector<float> context(static_cast<size_t>(tokens * all_head));
  cpu::DisentangledAttentionArgs args;
  args.num_heads = config_.num_attention_heads;
  args.head_dim = config_.attention_head_size;
  args.q = qkv.data();
  args.k = qkv.data() + all_head;
  args.v = qkv.data() + 2 * all_head;
  args.ld_q = args.ld_k = args.ld_v = 3 * all_head;
  args.pos_key = plan.pos_key.empty() ? nullptr : plan.pos_key.data();
  args.pos_query = plan.pos_query.empty() ? nullptr : plan.pos_query.data();
  args.ld_pos = all_head;
  args.index = index_ ? &*index_ : nullptr;
  args.scale = scale_;
  args.cu_seqlens = batch.cu_seqlens.data();
  args.num_sequences = batch.num_sequences();
  args.out = context.data();
  args.ld_out = all_head;
  cpu::DisentangledAttention(args);

  // attention = LN(context * Wo^T + bo + hidden): [T, H].
  std::vector<float> attention(static_cast<size_t>(tokens * hidden_size));
  cpu::LinearRows(context.data(), all_head, tokens, w.attention_output.weight.data(),
                  w.attention_output.bias.data(), all_head, hidden_size, attention.data(),
                  hidden_size);
  cpu::AddLayerNorm(attention.data(), hidden.data(), tokens, hidden_size, w.attention_norm,
                    config_.layer_norm_eps);
  // hidden = LN(act(attention * Wi^T + bi) * Wout^T + bout + attention).
  scratch.resize(static_cast<size_t>(tokens * intermediate));
  cpu::LinearRows(attention.data(), hidden_size, tokens, w.intermediate.weight.data(),
                  w.intermediate.bias.data(), hidden_size, intermediate, scratch.data(),
                  intermediate);
  cpu::Activate(config_.hidden_act, scratch.data(), tokens * intermediate);
  cpu::LinearRows(scratch.data(), intermediate, tokens, w.output.weight.data(),
                  w.output.bias.data(), intermediate, hidden_size, hidden.data(), hidden_size);
  cpu::AddLayerNorm(hidden.data(), attention.data(), tokens, hidden_size, w.output_norm,
                    config_.layer_norm_eps);
}

void CpuEngine::Convolution(const PackedBatch& batch, const std::vector<float>& embeddings,
                            std::vector<float>& hidden) const {
  // c[t, o] = b[o] + sum_{ch, q} W[o, ch, q] * E0[t + q - pad, g(o) * Cg + ch], zero outside the
  // sequence; hidden <- LN(hidden + act(c)). E0 is the embedding output
  // (docs/deberta.md#convlayer).
  const int64_t tokens = batch.total_tokens();
  const int64_t h = config_.hidden_size;
  const int64_t kernel = config_.conv_kernel_size;
  const int64_t pad = (kernel - 1) / 2;
  const int64_t groups = config_.conv_groups;
  const int64_t group_width = h / groups;
  std::vector<float> conv(static_cast<size_t>(tokens * h));
  for (int64_t t = 0; t < tokens; ++t) {
    std::copy(weights_.conv_bias.begin(), weights_.conv_bias.end(), conv.begin() + t * h);
  }
  for (int s = 0; s < batch.num_sequences(); ++s) {
    const int64_t base = batch.cu_seqlens[s];
    const int64_t length = batch.sequence_length(s);
    for (int64_t q = 0; q < kernel; ++q) {
      const int64_t first = std::max<int64_t>(0, pad - q);
      const int64_t last = std::min<int64_t>(length, length + pad - q);
      if (first >= last) continue;
      for (int64_t g = 0; g < groups; ++g) {
        cpu::Gemm(last - first, group_width, group_width, 1.0f,
                  {embeddings.data() + (base + first + q - pad) * h + g * group_width, h, false},
                  {conv_taps_.data() + (q * h + g * group_width) * group_width, group_width, true},
                  1.0f, conv.data() + (base + first) * h + g * group_width, h);
      }
    }
  }
  cpu::Activate(config_.conv_act, conv.data(), tokens * h);
  cpu::AddLayerNorm(hidden.data(), conv.data(), tokens, h, weights_.conv_norm,
                    config_.layer_norm_eps);
}

absl::StatusOr<BatchOutput> CpuEngine::Run(const PackedBatch& batch, const RunOptions& options) {
  DFLASH_RETURN_IF_ERROR(ValidatePackedBatch(batch, options, config_));
  const int64_t tokens = batch.total_tokens();
  const int64_t h = config_.hidden_size;
  const int sequences = batch.num_sequences();

  std::vector<float> hidden;
  Embed(batch, hidden);
  std::vector<float> embeddings;
  if (config_.has_conv()) embeddings = hidden;
  std::vector<float> scratch;
  for (int layer = 0; layer < config_.num_hidden_layers; ++layer) {
    EncoderLayer(layer, batch, hidden, scratch);
    if (layer == 0 && config_.has_conv()) Convolution(batch, embeddings, hidden);
  }

  BatchOutput output;
  output.num_sequences = sequences;
  output.total_tokens = static_cast<int>(tokens);
  output.num_labels = config_.num_labels();
  output.hidden_size = static_cast<int>(h);
  const int64_t labels = config_.num_labels();
  if (options.outputs & kSequenceLogits) {
    // ContextPooler on the first token of each sequence, then the classifier.
    std::vector<float> first(static_cast<size_t>(sequences * h));
    for (int s = 0; s < sequences; ++s) {
      std::copy_n(hidden.begin() + int64_t{batch.cu_seqlens[s]} * h, h, first.begin() + s * h);
    }
    std::vector<float> pooled(first.size());
    cpu::LinearRows(first.data(), h, sequences, weights_.pooler.weight.data(),
                    weights_.pooler.bias.data(), h, h, pooled.data(), h);
    cpu::Activate(config_.pooler_hidden_act, pooled.data(), sequences * h);
    output.sequence_logits.resize(static_cast<size_t>(sequences * labels));
    cpu::LinearRows(pooled.data(), h, sequences, weights_.classifier.weight.data(),
                    weights_.classifier.bias.data(), h, labels, output.sequence_logits.data(),
                    labels);
  }
  if (options.outputs & kTokenLogits) {
    output.token_logits.resize(static_cast<size_t>(tokens * labels));
    cpu::LinearRows(hidden.data(), h, tokens, weights_.classifier.weight.data(),
                    weights_.classifier.bias.data(), h, labels, output.token_logits.data(), labels);
  }
  if (options.outputs & kEmbeddings) {
    output.embeddings.assign(static_cast<size_t>(sequences * h), 0.0f);
    for (int s = 0; s < sequences; ++s) {
      float* pooled = output.embeddings.data() + int64_t{s} * h;
      const float* rows = hidden.data() + int64_t{batch.cu_seqlens[s]} * h;
      if (options.pooling == PoolingMode::kCls) {
        std::copy_n(rows, h, pooled);
      } else {
        const int64_t length = batch.sequence_length(s);
        std::vector<double> sum(static_cast<size_t>(h), 0.0);
        for (int64_t t = 0; t < length; ++t) {
          for (int64_t c = 0; c < h; ++c) sum[static_cast<size_t>(c)] += rows[t * h + c];
        }
        for (int64_t c = 0; c < h; ++c) {
          pooled[c] = static_cast<float>(sum[static_cast<size_t>(c)] / static_cast<double>(length));
        }
      }
      if (options.normalize) cpu::L2Normalize(pooled, h);
    }
  }
  if (options.outputs & kHiddenStates) output.hidden_states = std::move(hidden);
  return output;
}

}  // namespace dflash
