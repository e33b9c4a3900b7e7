// What Submit checks before a request may share a batch with others: its shape against the batch
// budget, and its tokens and outputs against the served model (so an engine never rejects a batch
// because of one bad request in it).
#pragma once

#include "absl/status/status.h"
#include "engine/model/model_config.h"
#include "server/batching/batch_scheduler.h"

namespace dflash::serving {

// INVALID_ARGUMENT or FAILED_PRECONDITION as documented on BatchScheduler::Submit (the admission
// limits and shutdown are the scheduler's to check).
absl::Status ValidateRequest(const InferenceRequest& request, int max_batch_tokens,
                             const ModelConfig& config);

}  // namespace dflash::serving
