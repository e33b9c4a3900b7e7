#include "engine/packed_batch.h"

#include "absl/strings/str_cat.h"

namespace dflash {

void PackedBatch::Append(const std::vector<int32_t>& ids, const std::vector<int32_t>& type_ids) {
  if (cu_seqlens.empty()) cu_seqlens.push_back(0);
  if (!type_ids.empty() && token_type_ids.size() < token_ids.size()) {
    token_type_ids.resize(token_ids.size(), 0);
  }
  token_ids.insert(token_ids.end(), ids.begin(), ids.end());
  if (!type_ids.empty()) {
    token_type_ids.insert(token_type_ids.end(), type_ids.begin(), type_ids.end());
  } else if (!token_type_ids.empty()) {
    token_type_ids.resize(token_ids.size(), 0);
  }
  cu_seqlens.push_back(static_cast<int32_t>(token_ids.size()));
  max_seqlen = std::max<int32_t>(max_seqlen, static_cast<int32_t>(ids.size()));
}

absl::Status ValidatePackedBatch(const PackedBatch& batch, const RunOptions& options,
                                 const ModelConfig& config) {
  if (batch.cu_seqlens.size() < 2) {
    return absl::InvalidArgumentError("batch: cu_seqlens needs at least two entries");
  }
  if (batch.cu_seqlens.front() != 0) {
    return absl::InvalidArgumentError("batch: cu_seqlens[0] must be 0");
  }
  int32_t longest = 0;
  for (size_t s = 1; s < batch.cu_seqlens.size(); ++s) {
    const int64_t length = int64_t{batch.cu_seqlens[s]} - batch.cu_seqlens[s - 1];
    if (length <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch: sequence ", s - 1, " is empty or cu_seqlens decreases"));
    }
    longest = std::max<int32_t>(longest, static_cast<int32_t>(length));
  }
  if (batch.cu_seqlens.back() != batch.total_tokens()) {
    return absl::InvalidArgumentError(absl::StrCat("batch: cu_seqlens ends at ",
                                                   batch.cu_seqlens.back(), " but there are ",
                                                   batch.total_tokens(), " tokens"));
  }
  if (batch.max_seqlen != longest) {
    return absl::InvalidArgumentError(absl::StrCat("batch: max_seqlen is ", batch.max_seqlen,
                                                   " but the longest sequence has ", longest,
                                                   " tokens"));
  }
  if (!batch.token_type_ids.empty() && batch.token_type_ids.size() != batch.token_ids.size()) {
    return absl::InvalidArgumentError("batch: token_type_ids and token_ids differ in length");
  }
  for (size_t t = 0; t < batch.token_ids.size(); ++t) {
    const int32_t id = batch.token_ids[t];
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("batch: token ", t, " has id ", id,
                                                     ", outside the vocabulary [0, ",
                                                     config.vocab_size, ")"));
    }
  }
  // transformers ignores token types when the model has no type embeddings.
  if (config.type_vocab_size > 0) {
    for (size_t t = 0; t < batch.token_type_ids.size(); ++t) {
      const int32_t type = batch.token_type_ids[t];
      if (type < 0 || type >= config.type_vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "batch: token ", t, " has type ", type, ", outside [0, ", config.type_vocab_size, ")"));
      }
    }
  }
  if (config.position_biased_input && longest > config.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch: a sequence of ", longest, " tokens exceeds max_position_embeddings ",
                     config.max_position_embeddings, " of this absolute-position model"));
  }
  if ((options.outputs & (kSequenceLogits | kTokenLogits | kEmbeddings | kHiddenStates)) == 0 ||
      (options.outputs & ~uint32_t{kSequenceLogits | kTokenLogits | kEmbeddings | kHiddenStates})) {
    return absl::InvalidArgumentError("run options: outputs must name at least one known output");
  }
  if ((options.outputs & kSequenceLogits) && config.head != HeadKind::kSequenceClassification) {
    return absl::FailedPreconditionError(
        absl::StrCat("sequence logits need a sequence-classification head; this model is ",
                     HeadKindName(config.head)));
  }
  if ((options.outputs & kTokenLogits) && config.head != HeadKind::kTokenClassification) {
    return absl::FailedPreconditionError(
        absl::StrCat("token logits need a token-classification head; this model is ",
                     HeadKindName(config.head)));
  }
  return absl::OkStatus();
}

}  // namespace dflash
