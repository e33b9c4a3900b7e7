// The host side of a CUDA engine run: the shape a batch runs at (its own, or the CUDA graph bucket
// it is padded up to) and the batch's inputs written once into the pinned staging block, padding
// sequences included, so that padding a batch for a graph never copies it.
#pragma once

#include <cstdint>

#include "engine/model/model_config.h"
#include "engine/packed_batch.h"

namespace dflash::cuda {

// The sizes a forward runs at. A graph bucket's are at least the batch's; the difference is made
// of padding sequences after the real ones.
struct RunShape {
  int64_t tokens = 0;
  int sequences = 0;
  int max_seqlen = 0;  // Sizes the attention launch.

  bool operator==(const RunShape&) const = default;
};

// The batch's own sizes.
RunShape ShapeOf(const PackedBatch& batch);

// The CUDA graph bucket of `batch`: tokens rounded up to a multiple of 64, sequences (with one
// more when there are padding tokens) up to a power of two, the longest sequence up to a power of
// two >= 64. Padding sequences hold at most `max_seqlen` tokens each (and, for models with
// absolute positions, at most max_position_embeddings: the sequence count doubles instead).
RunShape GraphBucketOf(const PackedBatch& batch, const ModelConfig& config);

// Which inputs the model reads, and the id that fills padding sequences.
struct StagingRules {
  bool token_types = false;  // Types staged (zeros where the batch has none).
  bool positions = false;    // position_biased_input: absolute positions staged.
  int32_t pad_token_id = 0;
};

// Offsets, in int32 values from the start of the staged block, of each input; -1 when absent.
struct StagedLayout {
  int64_t token_ids = 0;     // [shape.tokens]
  int64_t token_types = -1;  // [shape.tokens]
  int64_t positions = -1;    // [shape.tokens], t - cu_seqlens[s] for token t of sequence s
  int64_t cu_seqlens = 0;    // [shape.sequences + 1]
  int64_t count = 0;         // int32 values written
};

// The int32 values StageBatch writes for `shape`.
int64_t StagedCount(const RunShape& shape, const StagingRules& rules);

// Writes `batch` followed by shape.sequences - batch.num_sequences() padding sequences (pad ids,
// type 0, shape.tokens - batch.total_tokens() tokens spread evenly over them; some may be empty)
// into `staged`, which holds at least StagedCount(shape, rules) values.
StagedLayout StageBatch(const PackedBatch& batch, const RunShape& shape, const StagingRules& rules,
                        int32_t* staged);

}  // namespace dflash::cuda
