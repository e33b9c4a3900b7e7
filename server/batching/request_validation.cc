#include "server/batching/request_validation.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/packed_batch.h"

namespace dflash::serving {

absl::Status ValidateRequest(const InferenceRequest& request, int max_batch_tokens,
                             const ModelConfig& config) {
  if (request.sequences.empty()) {
    return absl::InvalidArgumentError("request has no sequences");
  }
  if (!request.done) {
    return absl::InvalidArgumentError("request has no completion callback");
  }
  constexpr uint32_t kServedOutputs = kSequenceLogits | kTokenLogits | kEmbeddings;
  if (request.outputs == 0 || (request.outputs & ~kServedOutputs) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("request outputs mask ", request.outputs,
                     " must name sequence logits, token logits and/or embeddings, nothing else"));
  }
  DFLASH_RETURN_IF_ERROR(ValidateOutputs(request.outputs, config));
  for (size_t s = 0; s < request.sequences.size(); ++s) {
    const SequenceInput& sequence = request.sequences[s];
    if (absl::Status status = ValidateSequence(sequence.ids, sequence.type_ids, config);
        !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("sequence ", s, " ", status.message()));
    }
    if (sequence.ids.size() > static_cast<size_t>(max_batch_tokens)) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " has ", sequence.ids.size(),
                                                     " tokens, more than the batch budget of ",
                                                     max_batch_tokens));
    }
  }
  return absl::OkStatus();
}

}  // namespace dflash::serving
