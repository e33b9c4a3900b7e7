// The DeBERTa-v2/v3 encoder on one NVIDIA GPU, over packed batches with no padding anywhere:
// embeddings + LayerNorm, per layer one fused QKV GEMM (bias in the epilogue), the fused
// disentangled attention kernel, the output projection with bias and residual in the GEMM's
// epilogue then LayerNorm, the FFN with exact erf GELU, the ConvLayer of v2-xlarge-style models,
// and the heads on the device; only the requested results are copied back.
//
// Memory is fixed at creation: the weights, one workspace arena sized for max_batch_tokens, and
// pinned staging buffers; Run never allocates. Each engine owns a stream on its device and must be
// driven by one thread at a time (the server gives it one worker). A CUDA fault that leaves the
// context unusable marks the engine unhealthy: every later Run fails with UNAVAILABLE.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_model.h"
#include "engine/cuda/linear_layer.h"
#include "engine/cuda/run_span.h"
#include "engine/cuda/stage_timer.h"
#include "engine/cuda/staged_batch.h"
#include "engine/engine.h"
#include "engine/model/checkpoint.h"
#include "engine/model/relative_position.h"
#include "engine/tuning/attention_tuner.h"
#include "kernels/attention/disentangled_attention.h"
#include "kernels/common/data_type.h"
#include "kernels/encoder/activation.h"

namespace dflash::cuda {

class CudaEngine final : public Engine {
 public:
  struct Options {
    int device = 0;
    kernels::DataType dtype = kernels::DataType::kFloat16;
    // The largest batch Run accepts, which sizes the workspace arena: total tokens, and the
    // number of sequences (0: as many as tokens).
    int64_t max_batch_tokens = 16384;
    int max_batch_sequences = 0;
    // float32 engines only: TF32 tensor cores for the GEMMs (CUBLAS_COMPUTE_32F_FAST_TF32) and the
    // attention (its float32 tile kernel in 1xTF32, TF32 table GEMMs;
    // AttentionProblem::allow_tf32): about 1e-3 relative error. false (strict float32): FFMA GEMMs,
    // and the attention's tiles in 3xTF32 with float32 tables, to float32's accuracy
    // (kernels/attention/DESIGN.md#float32).
    bool allow_tf32 = false;
    // cuBLASLt candidates timed per GEMM shape bucket at its first use (LinearLayers; <= 1: the
    // heuristic's first choice).
    int gemm_timed_candidates = 8;
    // How attention kernel variants are chosen (its `device` is replaced by `device` above).
    tuning::AttentionTunerOptions tuning;
    // Batches of at most this many tokens run as CUDA graphs, one per shape bucket (tokens
    // rounded up to a multiple of 64 and sequences to a power of two with padding sequences, the
    // longest sequence to a power of two): small batches are launch-bound otherwise. 0 disables
    // graphs.
    int64_t graph_max_tokens = 2048;
  };

  static absl::StatusOr<std::unique_ptr<CudaEngine>> Create(Checkpoint checkpoint,
                                                            const Options& options);
  ~CudaEngine() override;

  absl::StatusOr<BatchOutput> Run(const PackedBatch& batch, const RunOptions& options) override;
  EngineInfo Info() const override;
  int64_t FreeDeviceBytes() const override;
  const ModelConfig& config() const override { return config_; }
  absl::Status Health() const override;

  // When set, Run records the device time of its stages (GEMMs, attention, the rest) into
  // `timer`, which then synchronises: for benchmarks, not for serving.
  void set_stage_timer(StageTimer* timer) { timer_ = timer; }

 private:
  // Slices of the workspace arena, sized for max_batch_tokens (T) and max sequences (S).
  struct Workspace {
    void* hidden = nullptr;         // [T, H]
    void* attention = nullptr;      // [T, H]: the attention block's output
    void* qkv = nullptr;            // [T, 3*nh*d]
    void* context = nullptr;        // [T, nh*d]
    void* intermediate = nullptr;   // [T, I]
    void* embedding_sum = nullptr;  // [T, E] when E != H
    void* conv_columns = nullptr;   // [T, kernel * H] with a ConvLayer
    void* conv_output = nullptr;    // [T, H] with a ConvLayer
    void* first_tokens = nullptr;   // [S, H]
    void* pooled = nullptr;         // [S, H]
    void* logits = nullptr;         // [max(S, T), labels]
    float* results = nullptr;       // every requested output, float32, back to back
    int64_t results_count = 0;      // floats `results` holds (and the pinned staging mirrors)
    int32_t* inputs = nullptr;      // ids, types, positions [T] each, cu_seqlens [S + 1]
    int64_t inputs_count = 0;
    void* attention_scratch = nullptr;
    size_t attention_scratch_bytes = 0;
    void* blas_scratch = nullptr;
    size_t blas_scratch_bytes = 0;
  };

  // Device pointers of a batch's inputs in the arena, after StageInputs wrote them into the
  // pinned staging block (`count` int32 values, copied to the device by Enqueue).
  struct StagedInputs {
    const int32_t* token_ids = nullptr;
    const int32_t* token_types = nullptr;
    const int32_t* positions = nullptr;
    const int32_t* cu_seqlens = nullptr;
    int64_t count = 0;
  };
  // A captured forward for one shape bucket and output choice.
  struct GraphKey {
    int64_t tokens;
    int sequences;
    int longest;
    uint32_t outputs;
    int pooling;
    bool normalize;
    template <typename H>
    friend H AbslHashValue(H h, const GraphKey& k) {
      return H::combine(std::move(h), k.tokens, k.sequences, k.longest, k.outputs, k.pooling,
                        k.normalize);
    }
    bool operator==(const GraphKey&) const = default;
  };
  class CudaGraph {
   public:
    explicit CudaGraph(cudaGraphExec_t exec) : exec_(exec) {}
    CudaGraph(CudaGraph&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
    CudaGraph& operator=(CudaGraph&&) = delete;
    ~CudaGraph() {
      if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    }
    cudaGraphExec_t get() const { return exec_; }

   private:
    cudaGraphExec_t exec_;
  };

  CudaEngine(ModelConfig config, const Options& options);
  // Writes `batch`, padded up to `shape` (a graph's: with types always staged, so one graph
  // serves batches with and without them), into the pinned staging block.
  StagedInputs StageInputs(const PackedBatch& batch, const RunShape& shape, bool graph);
  // Enqueues the whole forward at `shape` on the stream: input copy, encoder, heads, result copy.
  absl::Status Enqueue(const RunShape& shape, const RunOptions& options, const StagedInputs& in);
  // The results of `batch` from the staging buffer, written for `ran` (batch + padding).
  BatchOutput Unpack(const PackedBatch& batch, const RunShape& ran,
                     const RunOptions& options) const;
  absl::StatusOr<BatchOutput> RunGraph(const PackedBatch& batch, const RunOptions& options);
  // Runs `batch` without a graph: stage, enqueue, wait (collecting the stage timer's intervals).
  absl::StatusOr<BatchOutput> RunDirect(const PackedBatch& batch, const RunOptions& options);
  // Starts a stage-timer interval when a timer is set.
  void Mark(StageTimer::Stage stage) {
    if (timer_ != nullptr) timer_->Begin(stage, stream_);
  }
  // Lays the workspace out over `base` (null: only measures) and returns the bytes used.
  size_t LayoutWorkspace(void* base);
  absl::StatusOr<BatchOutput> RunOnDevice(const PackedBatch& batch, const RunOptions& options);
  absl::Status Encode(const RunShape& shape, const int32_t* cu_seqlens, const int32_t* token_ids,
                      const int32_t* token_types, const int32_t* positions);
  absl::Status EncoderLayer(int layer, int64_t tokens, int num_sequences, int max_seqlen,
                            const int32_t* cu_seqlens);
  absl::Status Convolution(int64_t tokens);
  // The attention of `layer` over the batch in the workspace (config unset).
  kernels::AttentionProblem AttentionShape(int num_sequences, int max_seqlen,
                                           const int32_t* cu_seqlens, int64_t tokens,
                                           int layer) const;
  absl::Status Linear(const DeviceLinear& layer, const void* x, int64_t rows, void* y,
                      const void* residual = nullptr);
  size_t element_bytes() const;

  ModelConfig config_;
  Options options_;
  std::optional<RelativePositionIndex> index_;
  DeviceModel model_;
  DeviceBuffer arena_;
  Workspace workspace_;
  PinnedBuffer staging_in_;   // ids, types, positions, cu_seqlens
  PinnedBuffer staging_out_;  // results
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unique_ptr<LinearLayers> linear_;
  std::unique_ptr<tuning::AttentionTuner> tuner_;
  kernels::AttentionKernelConfig attention_config_;  // The tuner's choice for the current batch.
  float scale_ = 1.0f;
  // The model's activations, resolved once at creation.
  kernels::Activation hidden_act_ = kernels::Activation::kGeluErf;
  kernels::Activation pooler_act_ = kernels::Activation::kGeluErf;
  kernels::Activation conv_act_ = kernels::Activation::kGeluErf;
  std::string device_name_;
  StageTimer* timer_ = nullptr;
  std::unique_ptr<RunSpan> span_;  // BatchOutput::device_seconds.
  absl::flat_hash_map<GraphKey, CudaGraph> graphs_;
  absl::Status health_;
};

}  // namespace dflash::cuda
