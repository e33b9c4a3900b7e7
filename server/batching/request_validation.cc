#include "server/batching/request_validation.h"

#include "absl/strings/str_cat.h"
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
  PackedBatch alone;
  for (size_t s = 0; s < request.sequences.size(); ++s) {
    const SequenceInput& sequence = request.sequences[s];
    if (sequence.ids.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " is empty"));
    }
    if (!sequence.type_ids.empty() && sequence.type_ids.size() != sequence.ids.size()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " has ", sequence.ids.size(),
                                                     " token ids but ", sequence.type_ids.size(),
                                                     " token type ids"));
    }
    if (sequence.ids.size() > static_cast<size_t>(max_batch_tokens)) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " has ", sequence.ids.size(),
                                                     " tokens, more than the batch budget of ",
                                                     max_batch_tokens));
    }
    alone.Append(sequence.ids, sequence.type_ids);
  }
  // The engines' own batch check, applied to this request alone: vocabulary and type ranges,
  // position limits and whether the model has the requested head.
  RunOptions options;
  options.outputs = request.outputs;
  if (absl::Status status = ValidatePackedBatch(alone, options, config); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("request rejected: ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace dflash::serving
