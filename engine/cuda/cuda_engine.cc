#include "engine/cuda/cuda_engine.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/attention/disentangled_attention.h"
#include "kernels/encoder/activation.h"
#include "kernels/encoder/convolution.h"
#include "kernels/encoder/embedding.h"
#include "kernels/encoder/layer_norm.h"
#include "kernels/encoder/pooling.h"

namespace dflash::cuda {
namespace {

constexpr size_t kBlasScratchBytes = size_t{32} << 20;  // cuBLAS(Lt)'s recommendation for sm_90.

absl::StatusOr<kernels::Activation> KernelActivation(Activation activation,
                                                     absl::string_view where) {
  switch (activation) {
    case Activation::kGeluErf:
      return kernels::Activation::kGeluErf;
    case Activation::kGeluTanh:
      return kernels::Activation::kGeluTanh;
    case Activation::kRelu:
      return kernels::Activation::kRelu;
    case Activation::kTanh:
      return kernels::Activation::kTanh;
    case Activation::kSilu:
    case Activation::kSigmoid:
      break;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("the CUDA engine has no kernel for the ", where,
                   " activation of this model (gelu, gelu_new, relu and tanh are supported); use "
                   "backend: cpu"));
}

absl::string_view DataTypeName(kernels::DataType dtype) {
  switch (dtype) {
    case kernels::DataType::kFloat16:
      return "float16";
    case kernels::DataType::kBFloat16:
      return "bfloat16";
    case kernels::DataType::kFloat32:
      break;
  }
  return "float32";
}

// Checks that the CUDA engine computes this model: what the kernels support.
absl::Status CheckSupported(const ModelConfig& config) {
  const int d = config.attention_head_size;
  if (d != 32 && d != 64 && d != 128) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the CUDA engine's attention supports head sizes 32, 64 and 128; this model has ", d,
        "; use backend: cpu"));
  }
  if (config.pooler_hidden_size != config.hidden_size && config.num_labels() > 0) {
    return absl::FailedPreconditionError(
        "the CUDA engine expects pooler_hidden_size == hidden_size; use backend: cpu");
  }
  return absl::OkStatus();
}

// Bytes of the results of one batch, float32, in the order Run copies them back.
struct ResultLayout {
  int64_t sequence_logits = 0, token_logits = 0, embeddings = 0, hidden_states = 0;
  int64_t total() const { return sequence_logits + token_logits + embeddings + hidden_states; }
};

ResultLayout LayoutResults(uint32_t outputs, int64_t tokens, int64_t sequences, int64_t labels,
                           int64_t hidden) {
  ResultLayout layout;
  if (outputs & kSequenceLogits) layout.sequence_logits = sequences * labels;
  if (outputs & kTokenLogits) layout.token_logits = tokens * labels;
  if (outputs & kEmbeddings) layout.embeddings = sequences * hidden;
  if (outputs & kHiddenStates) layout.hidden_states = tokens * hidden;
  return layout;
}

}  // namespace

CudaEngine::CudaEngine(ModelConfig config, const Options& options)
    : config_(std::move(config)), options_(options) {}

CudaEngine::~CudaEngine() {
  cudaSetDevice(options_.device);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  graphs_.clear();
  linear_.reset();
  if (blas_ != nullptr) cublasDestroy(blas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

size_t CudaEngine::element_bytes() const { return kernels::DataTypeBytes(options_.dtype); }

size_t CudaEngine::LayoutWorkspace(void* base) {
  const int64_t t = options_.max_batch_tokens;
  const int64_t s = options_.max_batch_sequences;
  const int64_t h = config_.hidden_size;
  const int64_t a = config_.all_head_size();
  const int64_t labels = std::max(config_.num_labels(), 1);
  const size_t e = element_bytes();
  ArenaLayout arena(base);
  Workspace& w = workspace_;
  w.hidden = arena.Take(t * h * e);
  w.attention = arena.Take(t * h * e);
  w.qkv = arena.Take(t * 3 * a * e);
  w.context = arena.Take(t * a * e);
  w.intermediate = arena.Take(t * config_.intermediate_size * e);
  if (config_.embedding_size != config_.hidden_size) {
    w.embedding_sum = arena.Take(t * config_.embedding_size * e);
  }
  if (config_.has_conv()) {
    w.conv_columns = arena.Take(t * config_.conv_kernel_size * h * e);
    w.conv_output = arena.Take(t * h * e);
  }
  w.first_tokens = arena.Take(s * h * e);
  w.pooled = arena.Take(s * h * e);
  w.logits = arena.Take(std::max(s, t) * labels * e);
  const ResultLayout all =
      LayoutResults(kSequenceLogits | kTokenLogits | kEmbeddings | kHiddenStates, t, s, labels, h);
  w.results_count = all.total();
  w.results = arena.Take<float>(w.results_count);
  w.inputs_count = 3 * t + s + 1;
  w.inputs = arena.Take<int32_t>(w.inputs_count);
  // The attention's C2P/P2C tables are largest for one sequence of every token. Of the tensors
  // only the presence of the position terms matters: any non-null pointer says "present", and
  // null Q / K / V with zero strides give the float32 (TF32) size its upper bound.
  kernels::AttentionProblem bound;
  bound.dtype = options_.dtype;
  bound.allow_tf32 = options_.allow_tf32;  // float32 tables for the TF32 kernel.
  bound.num_heads = config_.num_attention_heads;
  bound.head_dim = config_.attention_head_size;
  bound.pos_key = config_.relative_attention && config_.c2p ? this : nullptr;
  bound.pos_query = config_.relative_attention && config_.p2c ? this : nullptr;
  bound.num_sequences = 1;
  bound.max_seqlen = static_cast<int>(t);
  bound.total_tokens = static_cast<int>(t);
  if (index_) {
    bound.positions.band = index_->band();
    bound.positions.span = index_->span();
    bound.positions.host = index_->table().data();
    bound.positions.device = static_cast<const int32_t*>(model_.relative_index.data());
  }
  // Room for every variant, so autotuning can try them all and any profile entry fits.
  w.attention_scratch_bytes = kernels::AttentionMaxWorkspaceBytes(bound);
  w.attention_scratch = arena.Take(w.attention_scratch_bytes);
  w.blas_scratch_bytes = kBlasScratchBytes;
  w.blas_scratch = arena.Take(w.blas_scratch_bytes);
  return arena.used();
}

absl::StatusOr<std::unique_ptr<CudaEngine>> CudaEngine::Create(Checkpoint checkpoint,
                                                               const Options& options) {
  DFLASH_RETURN_IF_ERROR(CheckSupported(checkpoint.config));
  DFLASH_ASSIGN_OR_RETURN(const kernels::Activation hidden_act,
                          KernelActivation(checkpoint.config.hidden_act, "hidden"));
  DFLASH_ASSIGN_OR_RETURN(const kernels::Activation pooler_act,
                          KernelActivation(checkpoint.config.pooler_hidden_act, "pooler"));
  kernels::Activation conv_act = kernels::Activation::kIdentity;
  if (checkpoint.config.has_conv()) {
    DFLASH_ASSIGN_OR_RETURN(conv_act, KernelActivation(checkpoint.config.conv_act, "convolution"));
  }
  if (options.max_batch_tokens < 1) {
    return absl::InvalidArgumentError("the CUDA engine needs max_batch_tokens >= 1");
  }
  if (options.allow_tf32 && options.dtype != kernels::DataType::kFloat32) {
    return absl::InvalidArgumentError("allow_tf32 applies to float32 engines only");
  }
  int devices = 0;
  DFLASH_RETURN_IF_CUDA_ERROR(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (options.device < 0 || options.device >= devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA device ", options.device, " does not exist (this machine has ", devices, ")"));
  }
  DFLASH_RETURN_IF_CUDA_ERROR(cudaSetDevice(options.device), "cudaSetDevice");
  cudaDeviceProp properties{};
  DFLASH_RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&properties, options.device),
                              "cudaGetDeviceProperties");
  if (properties.major < 8) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", options.device, " (", properties.name, ", sm_", properties.major,
        properties.minor, ") is older than sm_80, which the kernels need"));
  }

  Options resolved = options;
  if (resolved.max_batch_sequences <= 0) {
    resolved.max_batch_sequences = static_cast<int>(options.max_batch_tokens);
  }
  std::unique_ptr<CudaEngine> engine(new CudaEngine(checkpoint.config, resolved));
  engine->hidden_act_ = hidden_act;
  engine->pooler_act_ = pooler_act;
  engine->conv_act_ = conv_act;
  engine->device_name_ =
      absl::StrFormat("CUDA device %d: %s (sm_%d%d, %d SMs)", options.device, properties.name,
                      properties.major, properties.minor, properties.multiProcessorCount);
  const ModelConfig& config = engine->config_;
  engine->scale_ = 1.0f / std::sqrt(static_cast<float>(config.attention_head_size) *
                                    static_cast<float>(config.ScaleFactor()));
  std::vector<int32_t> relative_index;
  if (config.relative_attention) {
    engine->index_.emplace(config);
    if (!engine->index_->settled()) {
      return absl::FailedPreconditionError(
          "this model's relative-position buckets do not settle within the attention kernel's "
          "band; use backend: cpu");
    }
    relative_index = engine->index_->table();
  }
  const std::vector<EncoderLayerPrelude> prelude = BuildEncoderPrelude(config, checkpoint.weights);
  DFLASH_ASSIGN_OR_RETURN(engine->model_, UploadModel(config, checkpoint.weights, prelude,
                                                      relative_index, options.dtype));
  checkpoint.weights = ModelWeights{};

  const size_t arena_bytes = engine->LayoutWorkspace(nullptr);
  DFLASH_ASSIGN_OR_RETURN(engine->arena_, DeviceBuffer::Allocate(arena_bytes));
  engine->LayoutWorkspace(engine->arena_.data());
  const int64_t t = resolved.max_batch_tokens;
  // The pinned staging mirrors the arena's input and result blocks.
  DFLASH_ASSIGN_OR_RETURN(engine->staging_in_,
                          PinnedBuffer::Allocate(static_cast<size_t>(
                              engine->workspace_.inputs_count * sizeof(int32_t))));
  DFLASH_ASSIGN_OR_RETURN(engine->staging_out_,
                          PinnedBuffer::Allocate(static_cast<size_t>(
                              engine->workspace_.results_count * sizeof(float))));
  DFLASH_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&engine->stream_, cudaStreamNonBlocking),
                              "cudaStreamCreate");
  // The attention's C2P/P2C table GEMMs. (The attention binds the handle to the stream, which
  // resets cuBLAS to the default workspace it allocated here.)
  DFLASH_RETURN_IF_ERROR(CublasStatus(cublasCreate(&engine->blas_), "cublasCreate"));
  tuning::AttentionTunerOptions tuning = options.tuning;
  tuning.device = options.device;
  DFLASH_ASSIGN_OR_RETURN(engine->tuner_, tuning::AttentionTuner::Create(tuning));
  DFLASH_ASSIGN_OR_RETURN(engine->span_, RunSpan::Create());
  DFLASH_ASSIGN_OR_RETURN(
      engine->linear_,
      LinearLayers::Create(
          engine->workspace_.blas_scratch, engine->workspace_.blas_scratch_bytes,
          {.allow_tf32 = options.allow_tf32, .timed_candidates = options.gemm_timed_candidates}));
  Log().info("{}: {} weights {:.1f} MiB, workspace {:.1f} MiB for {} tokens, attention tuning {}",
             engine->device_name_, DataTypeName(options.dtype), engine->model_.bytes() / 1048576.0,
             arena_bytes / 1048576.0, t, engine->tuner_->Describe());
  return engine;
}

absl::Status CudaEngine::Health() const { return health_; }

EngineInfo CudaEngine::Info() const {
  EngineInfo info;
  info.backend = "cuda";
  info.device = device_name_;
  info.dtype = std::string(DataTypeName(options_.dtype));
  info.weight_bytes = model_.bytes();
  info.tuning = tuner_->Describe();
  info.workspace_bytes =
      static_cast<int64_t>(arena_.bytes() + staging_in_.bytes() + staging_out_.bytes());
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(options_.device) == cudaSuccess &&
      cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    info.device_free_bytes = static_cast<int64_t>(free_bytes);
    info.device_total_bytes = static_cast<int64_t>(total_bytes);
  }
  return info;
}

int64_t CudaEngine::FreeDeviceBytes() const {
  // Called from other threads (metrics scrapes): their current device is restored.
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return -1;
  size_t free_bytes = 0, total_bytes = 0;
  const bool read = cudaSetDevice(options_.device) == cudaSuccess &&
                    cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
  cudaSetDevice(previous);
  return read ? static_cast<int64_t>(free_bytes) : -1;
}

absl::Status CudaEngine::Linear(const DeviceLinear& layer, const void* x, int64_t rows, void* y,
                                const void* residual) {
  LinearCall call;
  call.dtype = options_.dtype;
  call.m = rows;
  call.n = layer.out_features;
  call.k = layer.in_features;
  call.x = x;
  call.ldx = layer.in_features;
  call.w = layer.weight.data();
  call.ldw = layer.in_features;
  call.bias = layer.bias.data();
  call.residual = residual;
  call.ld_residual = layer.out_features;
  call.y = y;
  call.ldy = layer.out_features;
  Mark(StageTimer::kGemm);
  return linear_->Run(call, stream_);
}

absl::StatusOr<BatchOutput> CudaEngine::Run(const PackedBatch& batch, const RunOptions& options) {
  DFLASH_RETURN_IF_ERROR(health_);
  DFLASH_RETURN_IF_ERROR(ValidatePackedBatch(batch, options, config_));
  if (batch.total_tokens() > options_.max_batch_tokens ||
      batch.num_sequences() > options_.max_batch_sequences) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", batch.total_tokens(), " tokens in ", batch.num_sequences(),
                     " sequences exceeds the CUDA engine's capacity (", options_.max_batch_tokens,
                     " tokens, ", options_.max_batch_sequences, " sequences)"));
  }
  if (cudaError_t error = cudaSetDevice(options_.device); error != cudaSuccess) {
    return CudaStatus(error, "cudaSetDevice");
  }
  absl::StatusOr<BatchOutput> output = RunOnDevice(batch, options);
  if (!output.ok()) {
    // A launch or copy failure may have left the context broken; find out, and if so, stop.
    cudaError_t error = cudaStreamSynchronize(stream_);
    if (error == cudaSuccess) error = cudaGetLastError();
    if (IsStickyCudaError(error)) {
      health_ = absl::UnavailableError(
          absl::StrCat(device_name_, " failed and stopped serving: ", cudaGetErrorName(error), " (",
                       output.status().message(), ")"));
      Log().error("{}", health_.message());
    }
  }
  return output;
}

CudaEngine::StagedInputs CudaEngine::StageInputs(const PackedBatch& batch, const RunShape& shape,
                                                 bool graph) {
  // Ids, then token types and positions when the model reads them, then cu_seqlens: one pinned
  // block, one copy.
  StagingRules rules;
  rules.token_types = config_.type_vocab_size > 0 && (graph || !batch.token_type_ids.empty());
  rules.positions = config_.position_biased_input;
  rules.pad_token_id = config_.pad_token_id;
  const StagedLayout layout =
      StageBatch(batch, shape, rules, static_cast<int32_t*>(staging_in_.data()));
  auto device = [this](int64_t offset) {
    return offset < 0 ? nullptr : workspace_.inputs + offset;
  };
  StagedInputs in;
  in.token_ids = device(layout.token_ids);
  in.token_types = device(layout.token_types);
  in.positions = device(layout.positions);
  in.cu_seqlens = device(layout.cu_seqlens);
  in.count = layout.count;
  return in;
}

absl::Status CudaEngine::Enqueue(const RunShape& shape, const RunOptions& options,
                                 const StagedInputs& in) {
  const int64_t tokens = shape.tokens;
  const int sequences = shape.sequences;
  const int64_t h = config_.hidden_size;
  const int64_t labels = config_.num_labels();
  const int32_t* cu_seqlens = in.cu_seqlens;
  Mark(StageTimer::kOther);
  DFLASH_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(workspace_.inputs, staging_in_.data(),
                                              static_cast<size_t>(in.count) * sizeof(int32_t),
                                              cudaMemcpyHostToDevice, stream_),
                              "copying the batch to the device");
  DFLASH_RETURN_IF_ERROR(Encode(shape, cu_seqlens, in.token_ids, in.token_types, in.positions));

  // Heads, each into its place in the float32 results.
  const ResultLayout layout = LayoutResults(options.outputs, tokens, sequences, labels, h);
  float* results = workspace_.results;
  const kernels::DataType dtype = options_.dtype;
  if (options.outputs & kSequenceLogits) {
    // ContextPooler: act(W_p h[CLS] + b_p), then the classifier.
    Mark(StageTimer::kOther);
    DFLASH_RETURN_IF_CUDA_ERROR(
        kernels::GatherFirstTokens(dtype, workspace_.hidden, h, cu_seqlens, sequences,
                                   static_cast<int>(h), workspace_.first_tokens, stream_),
        "gathering first tokens");
    DFLASH_RETURN_IF_ERROR(
        Linear(model_.pooler, workspace_.first_tokens, sequences, workspace_.pooled));
    Mark(StageTimer::kOther);
    DFLASH_RETURN_IF_CUDA_ERROR(
        kernels::BiasActivation(dtype, workspace_.pooled, sequences, static_cast<int>(h), h,
                                nullptr, pooler_act_, stream_),
        "pooler activation");
    DFLASH_RETURN_IF_ERROR(
        Linear(model_.classifier, workspace_.pooled, sequences, workspace_.logits));
    Mark(StageTimer::kOther);
    DFLASH_RETURN_IF_CUDA_ERROR(
        kernels::ConvertToFloat(dtype, workspace_.logits, layout.sequence_logits, results, stream_),
        "converting logits");
    results += layout.sequence_logits;
  }
  if (options.outputs & kTokenLogits) {
    DFLASH_RETURN_IF_ERROR(Linear(model_.classifier, workspace_.hidden, tokens, workspace_.logits));
    Mark(StageTimer::kOther);
    DFLASH_RETURN_IF_CUDA_ERROR(
        kernels::ConvertToFloat(dtype, workspace_.logits, layout.token_logits, results, stream_),
        "converting token logits");
    results += layout.token_logits;
  }
  Mark(StageTimer::kOther);
  if (options.outputs & kEmbeddings) {
    DFLASH_RETURN_IF_CUDA_ERROR(
        kernels::PoolSequences(dtype, workspace_.hidden, h, cu_seqlens, sequences,
                               static_cast<int>(h),
                               options.pooling == PoolingMode::kCls ? kernels::Pooling::kFirstToken
                                                                    : kernels::Pooling::kMean,
                               options.normalize, results, stream_),
        "pooling embeddings");
    results += layout.embeddings;
  }
  if (options.outputs & kHiddenStates) {
    DFLASH_RETURN_IF_CUDA_ERROR(
        kernels::ConvertToFloat(dtype, workspace_.hidden, layout.hidden_states, results, stream_),
        "converting hidden states");
  }
  DFLASH_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(staging_out_.data(), workspace_.results,
                                              static_cast<size_t>(layout.total()) * sizeof(float),
                                              cudaMemcpyDeviceToHost, stream_),
                              "copying results to the host");
  return absl::OkStatus();
}

BatchOutput CudaEngine::Unpack(const PackedBatch& batch, const RunShape& ran,
                               const RunOptions& options) const {
  // `ran` may be `batch` followed by padding sequences: its results are laid out for its sizes,
  // and only the first rows (the real batch's) are taken.
  const int64_t h = config_.hidden_size;
  const int64_t labels = config_.num_labels();
  const ResultLayout layout = LayoutResults(options.outputs, ran.tokens, ran.sequences, labels, h);
  const ResultLayout wanted =
      LayoutResults(options.outputs, batch.total_tokens(), batch.num_sequences(), labels, h);
  const float* host = static_cast<const float*>(staging_out_.data());
  BatchOutput output;
  output.num_sequences = batch.num_sequences();
  output.total_tokens = batch.total_tokens();
  output.num_labels = static_cast<int>(labels);
  output.hidden_size = static_cast<int>(h);
  auto take = [&host](std::vector<float>& into, int64_t count, int64_t stored) {
    into.assign(host, host + count);
    host += stored;
  };
  take(output.sequence_logits, wanted.sequence_logits, layout.sequence_logits);
  take(output.token_logits, wanted.token_logits, layout.token_logits);
  take(output.embeddings, wanted.embeddings, layout.embeddings);
  take(output.hidden_states, wanted.hidden_states, layout.hidden_states);
  return output;
}

absl::StatusOr<BatchOutput> CudaEngine::RunOnDevice(const PackedBatch& batch,
                                                    const RunOptions& options) {
  absl::StatusOr<BatchOutput> output =
      timer_ == nullptr && batch.total_tokens() <= options_.graph_max_tokens
          ? RunGraph(batch, options)
          : RunDirect(batch, options);
  // After a failure the stream may not have reached the span's end: it is left unread (the next
  // run records both events anew).
  if (output.ok()) output->device_seconds = span_->TakeSeconds();
  return output;
}

absl::StatusOr<BatchOutput> CudaEngine::RunDirect(const PackedBatch& batch,
                                                  const RunOptions& options) {
  const RunShape shape = ShapeOf(batch);
  const StagedInputs in = StageInputs(batch, shape, /*graph=*/false);
  span_->Begin(stream_);
  DFLASH_RETURN_IF_ERROR(Enqueue(shape, options, in));
  span_->End(stream_);
  if (timer_ != nullptr) {
    DFLASH_RETURN_IF_ERROR(timer_->Collect(stream_));
  }
  DFLASH_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "running the batch");
  return Unpack(batch, shape, options);
}

absl::StatusOr<BatchOutput> CudaEngine::RunGraph(const PackedBatch& batch,
                                                 const RunOptions& options) {
  // The attention launch is sized by max_seqlen: the bucket's, so one graph serves the bucket.
  const RunShape padded = GraphBucketOf(batch, config_);
  // An empty padding sequence's first row is read (and discarded) by the pooler's gather: it
  // must exist, so the padded batch stays strictly below the arena's rows.
  if (padded.tokens >= options_.max_batch_tokens ||
      padded.sequences > options_.max_batch_sequences ||
      padded.max_seqlen > options_.max_batch_tokens) {
    return RunDirect(batch, options);  // The padded shape does not fit the arena.
  }
  const GraphKey key{padded.tokens,
                     padded.sequences,
                     padded.max_seqlen,
                     options.outputs,
                     static_cast<int>(options.pooling),
                     options.normalize};
  const StagedInputs in = StageInputs(batch, padded, /*graph=*/true);
  auto found = graphs_.find(key);
  if (found == graphs_.end()) {
    // Choosing kernels (attention autotuning, timed GEMM algorithms) synchronises the stream,
    // which capture forbids: one direct run of the bucket chooses them first. Its results are
    // this batch's (capture runs nothing), so the new graph first runs for the next batch.
    span_->Begin(stream_);
    DFLASH_RETURN_IF_ERROR(Enqueue(padded, options, in));
    span_->End(stream_);
    DFLASH_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "running the batch");
    DFLASH_RETURN_IF_CUDA_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                                "cudaStreamBeginCapture");
    const absl::Status enqueued = Enqueue(padded, options, in);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    DFLASH_RETURN_IF_ERROR(enqueued);
    DFLASH_RETURN_IF_CUDA_ERROR(ended, "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    DFLASH_RETURN_IF_CUDA_ERROR(instantiated, "cudaGraphInstantiate");
    graphs_.emplace(key, CudaGraph(exec));
    return Unpack(batch, padded, options);
  }
  span_->Begin(stream_);
  DFLASH_RETURN_IF_CUDA_ERROR(cudaGraphLaunch(found->second.get(), stream_), "cudaGraphLaunch");
  span_->End(stream_);
  DFLASH_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "running the batch");
  return Unpack(batch, padded, options);
}

absl::Status CudaEngine::Encode(const RunShape& shape, const int32_t* cu_seqlens,
                                const int32_t* token_ids, const int32_t* token_types,
                                const int32_t* positions) {
  const int64_t tokens = shape.tokens;
  const int64_t h = config_.hidden_size;
  const float eps = config_.layer_norm_eps;
  // Embeddings: LN(word[id] + position[pos] + type[type]) (with embed_proj before the LN when
  // E != H): [T, H].
  const bool project = config_.embedding_size != config_.hidden_size;
  kernels::EmbeddingProblem embedding;
  embedding.dtype = options_.dtype;
  embedding.tokens = tokens;
  embedding.width = config_.embedding_size;
  embedding.token_ids = token_ids;
  embedding.token_type_ids = token_types;
  embedding.position_ids = positions;
  embedding.word = model_.word_embeddings.data();
  embedding.position = model_.position_embeddings.data();
  embedding.token_type =
      config_.type_vocab_size > 0 ? model_.token_type_embeddings.data() : nullptr;
  if (!project) {
    embedding.gamma = static_cast<const float*>(model_.embedding_norm.gamma.data());
    embedding.beta = static_cast<const float*>(model_.embedding_norm.beta.data());
  }
  embedding.eps = eps;
  embedding.out = project ? workspace_.embedding_sum : workspace_.hidden;
  Mark(StageTimer::kOther);
  DFLASH_RETURN_IF_CUDA_ERROR(kernels::EmbeddingForward(embedding, stream_), "embeddings");
  if (project) {
    DFLASH_RETURN_IF_ERROR(
        Linear(model_.embed_proj, workspace_.embedding_sum, tokens, workspace_.hidden));
    Mark(StageTimer::kOther);
    DFLASH_RETURN_IF_CUDA_ERROR(
        kernels::AddLayerNorm(options_.dtype, workspace_.hidden, h, nullptr, 0,
                              static_cast<const float*>(model_.embedding_norm.gamma.data()),
                              static_cast<const float*>(model_.embedding_norm.beta.data()), eps,
                              tokens, static_cast<int>(h), workspace_.hidden, h, stream_),
        "embedding LayerNorm");
  }
  if (config_.has_conv()) {
    // The ConvLayer reads the embedding output E0: its columns are taken before layer 0.
    Mark(StageTimer::kOther);
    DFLASH_RETURN_IF_CUDA_ERROR(
        kernels::ConvolutionColumns(options_.dtype, workspace_.hidden, h, tokens,
                                    static_cast<int>(h), config_.conv_groups,
                                    config_.conv_kernel_size, cu_seqlens, shape.sequences,
                                    workspace_.conv_columns, stream_),
        "convolution columns");
  }
  // Every layer's attention has the same shape: one variant choice per batch.
  DFLASH_ASSIGN_OR_RETURN(
      attention_config_,
      tuner_->Select(AttentionShape(shape.sequences, shape.max_seqlen, cu_seqlens, tokens, 0),
                     stream_, workspace_.attention_scratch, workspace_.attention_scratch_bytes));
  for (int layer = 0; layer < config_.num_hidden_layers; ++layer) {
    DFLASH_RETURN_IF_ERROR(
        EncoderLayer(layer, tokens, shape.sequences, shape.max_seqlen, cu_seqlens));
    if (layer == 0 && config_.has_conv()) {
      DFLASH_RETURN_IF_ERROR(Convolution(tokens));
    }
  }
  return absl::OkStatus();
}

kernels::AttentionProblem CudaEngine::AttentionShape(int num_sequences, int max_seqlen,
                                                     const int32_t* cu_seqlens, int64_t tokens,
                                                     int layer) const {
  const DeviceEncoderLayer& weights = model_.layers[static_cast<size_t>(layer)];
  const int64_t a = config_.all_head_size();
  const size_t e = element_bytes();
  kernels::AttentionProblem attention;
  attention.dtype = options_.dtype;
  attention.allow_tf32 = options_.allow_tf32;
  attention.num_heads = config_.num_attention_heads;
  attention.head_dim = config_.attention_head_size;
  // Q, K, V: column blocks of the fused projection [T, 3*nh*d]; out: [T, nh*d].
  attention.q = workspace_.qkv;
  attention.k = static_cast<const char*>(workspace_.qkv) + a * e;
  attention.v = static_cast<const char*>(workspace_.qkv) + 2 * a * e;
  attention.q_row_stride = attention.k_row_stride = attention.v_row_stride = 3 * a;
  attention.out = workspace_.context;
  attention.out_row_stride = a;
  attention.pos_key = weights.pos_key.data();
  attention.pos_query = weights.pos_query.data();
  attention.cu_seqlens = cu_seqlens;
  attention.num_sequences = num_sequences;
  attention.max_seqlen = max_seqlen;
  attention.total_tokens = static_cast<int>(tokens);
  attention.scale = scale_;
  if (index_) {
    attention.positions.host = index_->table().data();
    attention.positions.device = static_cast<const int32_t*>(model_.relative_index.data());
    attention.positions.band = index_->band();
    attention.positions.span = index_->span();
    attention.positions.settled = index_->settled();
  }
  return attention;
}

absl::Status CudaEngine::EncoderLayer(int index, int64_t tokens, int num_sequences, int max_seqlen,
                                      const int32_t* cu_seqlens) {
  const DeviceEncoderLayer& layer = model_.layers[static_cast<size_t>(index)];
  const int64_t h = config_.hidden_size;
  const float eps = config_.layer_norm_eps;
  const kernels::DataType dtype = options_.dtype;

  // qkv = hidden Wqkv^T + bqkv: [T, 3*nh*d]; Q, K, V are strided views of it.
  DFLASH_RETURN_IF_ERROR(Linear(layer.qkv, workspace_.hidden, tokens, workspace_.qkv));
  kernels::AttentionProblem attention =
      AttentionShape(num_sequences, max_seqlen, cu_seqlens, tokens, index);
  attention.config = &attention_config_;
  if (const size_t needed = kernels::AttentionWorkspaceBytes(attention);
      needed > workspace_.attention_scratch_bytes) {
    return absl::InternalError(absl::StrCat("attention needs ", needed,
                                            " bytes of workspace; the arena holds ",
                                            workspace_.attention_scratch_bytes));
  }
  Mark(StageTimer::kAttention);
  DFLASH_RETURN_IF_CUDA_ERROR(kernels::DisentangledAttentionForward(
                                  attention, workspace_.attention_scratch, blas_, stream_),
                              "disentangled attention");

  // attention = LN(context Wo^T + bo + hidden): bias and residual in the GEMM epilogue.
  DFLASH_RETURN_IF_ERROR(Linear(layer.attention_output, workspace_.context, tokens,
                                workspace_.attention, workspace_.hidden));
  Mark(StageTimer::kOther);
  DFLASH_RETURN_IF_CUDA_ERROR(
      kernels::AddLayerNorm(dtype, workspace_.attention, h, nullptr, 0,
                            static_cast<const float*>(layer.attention_norm.gamma.data()),
                            static_cast<const float*>(layer.attention_norm.beta.data()), eps,
                            tokens, static_cast<int>(h), workspace_.attention, h, stream_),
      "attention LayerNorm");
  // hidden = LN(act(attention Wi^T + bi) Wout^T + bout + attention).
  DFLASH_RETURN_IF_ERROR(
      Linear(layer.intermediate, workspace_.attention, tokens, workspace_.intermediate));
  Mark(StageTimer::kOther);
  DFLASH_RETURN_IF_CUDA_ERROR(
      kernels::BiasActivation(dtype, workspace_.intermediate, tokens, config_.intermediate_size,
                              config_.intermediate_size, nullptr, hidden_act_, stream_),
      "FFN activation");
  DFLASH_RETURN_IF_ERROR(Linear(layer.output, workspace_.intermediate, tokens, workspace_.hidden,
                                workspace_.attention));
  Mark(StageTimer::kOther);
  DFLASH_RETURN_IF_CUDA_ERROR(
      kernels::AddLayerNorm(dtype, workspace_.hidden, h, nullptr, 0,
                            static_cast<const float*>(layer.output_norm.gamma.data()),
                            static_cast<const float*>(layer.output_norm.beta.data()), eps, tokens,
                            static_cast<int>(h), workspace_.hidden, h, stream_),
      "output LayerNorm");
  return absl::OkStatus();
}

absl::Status CudaEngine::Convolution(int64_t tokens) {
  // c = act(cols(E0) taps^T + b), one GEMM per group; hidden = LN(hidden + c).
  const int64_t h = config_.hidden_size;
  const int64_t kernel = config_.conv_kernel_size;
  const int64_t group_width = h / config_.conv_groups;
  const size_t e = element_bytes();
  const DeviceLinear& conv = model_.convolution;
  for (int g = 0; g < config_.conv_groups; ++g) {
    LinearCall call;
    call.dtype = options_.dtype;
    call.m = tokens;
    call.n = group_width;
    call.k = kernel * group_width;
    call.x = static_cast<const char*>(workspace_.conv_columns) + g * kernel * group_width * e;
    call.ldx = kernel * h;
    call.w =
        static_cast<const char*>(conv.weight.data()) + g * group_width * kernel * group_width * e;
    call.ldw = kernel * group_width;
    call.bias = static_cast<const char*>(conv.bias.data()) + g * group_width * e;
    call.y = static_cast<char*>(workspace_.conv_output) + g * group_width * e;
    call.ldy = h;
    Mark(StageTimer::kGemm);
    DFLASH_RETURN_IF_ERROR(linear_->Run(call, stream_));
  }
  Mark(StageTimer::kOther);
  DFLASH_RETURN_IF_CUDA_ERROR(
      kernels::BiasActivation(options_.dtype, workspace_.conv_output, tokens, static_cast<int>(h),
                              h, nullptr, conv_act_, stream_),
      "convolution activation");
  DFLASH_RETURN_IF_CUDA_ERROR(
      kernels::AddLayerNorm(options_.dtype, workspace_.hidden, h, workspace_.conv_output, h,
                            static_cast<const float*>(model_.convolution_norm.gamma.data()),
                            static_cast<const float*>(model_.convolution_norm.beta.data()),
                            config_.layer_norm_eps, tokens, static_cast<int>(h), workspace_.hidden,
                            h, stream_),
      "convolution LayerNorm");
  return absl::OkStatus();
}

}  // namespace dflash::cuda
