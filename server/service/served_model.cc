#include "server/service/served_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/engine_factory.h"
#include "server/tokenizer/tokenizer_loader.h"

namespace dflash::serving {
namespace {

absl::StatusOr<Priority> ParsePriorityCap(absl::string_view name, absl::string_view model) {
  if (name == "low") return Priority::kLow;
  if (name == "normal") return Priority::kNormal;
  if (name == "high" || name.empty()) return Priority::kHigh;
  return absl::InvalidArgumentError(absl::StrCat("model '", model, "': priority_cap '", name,
                                                 "' is not one of low, normal, high"));
}

// The warm-up batch's sequences: max_input_length tokens long, but at most
// kWarmUpMaxSequenceLength, unless longer ones are needed to fill max_batch_tokens within
// max_batch_sequences. The warm-up checks that a full batch runs (the arena, the GEMMs and their
// cuBLASLt algorithms at its token count) before the model is listed; attention time grows with
// the square of the sequence length while the token count sets everything else, and from 512
// tokens on a DeBERTa-v3 sequence reaches every relative-position slot (the C2P / P2C tables at
// their full size). Warmed up at full length, a float32 model with max_input_length 16384 took
// about two minutes to start on the SIMT attention kernel.
constexpr int kWarmUpMaxSequenceLength = 512;

int WarmUpSequenceLength(int max_length, const BatchingConfig& batching) {
  const int sequences = std::max(batching.max_batch_sequences, 1);
  const int filling = (batching.max_batch_tokens + sequences - 1) / sequences;
  return std::min(max_length, std::max(kWarmUpMaxSequenceLength, filling));
}

// What the engine factory builds for `entry`: its engine choices, and its batches as the largest.
EngineSpec EngineSpecOf(const ModelEntry& entry) {
  EngineSpec spec;
  spec.model_name = entry.name;
  spec.backend = entry.backend;
  spec.dtype = entry.dtype;
  spec.devices = entry.devices;
  spec.allow_tf32 = entry.allow_tf32;
  spec.cpu_threads = entry.cpu_threads;
  spec.max_batch_tokens = entry.batching.max_batch_tokens;
  spec.max_batch_sequences = entry.batching.max_batch_sequences;
  spec.tuning_mode = entry.tuning_mode;
  spec.tuning_profile = entry.tuning_profile;
  return spec;
}

}  // namespace

std::vector<EngineInfo> ServedModel::engine_infos() const {
  std::vector<EngineInfo> infos;
  for (int i = 0; i < scheduler_->num_engines(); ++i) infos.push_back(scheduler_->engine(i).Info());
  return infos;
}

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Load(
    const ModelEntry& entry, std::shared_ptr<BatchObserver> observer) {
  TokenizerOptions tokenizer_options;
  if (entry.limits.max_text_bytes > 0) {
    tokenizer_options.max_input_bytes = static_cast<size_t>(entry.limits.max_text_bytes);
  }
  DFLASH_ASSIGN_OR_RETURN(const TokenizerChoice choice, ParseTokenizerChoice(entry.tokenizer));
  DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                          LoadTokenizer(entry.path, choice, tokenizer_options));
  Log().info("model '{}': tokenizer from {} ({})", entry.name,
             TokenizerSourceName(tokenizer->source()),
             entry.tokenizer == "auto" ? "auto: tokenizer.json when present, else spm.model"
                                       : "configured");
  DFLASH_ASSIGN_OR_RETURN(Checkpoint checkpoint, LoadCheckpoint(entry.path));
  ModelConfig config = checkpoint.config;
  EmbeddingConfig embedding = checkpoint.embedding;
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Engine>> engines,
                          CreateEngines(EngineSpecOf(entry), std::move(checkpoint)));
  return Create(entry, std::move(config), embedding, std::move(tokenizer), std::move(engines),
                std::move(observer));
}

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Create(
    const ModelEntry& entry, ModelConfig config, EmbeddingConfig embedding,
    std::unique_ptr<Tokenizer> tokenizer, std::vector<std::unique_ptr<Engine>> engines,
    std::shared_ptr<BatchObserver> observer) {
  std::unique_ptr<ServedModel> model(new ServedModel());
  model->entry_ = entry;
  model->embedding_ = embedding;
  DFLASH_ASSIGN_OR_RETURN(
      model->capabilities_,
      ApplyConfiguredTasks(DeriveCapabilities(config, embedding), entry.tasks, entry.name));
  model->default_score_function_ = DefaultScoreFunction(config);
  DFLASH_ASSIGN_OR_RETURN(model->priority_cap_, ParsePriorityCap(entry.priority_cap, entry.name));

  // The longest input: the configured one, else the tokenizer's model_max_length, else the
  // position table size (DeBERTa-v3's 512 for relative-position models, a hard limit for
  // absolute-position ones).
  int max_length = entry.max_input_length;
  if (max_length <= 0) {
    const int64_t tokenizer_max = tokenizer->DefaultTruncation().max_length;
    max_length = tokenizer_max > 0 && tokenizer_max < (int64_t{1} << 20)
                     ? static_cast<int>(tokenizer_max)
                     : config.max_position_embeddings;
  }
  if (config.position_biased_input && max_length > config.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", entry.name, "': max_input_length ", max_length,
                     " exceeds the model's absolute position table (max_position_embeddings = ",
                     config.max_position_embeddings, ")"));
  }
  if (max_length < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", entry.name, "': max_input_length ", max_length,
                     " cannot hold [CLS] A [SEP] B [SEP]; use at least 3"));
  }
  if (entry.batching.max_batch_tokens < max_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", entry.name, "': batching.max_batch_tokens (", entry.batching.max_batch_tokens,
        ") is smaller than max_input_length (", max_length,
        "), so a full-length input could never run; raise max_batch_tokens or lower "
        "max_input_length"));
  }
  model->max_input_length_ = max_length;

  BatchSchedulerOptions options;
  options.max_batch_tokens = entry.batching.max_batch_tokens;
  options.max_batch_sequences = entry.batching.max_batch_sequences;
  options.max_queue_delay = entry.batching.max_queue_delay;
  options.max_queued_requests = entry.batching.max_queued_requests;
  options.max_queued_sequences = entry.batching.max_queued_sequences;
  options.max_queued_tokens = entry.batching.max_queued_tokens;
  options.host_threads = entry.batching.host_threads;
  options.run_options.pooling = embedding.pooling;
  options.run_options.normalize = false;
  DFLASH_ASSIGN_OR_RETURN(model->scheduler_,
                          BatchScheduler::Create(std::move(engines), options, std::move(observer)));

  uint32_t outputs = 0;
  const ModelCapabilities& caps = model->capabilities_;
  if (caps.Supports(ServedTask::kClassify) || caps.Supports(ServedTask::kZeroShot) ||
      caps.Supports(ServedTask::kRerank)) {
    outputs |= kSequenceLogits;
  }
  if (caps.Supports(ServedTask::kEmbed)) outputs |= kEmbeddings;
  if (caps.Supports(ServedTask::kTokenClassify)) outputs |= kTokenLogits;
  if (absl::Status warm_up =
          model->scheduler_->WarmUp(WarmUpSequenceLength(max_length, entry.batching), outputs);
      !warm_up.ok()) {
    return absl::Status(warm_up.code(),
                        absl::StrCat("model '", entry.name, "': warm-up: ", warm_up.message()));
  }
  model->config_ = std::move(config);
  model->tokenizer_ = std::move(tokenizer);
  return model;
}

}  // namespace dflash::serving
