// Between the queue and an engine: the parts of a taken batch packed back to back (no padding,
// delimited by cu_seqlens), and the engine's per-sequence outputs scattered back to the requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/packed_batch.h"
#include "server/batching/request_queue.h"

namespace dflash::serving {

// Sequence k of the batch is the k-th sequence in part order.
PackedBatch PackParts(const std::vector<BatchPart>& parts);

// The union of the parts' requested outputs; what the engine is asked to compute.
uint32_t UnionOfOutputs(const std::vector<BatchPart>& parts);

// INTERNAL when `output` lacks what `outputs` asked for, in the shape of `batch`: an engine bug
// must fail its batch, not index out of range.
absl::Status CheckBatchOutput(const BatchOutput& output, const PackedBatch& batch,
                              uint32_t outputs);

// Where a run of consecutive parts starts in its batch.
struct BatchOffset {
  int sequence = 0;
  size_t token = 0;
};

// Copies each sequence's rows into its request's `outputs` slot, only the kinds that request asked
// for. `parts` are consecutive parts of the batch starting at `first` (so that several threads can
// scatter one batch, each its own parts); `output` must have passed CheckBatchOutput for the batch.
void ScatterOutputs(const BatchOutput& output, std::span<const BatchPart> parts,
                    BatchOffset first = {});

}  // namespace dflash::serving
