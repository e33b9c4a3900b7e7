// The exact float32 DeBERTa-v2/v3 forward on the host CPU, over packed batches (no padding).
// It is the reference for every GPU test and the fallback backend. GEMMs go through the system
// BLAS; the input-independent parts (normalised relative embeddings, per-layer PosK/PosQ, the
// relative-position index, fused QKV weights) are computed once at creation.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/encoder_prelude.h"
#include "engine/engine.h"
#include "engine/model/checkpoint.h"
#include "engine/model/relative_position.h"

namespace dflash {

class CpuEngine final : public Engine {
 public:
  struct Options {
    int blas_threads = 0;  // 0: the BLAS default (all cores).
  };

  static absl::StatusOr<std::unique_ptr<CpuEngine>> Create(Checkpoint checkpoint,
                                                           const Options& options);

  absl::StatusOr<BatchOutput> Run(const PackedBatch& batch, const RunOptions& options) override;
  EngineInfo Info() const override;
  int64_t FreeDeviceBytes() const override;
  const ModelConfig& config() const override { return config_; }

 private:
  CpuEngine(Checkpoint checkpoint, int blas_threads);
  void Embed(const PackedBatch& batch, std::vector<float>& hidden) const;
  void EncoderLayer(int layer, const PackedBatch& batch, std::vector<float>& hidden,
                    std::vector<float>& scratch) const;
  void Convolution(const PackedBatch& batch, const std::vector<float>& embeddings,
                   std::vector<float>& hidden) const;

  ModelConfig config_;
  ModelWeights weights_;
  std::vector<EncoderLayerPrelude> plans_;
  std::vector<float> conv_taps_;  // [kernel, H, H/groups]: ConvLayer taps, when configured.
  std::optional<RelativePositionIndex> index_;
  float scale_ = 1.0f;
  int blas_threads_ = 0;
};

}  // namespace dflash
