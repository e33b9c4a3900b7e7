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

absl::Status ValidateSequence(absl::Span<const int32_t> ids, absl::Span<const int32_t> type_ids,
                              const ModelConfig& config) {
  if (ids.empty()) return absl::InvalidArgumentError("is empty");
  if (!type_ids.empty() && type_ids.size() != ids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("has ", ids.size(), " token ids but ", type_ids.size(), " token type ids"));
  }
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("has id ", ids[t], " at token ", t,
                                                     ", outside the vocabulary [0, ",
                                                     config.vocab_size, ")"));
    }
  }
  // transformers ignores token types when the model has no type embeddings.
  if (config.type_vocab_size > 0) {
    for (size_t t = 0; t < type_ids.size(); ++t) {
      if (type_ids[t] < 0 || type_ids[t] >= config.type_vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("has type ", type_ids[t], " at token ", t,
                                                       ", outside [0, ", config.type_vocab_size,
                                                       ")"));
      }
    }
  }
  if (config.position_biased_input &&
      ids.size() > static_cast<size_t>(config.max_position_embeddings)) {
    return absl::InvalidArgumentError(
        absl::StrCat("has ", ids.size(), " tokens, more than max_position_embeddings ",
                     config.max_position_embeddings, " of this absolute-position model"));
  }
  return absl::OkStatus();
}

absl::Status ValidateOutputs(uint32_t outputs, const ModelConfig& config) {
  constexpr uint32_t kKnownOutputs = kSequenceLogits | kTokenLogits | kEmbeddings | kHiddenStates;
  if (outputs == 0 || (outputs & ~kKnownOutputs) != 0) {
    return absl::InvalidArgumentError("outputs must name at least one known output");
  }
  if ((outputs & kSequenceLogits) && config.head != HeadKind::kSequenceClassification) {
    return absl::FailedPreconditionError(
        absl::StrCat("sequence logits need a sequence-classification head; this model is ",
                     HeadKindName(config.head)));
  }
  if ((outputs & kTokenLogits) && config.head != HeadKind::kTokenClassification) {
    return absl::FailedPreconditionError(
        absl::StrCat("token logits need a token-classification head; this model is ",
                     HeadKindName(config.head)));
  }
  return absl::OkStatus();
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
  if (absl::Status status = ValidateOutputs(options.outputs, config); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("run options: ", status.message()));
  }
  const absl::Span<const int32_t> ids(batch.token_ids);
  const absl::Span<const int32_t> types(batch.token_type_ids);
  for (int s = 0; s < batch.num_sequences(); ++s) {
    const size_t begin = batch.cu_seqlens[s];
    const size_t length = batch.sequence_length(s);
    const absl::Status status = ValidateSequence(
        ids.subspan(begin, length), types.empty() ? types : types.subspan(begin, length), config);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("batch: sequence ", s, " ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace dflash
