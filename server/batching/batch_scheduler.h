// The dynamic batcher of one served model: requests (each one or more model sequences) wait in a
// priority queue; engine runners (one per Engine, i.e. per device) take batches from it by token
// budget, pack them with cu_seqlens and run them; results are scattered back to the requests.
//
// Policy (Triton's dynamic batcher semantics):
// - Levels kLow < kNormal < kHigh; a batch is filled from the highest non-empty level first and
//   first-in first-out within a level.
// - A batch holds at most max_batch_tokens tokens and max_batch_sequences sequences. A request is
//   split at sequence boundaries when it does not fit: its first sequences go into this batch and
//   the rest goes to the back of its level, so a request larger than the budget spans several
//   batches, taking turns with the requests queued behind it (one large request does not hold up
//   its level until all of its parts are done), and is answered once, when its last part is done.
// - max_queue_delay = 0 (continuous batching): a batch is cut from everything queued when it is
//   due, up to the budget; when several engines are idle at that moment, each takes an equal share
//   of the queued tokens (a request split at sequence boundaries like at a budget), so that a burst
//   runs on all of them at once. max_queue_delay > 0: it is due once the budget is full or the
//   oldest queued request has waited max_queue_delay, whichever is first.
// - A request whose deadline has passed or whose cancellation flag is set when it reaches the head
//   of the queue, or when the batch it was cut into starts, is answered DEADLINE_EXCEEDED /
//   CANCELLED and never computed.
// - Deadlines against throughput: the scheduler estimates an engine's seconds per token from the
//   batches it ran (an exponentially weighted average of Run's start-to-end time). Submit refuses
//   (RESOURCE_EXHAUSTED) a request that by the estimate would end after its deadline (the tokens
//   queued at its priority and above, plus those cut and not yet run, plus its own, spread over
//   the healthy engines), and a request that reaches the head of the queue when even the batch
//   being cut would end after its deadline (counting the batch its engine still runs) is answered
//   DEADLINE_EXCEEDED and never computed: under overload, engine time goes to requests whose
//   callers still wait for the answer. Until a batch has run there is no estimate and neither
//   check applies.
// - An engine error fails every request with a part in that batch (INTERNAL, or the engine's
//   code); the parts of those requests still queued, or cut into a batch not yet started, are
//   dropped; other requests are unaffected.
//
// Pipeline: an engine is kept waiting for host work as little as possible. Each engine's runner
// thread only cuts, takes up and runs batches; after Run, scattering the outputs and the `done`
// callbacks run on host threads (a pool shared by the model's engines, two per engine by default),
// split over them for large batches, while the runner starts the next batch. An engine goes at
// most two batches ahead of the delivery of its answers, which bounds the outputs held when
// callbacks are slower than the engine. So answers to different requests come in no particular
// order (one request is still answered once, after its last part), and a `done` that blocks holds
// up the answers behind it on its host thread, not the engine (unless every host thread is
// blocked). When a runner starts a Run and the queue already fills a batch, it cuts that next
// batch at once and it is packed (on a host thread when large) while the Run goes on (depth 1);
// a batch that is not full is cut only when the engine is free, as without the pipeline, so that
// it still takes the requests arriving during the run instead of making them wait for one more
// run; and a busy engine does not cut ahead while another engine is idle. A batch cut ahead
// drops, when it starts, the parts of requests that failed, were cancelled, expired or were
// aborted since; a retiring engine hands it to a healthy one.
//
// Every request accepted by Submit has its `done` called exactly once, on a scheduler thread (or
// on the thread calling AbortQueued), never while a scheduler lock is held. `done` and
// the observer may call Submit and Stats but must not call Shutdown or destroy the scheduler (a
// scheduler thread cannot join itself).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/packed_batch.h"

namespace dflash::serving {

enum class Priority : uint8_t { kLow = 0, kNormal = 1, kHigh = 2 };
inline constexpr int kPriorityLevels = 3;

// One model sequence: token ids and token types (same length; types may be empty = all zeros).
struct SequenceInput {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
};

// The engine outputs of one sequence (only the kinds the request asked for are filled).
struct SequenceOutput {
  std::vector<float> logits;        // [num_labels] when kSequenceLogits was requested.
  std::vector<float> embedding;     // [hidden] when kEmbeddings was requested (not normalized).
  std::vector<float> token_logits;  // [length, num_labels] when kTokenLogits was requested.
};

struct InferenceResult {
  std::vector<SequenceOutput> outputs;  // One per InferenceRequest::sequences, same order.
  absl::Duration queue_time;            // Submit until the first batch holding a part started.
  absl::Duration inference_time;        // First part's batch start until last part's batch end.
  int64_t tokens = 0;                   // Sum of the sequences' lengths.
};

// Set by the caller (e.g. when the gRPC client cancels); read by the scheduler.
using CancellationFlag = std::atomic<bool>;

struct InferenceRequest {
  std::vector<SequenceInput> sequences;  // At least one; none empty.
  uint32_t outputs = kSequenceLogits;    // OutputKind mask: kSequenceLogits, kTokenLogits and/or
                                         // kEmbeddings.
  Priority priority = Priority::kNormal;
  absl::Time deadline = absl::InfiniteFuture();
  std::shared_ptr<const CancellationFlag> cancelled;  // May be null (never cancelled).
  absl::AnyInvocable<void(absl::StatusOr<InferenceResult>)> done;
};

// Hooks for metrics; called on scheduler threads without scheduler locks held. All optional.
class BatchObserver {
 public:
  virtual ~BatchObserver() = default;
  // After every engine batch (successful or not).
  virtual void OnBatch(int sequences, int tokens, absl::Duration engine_time,
                       const absl::Status& status) = 0;
  // When the queued totals change (after Submit and after a batch is taken). These calls are
  // serialized by a lock of their own and report the totals read at the time of the call, so the
  // last report always matches the queue (the only observer call made with a lock held).
  virtual void OnQueueDepth(int requests, int64_t sequences, int64_t tokens) = 0;
  // A request answered without compute: DEADLINE_EXCEEDED, CANCELLED or AbortQueued's status
  // (also when a split request's rest is dropped after some of its parts were computed, and when
  // it could no longer be answered before its deadline).
  virtual void OnDropped(absl::StatusCode code) = 0;
  // After the last request of a batch was answered: its host and engine times. `pack`: cutting it
  // out of the queue and packing its tokens; `run`: the engine's Run; `device`: the device's span
  // within `run` where the engine measures it (BatchOutput::device_seconds), so `run - device` is
  // the host's part of the run; `deliver`: from the end of Run to the last `done` of the batch
  // returning (scattering, bookkeeping, callbacks, and any wait for a host thread). While `pack`
  // and `deliver` stay within `run`, they hide behind the engine.
  virtual void OnBatchStages(absl::Duration pack, absl::Duration run,
                             std::optional<absl::Duration> device, absl::Duration deliver) = 0;
};

struct BatchSchedulerOptions {
  int max_batch_tokens = 16384;
  int max_batch_sequences = 256;
  absl::Duration max_queue_delay = absl::ZeroDuration();
  // Admission limits; a Submit beyond any of them gets RESOURCE_EXHAUSTED. 0: no limit.
  int max_queued_requests = 1024;
  int64_t max_queued_sequences = 0;
  int64_t max_queued_tokens = 0;
  // The throughput estimate (engine seconds per token of one engine) before any batch has run; 0:
  // none, so the deadline checks start with the first batch. Batches then refine it. For tests,
  // and for a deployment that knows its engine's speed.
  double initial_seconds_per_token = 0;
  // Host threads that pack batches and answer requests beside the engine runners; 0: two per
  // engine. Tests set it to pin the order of answers.
  int host_threads = 0;
  RunOptions run_options;  // Pooling mode; `outputs` is replaced per batch; normalize is false.
};

class BatchScheduler {
 public:
  // Starts one runner thread per engine and the host threads. Engines must serve the same model;
  // none may be null. INVALID_ARGUMENT for bad options (non-positive budgets, negative delay,
  // admission limits or host threads, a negative or non-finite initial estimate, no engines, a null
  // engine, engines whose label count or hidden size differ).
  static absl::StatusOr<std::unique_ptr<BatchScheduler>> Create(
      std::vector<std::unique_ptr<Engine>> engines, const BatchSchedulerOptions& options,
      std::shared_ptr<BatchObserver> observer = nullptr);
  ~BatchScheduler();  // Shutdown().

  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Runs one batch of max_batch_tokens tokens (sequences of `sequence_length` tokens, the last one
  // shorter, capped at max_batch_sequences sequences) on every engine, synchronously, before any
  // Submit: a configuration whose full batch cannot run fails here (at boot), not under load.
  // The tokens are the model's pad id. Returns the first engine's error (its code, the message
  // naming the engine); INVALID_ARGUMENT for sequence_length < 1; UNAVAILABLE after Shutdown.
  absl::Status WarmUp(int sequence_length, uint32_t outputs);

  // Queues a request. Errors (request not queued, `done` not called): INVALID_ARGUMENT for no
  // sequences, an empty sequence, ids/types length mismatch, a sequence longer than
  // max_batch_tokens, a null `done`, an `outputs` mask that is empty or names more than
  // kSequenceLogits, kTokenLogits and kEmbeddings, ids or types outside the model's vocabularies, a
  // sequence longer than an absolute-position model's max_position_embeddings, or a request that
  // alone exceeds an admission limit (it could never be queued); FAILED_PRECONDITION for sequence
  // logits (token logits) from a model without a sequence- (token-) classification head;
  // RESOURCE_EXHAUSTED when an admission limit would be exceeded (the message says which and
  // suggests retrying with backoff) or when the request would by the throughput estimate end after
  // its deadline (the message gives the expected wait and suggests retrying later or elsewhere);
  // UNAVAILABLE after Shutdown began. Checking against the model here keeps one bad request from
  // failing the batch it would share with others.
  absl::Status Submit(InferenceRequest request);

  // Stops accepting, lets the engines finish every queued request, waits for every answer, joins
  // the threads. Idempotent.
  void Shutdown();

  // For a drain whose grace period is over: stops accepting (Submit answers UNAVAILABLE, as after
  // Shutdown) and answers every queued request with `status` on the calling thread, never
  // computing it. A request cut into a batch that has not started yet gets `status` too, never
  // computed, answered when its engine takes that batch up (after the batch it runs). Batches
  // already on an engine run to their end: a request wholly in them is answered as usual, a split
  // one whose rest was queued gets `status` when they end. Requests whose deadline passed or that
  // were cancelled keep that answer. Returns how many requests get `status`. Shutdown still joins
  // the threads, once their batches end.
  int AbortQueued(const absl::Status& status);

  // The queue, and the requests' parts cut into batches that have not started (cut ahead while
  // their engine runs another batch, or handed over by a retired engine).
  struct QueueStats {
    int requests = 0;
    int64_t sequences = 0;
    int64_t tokens = 0;
    int cut_requests = 0;
    int64_t cut_sequences = 0;
  };
  QueueStats Stats() const;
  // Queued requests that their callers have cancelled and the queue has not yet dropped (it drops
  // them when they reach its head). O(queued requests): for tests and diagnostics.
  int CancelledQueuedRequests() const;
  // The throughput estimate: engine seconds per token of one engine, from the batches run so far
  // (or BatchSchedulerOptions::initial_seconds_per_token); 0 while there is none.
  double SecondsPerToken() const;
  const BatchSchedulerOptions& options() const;
  const Engine& engine(int index) const;
  int num_engines() const;

 private:
  class Impl;
  explicit BatchScheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dflash::serving
