#include "engine/null/null_engine.h"

#include "common/status_macros.h"

namespace dflash {

absl::StatusOr<BatchOutput> NullEngine::Run(const PackedBatch& batch, const RunOptions& options) {
  DFLASH_RETURN_IF_ERROR(ValidatePackedBatch(batch, options, config_));
  const absl::Duration delay = delay_.per_batch + delay_.per_token * batch.total_tokens();
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
  BatchOutput output;
  output.num_sequences = batch.num_sequences();
  output.total_tokens = batch.total_tokens();
  output.num_labels = config_.num_labels();
  output.hidden_size = config_.hidden_size;
  const size_t sequences = static_cast<size_t>(output.num_sequences);
  const size_t tokens = static_cast<size_t>(output.total_tokens);
  const size_t labels = static_cast<size_t>(output.num_labels);
  const size_t hidden = static_cast<size_t>(output.hidden_size);
  if (options.outputs & kSequenceLogits) output.sequence_logits.assign(sequences * labels, 0.0f);
  if (options.outputs & kTokenLogits) output.token_logits.assign(tokens * labels, 0.0f);
  if (options.outputs & kEmbeddings) output.embeddings.assign(sequences * hidden, 0.0f);
  if (options.outputs & kHiddenStates) output.hidden_states.assign(tokens * hidden, 0.0f);
  return output;
}

EngineInfo NullEngine::Info() const {
  EngineInfo info;
  info.backend = "null";
  info.device = "none (null engine: no compute)";
  info.dtype = "float32";
  return info;
}

}  // namespace dflash
