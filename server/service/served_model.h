// One model as the service serves it: its tokenizer, capabilities, limits and batcher (which owns
// the engines). Immutable after loading except for the batcher's queue; shared by all handlers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "server/batching/batch_scheduler.h"
#include "server/config/server_config.h"
#include "server/scoring/label_scores.h"
#include "server/service/model_capabilities.h"
#include "server/tokenizer/tokenizer.h"

namespace dflash::serving {

class ServedModel {
 public:
  // Loads the checkpoint and tokenizer of `entry`, creates its engines and batcher and runs the
  // warm-up batch: max_batch_tokens tokens in sequences of at most 512 tokens (longer only where
  // max_batch_sequences needs them to hold the tokens, never longer than max_input_length), so
  // that its time does not grow with max_input_length. `observer` receives the batcher's events
  // (may be null).
  static absl::StatusOr<std::unique_ptr<ServedModel>> Load(const ModelEntry& entry,
                                                           std::shared_ptr<BatchObserver> observer);

  // For tests: a model served by the given engines (all for `config`), with `tokenizer`, which
  // alone checks the size of request texts: Load gives it limits.max_text_bytes.
  static absl::StatusOr<std::unique_ptr<ServedModel>> Create(
      const ModelEntry& entry, ModelConfig config, EmbeddingConfig embedding,
      std::unique_ptr<Tokenizer> tokenizer, std::vector<std::unique_ptr<Engine>> engines,
      std::shared_ptr<BatchObserver> observer);

  const std::string& id() const { return entry_.name; }
  const ModelEntry& entry() const { return entry_; }
  const ModelConfig& config() const { return config_; }
  const EmbeddingConfig& embedding() const { return embedding_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelCapabilities& capabilities() const { return capabilities_; }
  ScoreFunction default_score_function() const { return default_score_function_; }
  // Longest input in tokens, specials included.
  int max_input_length() const { return max_input_length_; }
  Priority priority_cap() const { return priority_cap_; }
  EngineInfo engine_info() const { return scheduler_->engine(0).Info(); }
  // One entry per engine (per device), in configuration order.
  std::vector<EngineInfo> engine_infos() const;
  BatchScheduler& scheduler() { return *scheduler_; }

 private:
  ServedModel() = default;

  ModelEntry entry_;
  ModelConfig config_;
  EmbeddingConfig embedding_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ModelCapabilities capabilities_;
  ScoreFunction default_score_function_ = ScoreFunction::kSoftmax;
  int max_input_length_ = 512;
  Priority priority_cap_ = Priority::kHigh;
  std::unique_ptr<BatchScheduler> scheduler_;
};

}  // namespace dflash::serving
