// The scheduler's waiting room: one FIFO per priority level, the queued totals that admission and
// the queue-delay policy read, and the rule that cuts the next batch out of it (highest level
// first, FIFO within a level, requests split at sequence boundaries when they do not fit, the rest
// of a split request queued again at the back of its level so that split requests take turns with
// the requests behind them). Not thread-safe: the scheduler calls it with its lock held.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/batching/batch_scheduler.h"

namespace dflash::serving {

// An accepted request from Submit until its `done` is called. `request`, `submit_time` and
// `tokens` never change after Submit; `outputs[i]` is written only by the worker whose batch
// computed sequence i; every other field belongs to the scheduler's lock.
struct PendingRequest {
  InferenceRequest request;
  absl::Time submit_time;
  int64_t tokens = 0;  // Sum of the sequences' lengths.
  std::vector<SequenceOutput> outputs;

  int next_sequence = 0;    // First sequence not yet taken into a batch.
  int parts_in_flight = 0;  // Batches holding a part of it that have not finished.
  absl::Status status;      // First failure; once set, nothing more of it is computed.
  bool dropped = false;     // Failed by deadline or cancellation rather than by an engine.
  absl::Time first_batch_start = absl::InfiniteFuture();
  absl::Time last_batch_end = absl::InfinitePast();

  int num_sequences() const { return static_cast<int>(request.sequences.size()); }
  // Everything taken, nothing in flight, or failed with nothing in flight: `done` may be called.
  bool finished() const {
    return parts_in_flight == 0 && (!status.ok() || next_sequence == num_sequences());
  }
};

// Sequences [first_sequence, first_sequence + num_sequences) of one request, placed in a batch.
struct BatchPart {
  std::shared_ptr<PendingRequest> request;
  int first_sequence = 0;
  int num_sequences = 0;
  int tokens = 0;  // Sum of those sequences' lengths.
};

struct TakenBatch {
  std::vector<BatchPart> parts;  // Batch order; a request has at most one part per batch.
  int sequences = 0;
  int tokens = 0;
  // Requests whose deadline passed or that were cancelled, removed from the queue with nothing in
  // flight: the caller answers them (their `status` says how).
  std::vector<std::shared_ptr<PendingRequest>> dropped;
};

// DEADLINE_EXCEEDED when the request's deadline is at or before `now`, CANCELLED when its
// cancellation flag is set, OK otherwise: what TakeBatch drops a request for, and what the
// scheduler checks again when a batch cut ahead of its engine starts.
absl::Status DropStatus(const PendingRequest& pending, absl::Time now);

class RequestQueue {
 public:
  RequestQueue(int max_batch_tokens, int max_batch_sequences);

  void Push(std::shared_ptr<PendingRequest> request);

  // Cuts the next batch. Requests met at the head whose deadline is at or before `now`, or whose
  // cancellation flag is set, are removed instead (DEADLINE_EXCEEDED / CANCELLED in their status),
  // and so are those that would end after their deadline even in this batch: the batch up to and
  // including their part, at `seconds_per_token` engine seconds per token, started at `start` (at
  // or after `now`: a batch cut while its engine still runs another starts when that one ends; 0
  // seconds per token: no estimate, no such check). Those with parts still in flight are answered
  // by whoever finishes the last part. A request of which only a part fits goes to the back of its
  // level with its rest, and the batch ends there; one of which nothing fits keeps its place and
  // ends the batch. `share`: the batch also ends once it holds at least this many tokens (splitting
  // a request there like a budget does), so that engines idle at the same time divide the queue;
  // its first sequence is taken whatever its length.
  TakenBatch TakeBatch(absl::Time now, absl::Time start, double seconds_per_token,
                       int64_t share = std::numeric_limits<int64_t>::max());

  // Removes whatever is still queued of `request` (after one of its parts failed), wherever it is
  // in its level. O(queued requests of its level).
  void Remove(const PendingRequest& request);

  // The queued totals reach a batch budget: waiting longer cannot make the next batch bigger.
  bool FillsBatch() const;
  // Submit time of the longest-waiting queued request; nullopt when empty. O(queued requests): the
  // rest of a split request may be anywhere in its level. The scheduler asks only while the queue
  // does not fill a batch, i.e. while it holds fewer requests than a batch holds sequences.
  std::optional<absl::Time> OldestSubmitTime() const;
  // Untaken tokens queued at `priority` and the levels above it: what is computed before a request
  // of that priority submitted now.
  int64_t TokensAtOrAbove(Priority priority) const;

  // Queued requests whose cancellation flag is set: they leave the queue, never computed, when
  // TakeBatch meets them. O(queued requests).
  int CancelledRequests() const;

  bool empty() const { return requests_ == 0; }
  int requests() const { return requests_; }
  int64_t sequences() const { return sequences_; }
  int64_t tokens() const { return tokens_; }

 private:
  using Fifo = std::deque<std::shared_ptr<PendingRequest>>;
  void SubtractUntaken(const PendingRequest& request);  // From the totals, as it leaves.
  void PopFront(Fifo& fifo);

  const int max_batch_tokens_;
  const int max_batch_sequences_;
  std::array<Fifo, kPriorityLevels> levels_;  // Index: static_cast<int>(Priority).
  int requests_ = 0;
  int64_t sequences_ = 0;  // Untaken sequences only.
  int64_t tokens_ = 0;
  std::array<int64_t, kPriorityLevels> level_tokens_{};  // tokens_ per level.
};

}  // namespace dflash::serving
