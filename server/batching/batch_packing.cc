#include "server/batching/batch_packing.h"

#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace dflash::serving {
namespace {

absl::Status CheckRows(const std::vector<float>& values, int rows, int width,
                       absl::string_view what) {
  if (width <= 0 || values.size() != static_cast<size_t>(rows) * static_cast<size_t>(width)) {
    return absl::InternalError(absl::StrCat("engine returned ", values.size(), " ", what,
                                            " values for ", rows, " sequences of width ", width));
  }
  return absl::OkStatus();
}

std::vector<float> Row(const std::vector<float>& values, int row, int width) {
  const auto begin = values.begin() + static_cast<ptrdiff_t>(row) * width;
  return std::vector<float>(begin, begin + width);
}

}  // namespace

PackedBatch PackParts(const std::vector<BatchPart>& parts) {
  PackedBatch batch;
  size_t sequences = 0;
  size_t tokens = 0;
  for (const BatchPart& part : parts) {
    for (int s = 0; s < part.num_sequences; ++s) {
      tokens += part.request->request.sequences[part.first_sequence + s].ids.size();
    }
    sequences += static_cast<size_t>(part.num_sequences);
  }
  batch.token_ids.reserve(tokens);
  batch.cu_seqlens.reserve(sequences + 1);
  for (const BatchPart& part : parts) {
    for (int s = 0; s < part.num_sequences; ++s) {
      const SequenceInput& sequence = part.request->request.sequences[part.first_sequence + s];
      batch.Append(sequence.ids, sequence.type_ids);
    }
  }
  return batch;
}

uint32_t UnionOfOutputs(const std::vector<BatchPart>& parts) {
  uint32_t outputs = 0;
  for (const BatchPart& part : parts) outputs |= part.request->request.outputs;
  return outputs;
}

absl::Status CheckBatchOutput(const BatchOutput& output, const PackedBatch& batch,
                              uint32_t outputs) {
  const int sequences = batch.num_sequences();
  if (output.num_sequences != sequences) {
    return absl::InternalError(absl::StrCat("engine returned ", output.num_sequences,
                                            " sequences for a batch of ", sequences));
  }
  if (outputs & kSequenceLogits) {
    DFLASH_RETURN_IF_ERROR(
        CheckRows(output.sequence_logits, sequences, output.num_labels, "sequence logit"));
  }
  if (outputs & kTokenLogits) {
    DFLASH_RETURN_IF_ERROR(
        CheckRows(output.token_logits, batch.total_tokens(), output.num_labels, "token logit"));
  }
  if (outputs & kEmbeddings) {
    DFLASH_RETURN_IF_ERROR(
        CheckRows(output.embeddings, sequences, output.hidden_size, "embedding"));
  }
  return absl::OkStatus();
}

void ScatterOutputs(const BatchOutput& output, std::span<const BatchPart> parts,
                    BatchOffset first) {
  int batch_sequence = first.sequence;
  size_t batch_token = first.token;  // The sequence's first token in the batch.
  for (const BatchPart& part : parts) {
    PendingRequest& pending = *part.request;
    const uint32_t wanted = pending.request.outputs;
    for (int s = 0; s < part.num_sequences; ++s, ++batch_sequence) {
      SequenceOutput& slot = pending.outputs[part.first_sequence + s];
      const size_t length = pending.request.sequences[part.first_sequence + s].ids.size();
      if (wanted & kTokenLogits) {
        const auto rows =
            output.token_logits.begin() + static_cast<ptrdiff_t>(batch_token * output.num_labels);
        slot.token_logits.assign(rows, rows + static_cast<ptrdiff_t>(length * output.num_labels));
      }
      batch_token += length;
      if (wanted & kSequenceLogits) {
        slot.logits = Row(output.sequence_logits, batch_sequence, output.num_labels);
      }
      if (wanted & kEmbeddings) {
        slot.embedding = Row(output.embeddings, batch_sequence, output.hidden_size);
      }
    }
  }
}

}  // namespace dflash::serving
