#include "server/batching/batch_scheduler.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/batching/batch_packing.h"
#include "server/batching/host_work_pool.h"
#include "server/batching/request_queue.h"
#include "server/batching/request_validation.h"

namespace dflash::serving {
namespace {

// The weight of the newest batch in the throughput estimate: about the last ten batches count, so
// the estimate follows a change of load within a few batches without jumping at one outlier.
constexpr double kThroughputSmoothing = 0.2;
// Admission takes a request only when its expected wait, times this, ends before its deadline.
constexpr double kAdmissionHeadroom = 1.25;
// Host threads per engine by default: one packs the next batch while the others answer, and
// answering (response building and sending in the callbacks) may cost as much host time per batch
// as the engine's run on a fast device.
constexpr int kHostThreadsPerEngine = 2;
// A batch cut ahead is packed on a host thread from this many tokens; a smaller one is packed by
// the runner before its Run starts, since its packing (a few microseconds) costs less than waking
// a host thread for it (measured with bench/host_path_cpu.sh: the hand-off added CPU per call).
constexpr int kHostPackedTokens = 4096;
// Parts answered per host task: a large batch's answers spread over the host threads, while a
// small one costs a single hand-off.
constexpr size_t kPartsPerDeliveryTask = 32;
// How many batches of one engine may wait for their answers to be delivered before its runner
// waits: enough to keep the engine busy while the host threads answer the previous batch, and a
// bound on the outputs held when callbacks are slower than the engine.
constexpr int kMaxBatchesInDelivery = 2;

absl::Status ValidateOptions(const std::vector<std::unique_ptr<Engine>>& engines,
                             const BatchSchedulerOptions& options) {
  if (engines.empty()) return absl::InvalidArgumentError("batch scheduler needs an engine");
  for (size_t e = 0; e < engines.size(); ++e) {
    if (engines[e] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("engine ", e, " is null"));
    }
    const ModelConfig& first = engines[0]->config();
    const ModelConfig& config = engines[e]->config();
    if (config.num_labels() != first.num_labels() || config.hidden_size != first.hidden_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("engine ", e, " serves a different model than engine 0"));
    }
  }
  if (options.max_batch_tokens < 1 || options.max_batch_sequences < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch budgets must be positive: max_batch_tokens ", options.max_batch_tokens,
                     ", max_batch_sequences ", options.max_batch_sequences));
  }
  if (options.max_queue_delay < absl::ZeroDuration() ||
      options.max_queue_delay == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("max_queue_delay must be finite and not negative");
  }
  if (options.max_queued_requests < 0 || options.max_queued_sequences < 0 ||
      options.max_queued_tokens < 0) {
    return absl::InvalidArgumentError("admission limits must not be negative (0: no limit)");
  }
  if (options.host_threads < 0) {
    return absl::InvalidArgumentError("host_threads must not be negative (0: two per engine)");
  }
  if (!std::isfinite(options.initial_seconds_per_token) || options.initial_seconds_per_token < 0) {
    return absl::InvalidArgumentError(
        "initial_seconds_per_token must be finite and not negative (0: no estimate)");
  }
  return absl::OkStatus();
}

// The full-budget batch of WarmUp.
PackedBatch WarmUpBatch(int max_batch_tokens, int max_batch_sequences, int sequence_length,
                        int32_t token_id) {
  const int length = std::min(sequence_length, max_batch_tokens);
  PackedBatch batch;
  int remaining = max_batch_tokens;
  while (remaining > 0 && batch.num_sequences() < max_batch_sequences) {
    const int this_length = std::min(length, remaining);
    batch.Append(std::vector<int32_t>(static_cast<size_t>(this_length), token_id));
    remaining -= this_length;
  }
  return batch;
}

}  // namespace

class BatchScheduler::Impl {
 public:
  Impl(std::vector<std::unique_ptr<Engine>> engines, const BatchSchedulerOptions& options,
       std::shared_ptr<BatchObserver> observer)
      : options_(options),
        observer_(std::move(observer)),
        host_pool_(options.host_threads > 0
                       ? options.host_threads
                       : kHostThreadsPerEngine * static_cast<int>(engines.size())),
        queue_(options.max_batch_tokens, options.max_batch_sequences) {
    options_.run_options.normalize = false;  // Callers normalize; the scheduler never does.
    for (std::unique_ptr<Engine>& engine : engines) {
      workers_.push_back(std::make_unique<Worker>());
      workers_.back()->engine = std::move(engine);
    }
    healthy_workers_ = static_cast<int>(workers_.size());
    idle_runners_ = healthy_workers_;
    if (options_.initial_seconds_per_token > 0) {
      // As if one full batch had run at that speed, so that real batches refine it at once.
      throughput_tokens_ = options_.max_batch_tokens;
      throughput_seconds_ = options_.initial_seconds_per_token * options_.max_batch_tokens;
    }
  }

  void Start() {
    for (std::unique_ptr<Worker>& worker : workers_) {
      worker->thread = std::thread([this, w = worker.get()] { WorkerLoop(*w); });
    }
  }

  absl::Status WarmUp(int sequence_length, uint32_t outputs);
  absl::Status Submit(InferenceRequest request);
  void Shutdown();
  int AbortQueued(const absl::Status& status);
  QueueStats Stats() const;
  int CancelledQueuedRequests() const;
  double SecondsPerToken() const;

  const BatchSchedulerOptions& options() const { return options_; }
  const Engine& engine(int index) const { return *workers_.at(index)->engine; }
  int num_engines() const { return static_cast<int>(workers_.size()); }

 private:
  // A batch cut from the queue, packed or being packed.
  struct PreparedBatch {
    std::vector<BatchPart> parts;
    PackedBatch batch;
    int tokens = 0;  // Of the parts; the packed batch's total once packed.
    bool packed = false;
    absl::Duration pack_time;
  };

  // One engine and its runner thread.
  struct Worker {
    std::unique_ptr<Engine> engine;
    // Serializes Run between WarmUp (on the caller's thread) and the runner.
    std::mutex engine_mutex;
    std::thread thread;
    bool idle = true;  // Counted in idle_runners_; under the scheduler's lock.
    // Set when this worker's engine failed for good and no healthy engine is left: the runner
    // then answers every batch with this status instead of running it. Runner thread only.
    absl::Status failed;

    // The batch cut while the engine runs another, packed by a host thread. `prefetching` belongs
    // to the runner; `prefetch.parts` is written under the scheduler's lock before the packing
    // task starts and only read until the runner takes the batch up (AbortQueued reads it under
    // that lock); `prefetch.batch` and `prefetch.pack_time` belong to the packing task until
    // `prefetch_packed`.
    bool prefetching = false;
    PreparedBatch prefetch;
    std::mutex prefetch_mutex;
    std::condition_variable prefetch_done;
    bool prefetch_packed ABSL_GUARDED_BY(prefetch_mutex) = false;

    // Batches whose answers the host threads have not finished delivering.
    std::mutex delivery_mutex;
    std::condition_variable delivery_done;
    int batches_in_delivery ABSL_GUARDED_BY(delivery_mutex) = 0;
  };

  // The answering of one successful batch, shared by its delivery tasks.
  struct Delivery {
    Worker* worker = nullptr;
    BatchOutput output;
    std::vector<BatchPart> parts;
    absl::Time start;
    absl::Time end;
    absl::Duration pack_time;
    std::atomic<int> tasks_left{0};
  };

  void WorkerLoop(Worker& worker);
  // The batch the runner runs next: the prefetched one, a batch of a retired engine, or one cut
  // now (waiting until one is due). nullopt when shutting down with nothing left. Parts of
  // requests that failed, were cancelled or expired since the cut are taken out first.
  std::optional<PreparedBatch> NextBatch(Worker& worker);
  // Blocks until a batch is due by the queue-delay policy and takes it (not packed yet), or takes a
  // retired engine's packed batch; nullopt when there is nothing left to do during shutdown.
  std::optional<PreparedBatch> WaitAndTakeBatch(Worker& worker);
  // At the start of a Run of `running_tokens` tokens: cuts the next batch if the queue fills one,
  // and packs it (a large one on a host thread).
  void Prefetch(Worker& worker, int running_tokens);
  // Waits for the prefetched batch to be packed and takes it up.
  PreparedBatch AwaitPrefetch(Worker& worker);
  PreparedBatch AwaitPrefetchPacked(Worker& worker);  // Without its parts.
  void TakePrefetchPartsLocked(Worker& worker, PreparedBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Removes the parts whose request has failed, was cancelled or expired (a batch cut ahead of its
  // start); repacks the batch when any was removed.
  void DropStaleParts(PreparedBatch& batch);
  void RunBatch(Worker& worker, PreparedBatch prepared);
  // Hands a successful batch's outputs to the host threads, split into tasks of a few parts.
  void Deliver(std::shared_ptr<Delivery> delivery);
  void DeliverParts(Delivery& delivery, size_t begin, size_t end, BatchOffset offset);
  // Blocks while `worker` is kMaxBatchesInDelivery batches ahead of its answers; then counts one
  // more.
  void AwaitDeliverySlot(Worker& worker);
  void DeliveryDone(Worker& worker, absl::Duration pack, absl::Duration run,
                    std::optional<absl::Duration> device, absl::Time run_end);
  // Answers `finished` on a host thread.
  void AnswerOnHost(std::vector<std::shared_ptr<PendingRequest>> finished);
  // After an engine reported itself unhealthy: true when the worker may stop (another engine
  // serves the queue and takes over its prefetched batch); false for the last one, which stays to
  // fail what is queued.
  bool RetireWorker(Worker& worker, const absl::Status& health);
  // Bookkeeping after a batch's `parts` ended; returns the requests that may now be answered.
  std::vector<std::shared_ptr<PendingRequest>> FinishParts(std::span<const BatchPart> parts,
                                                           const absl::Status& status,
                                                           absl::Time start, absl::Time end);
  // The throughput estimate; 0 while there is none.
  double SecondsPerTokenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether the queue-delay policy lets a batch be cut now.
  bool BatchDueLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // RESOURCE_EXHAUSTED when `pending`, queued now, would by the estimate end after its deadline.
  absl::Status CheckDeadline(const PendingRequest& pending) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Calls `done`; the request must be finished and out of the queue. No lock may be held.
  void Answer(PendingRequest& pending);
  void ReportQueueDepth();

  BatchSchedulerOptions options_;
  const std::shared_ptr<BatchObserver> observer_;
  std::vector<std::unique_ptr<Worker>> workers_;
  HostWorkPool host_pool_;
  std::once_flag shutdown_once_;

  mutable std::mutex mutex_;
  // The queue changed, a retired engine left a batch, a prefetched batch was taken up, or shutdown
  // began.
  std::condition_variable work_available_;
  RequestQueue queue_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  int healthy_workers_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Status no_engine_ ABSL_GUARDED_BY(mutex_);  // Set when every engine failed.
  // Prefetched batches not yet taken up by their runner: during shutdown, a runner with nothing to
  // do waits for them, since a retiring engine hands its prefetched batch over to the others.
  int prefetched_batches_ ABSL_GUARDED_BY(mutex_) = 0;
  // Parts and sequences in batches cut ahead (prefetched or orphaned) that have not started:
  // QueueStats reports them beside the queue, since they are neither queued nor running.
  int cut_requests_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t cut_sequences_ ABSL_GUARDED_BY(mutex_) = 0;
  // Runners without a batch (starting, or in WaitAndTakeBatch, woken or not): while one is, the
  // others do not prefetch.
  int idle_runners_ ABSL_GUARDED_BY(mutex_) = 0;
  std::deque<PreparedBatch> orphans_ ABSL_GUARDED_BY(mutex_);  // Packed batches of retired engines.
  // The throughput estimate is the ratio of these exponentially weighted averages of the batches'
  // engine time and tokens, rather than an average of each batch's seconds per token: a batch then
  // weighs by its tokens, and small batches, whose fixed costs per batch make their tokens look
  // expensive, cannot talk the estimate of a full queue up. Successful batches only (a failure may
  // return early); the warm-up batch does not count (its one-off costs would make the estimate
  // refuse requests the engines can serve).
  double throughput_seconds_ ABSL_GUARDED_BY(mutex_) = 0;
  double throughput_tokens_ ABSL_GUARDED_BY(mutex_) = 0;
  // Tokens of the batches taken and not yet run: a queued request also waits for them.
  int64_t running_tokens_ ABSL_GUARDED_BY(mutex_) = 0;

  // Serializes OnQueueDepth so that the last report is the current depth. Taken before mutex_,
  // never while holding it.
  std::mutex depth_report_mutex_;
};

absl::Status BatchScheduler::Impl::WarmUp(int sequence_length, uint32_t outputs) {
  if (sequence_length < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("warm-up sequence length must be positive, got ", sequence_length));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return absl::UnavailableError("batch scheduler is shut down");
  }
  RunOptions run_options = options_.run_options;
  run_options.outputs = outputs;
  for (size_t e = 0; e < workers_.size(); ++e) {
    Worker& worker = *workers_[e];
    const PackedBatch batch = WarmUpBatch(options_.max_batch_tokens, options_.max_batch_sequences,
                                          sequence_length, worker.engine->config().pad_token_id);
    absl::StatusOr<BatchOutput> output;
    {
      std::lock_guard<std::mutex> engine_lock(worker.engine_mutex);
      output = worker.engine->Run(batch, run_options);
    }
    absl::Status status = output.status();
    if (status.ok()) status = CheckBatchOutput(*output, batch, outputs);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("warm-up batch of ", batch.total_tokens(), " tokens in ",
                                       batch.num_sequences(), " sequences failed on engine ", e,
                                       ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status BatchScheduler::Impl::Submit(InferenceRequest request) {
  DFLASH_RETURN_IF_ERROR(
      ValidateRequest(request, options_.max_batch_tokens, workers_[0]->engine->config()));
  auto pending = std::make_shared<PendingRequest>();
  for (const SequenceInput& sequence : request.sequences) {
    pending->tokens += static_cast<int64_t>(sequence.ids.size());
  }
  const auto sequences = static_cast<int64_t>(request.sequences.size());
  if (options_.max_queued_sequences > 0 && sequences > options_.max_queued_sequences) {
    return absl::InvalidArgumentError(absl::StrCat("request has ", sequences,
                                                   " sequences, more than the queue holds (",
                                                   options_.max_queued_sequences, "); split it"));
  }
  if (options_.max_queued_tokens > 0 && pending->tokens > options_.max_queued_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("request has ", pending->tokens,
                                                   " tokens, more than the queue holds (",
                                                   options_.max_queued_tokens, "); split it"));
  }
  pending->outputs.resize(request.sequences.size());
  pending->request = std::move(request);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return absl::UnavailableError("batch scheduler is shutting down");
    DFLASH_RETURN_IF_ERROR(no_engine_);
    DFLASH_RETURN_IF_ERROR(CheckDeadline(*pending));
    if (options_.max_queued_requests > 0 && queue_.requests() >= options_.max_queued_requests) {
      return absl::ResourceExhaustedError(
          absl::StrCat("queue full: ", queue_.requests(), " requests waiting (limit ",
                       options_.max_queued_requests, "); retry with backoff"));
    }
    if (options_.max_queued_sequences > 0 &&
        queue_.sequences() + sequences > options_.max_queued_sequences) {
      return absl::ResourceExhaustedError(
          absl::StrCat("queue full: ", queue_.sequences(), " sequences waiting (limit ",
                       options_.max_queued_sequences, "); retry with backoff"));
    }
    if (options_.max_queued_tokens > 0 &&
        queue_.tokens() + pending->tokens > options_.max_queued_tokens) {
      return absl::ResourceExhaustedError(
          absl::StrCat("queue full: ", queue_.tokens(), " tokens waiting (limit ",
                       options_.max_queued_tokens, "); retry with backoff"));
    }
    pending->submit_time = absl::Now();
    queue_.Push(std::move(pending));
  }
  work_available_.notify_one();
  ReportQueueDepth();
  return absl::OkStatus();
}

void BatchScheduler::Impl::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_available_.notify_all();
    for (std::unique_ptr<Worker>& worker : workers_) {
      if (worker->thread.joinable()) worker->thread.join();
    }
    // The runners have handed every batch over; the host threads answer what is left.
    host_pool_.Stop();
  });
}

int BatchScheduler::Impl::AbortQueued(const absl::Status& status) {
  std::vector<std::shared_ptr<PendingRequest>> to_answer;
  int aborted = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    // The queue's own cut empties it in its order and settles expired and cancelled requests the
    // usual way; what it takes here never reaches an engine, so no throughput estimate applies.
    const absl::Time now = absl::Now();
    while (!queue_.empty()) {
      TakenBatch taken = queue_.TakeBatch(now, now, /*seconds_per_token=*/0);
      if (taken.parts.empty() && taken.dropped.empty()) break;  // No progress: runners drain it.
      for (std::shared_ptr<PendingRequest>& pending : taken.dropped) {
        to_answer.push_back(std::move(pending));
      }
      for (BatchPart& part : taken.parts) {
        PendingRequest& pending = *part.request;
        --pending.parts_in_flight;
        if (pending.status.ok()) {
          pending.status = status;
          pending.dropped = true;  // Answered without compute, like an expired request.
          ++aborted;
          // The rest of a request larger than a batch went back into the queue; taking it again
          // would answer the request once more.
          if (pending.next_sequence < pending.num_sequences()) queue_.Remove(pending);
        }
        if (pending.finished()) to_answer.push_back(std::move(part.request));
      }
    }
    // Batches cut but not started are not computed either: their runners drop these parts when
    // they take them up (DropStaleParts) and answer the requests whose last part that was.
    auto abort_parts = [&](const std::vector<BatchPart>& parts) {
      for (const BatchPart& part : parts) {
        PendingRequest& pending = *part.request;
        if (!pending.status.ok()) continue;
        pending.status = status;
        pending.dropped = true;
        ++aborted;
      }
    };
    for (std::unique_ptr<Worker>& worker : workers_) abort_parts(worker->prefetch.parts);
    for (const PreparedBatch& orphan : orphans_) abort_parts(orphan.parts);
  }
  work_available_.notify_all();
  ReportQueueDepth();
  for (std::shared_ptr<PendingRequest>& pending : to_answer) Answer(*pending);
  return aborted;
}

BatchScheduler::QueueStats BatchScheduler::Impl::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return QueueStats{queue_.requests(), queue_.sequences(), queue_.tokens(), cut_requests_,
                    cut_sequences_};
}

int BatchScheduler::Impl::CancelledQueuedRequests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.CancelledRequests();
}

double BatchScheduler::Impl::SecondsPerToken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return SecondsPerTokenLocked();
}

double BatchScheduler::Impl::SecondsPerTokenLocked() const {
  return throughput_tokens_ > 0 ? throughput_seconds_ / throughput_tokens_ : 0;
}

absl::Status BatchScheduler::Impl::CheckDeadline(const PendingRequest& pending) const {
  const double seconds_per_token = SecondsPerTokenLocked();
  const absl::Time deadline = pending.request.deadline;
  const absl::Time now = absl::Now();
  // A deadline already passed is left to the queue, which answers it DEADLINE_EXCEEDED.
  if (seconds_per_token <= 0 || deadline == absl::InfiniteFuture() || deadline <= now) {
    return absl::OkStatus();
  }
  // The engines share the queue, so it drains at their combined speed, after the batches they
  // are running.
  const int64_t ahead = queue_.TokensAtOrAbove(pending.request.priority) + running_tokens_;
  const absl::Duration wait =
      absl::Seconds(seconds_per_token * static_cast<double>(ahead + pending.tokens) /
                    std::max(healthy_workers_, 1));
  // Headroom for the estimate's error: a request admitted to finish just at its deadline is
  // mostly finished just after it, computed for a caller who has given up.
  if (now + wait * kAdmissionHeadroom <= deadline) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("server overloaded: expected wait ",
                   absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(1))), " (", ahead,
                   " tokens queued or running ahead, ", pending.tokens,
                   " of this request) is too close to the time to the deadline (",
                   absl::FormatDuration(absl::Trunc(deadline - now, absl::Milliseconds(1))),
                   "); retry later or on another replica"));
}

void BatchScheduler::Impl::WorkerLoop(Worker& worker) {
  // Named so that per-thread CPU time (top -H, /proc/<pid>/task) shows the engine runners.
  pthread_setname_np(pthread_self(), "dflash-runner");
  while (std::optional<PreparedBatch> batch = NextBatch(worker)) {
    if (!batch->parts.empty()) RunBatch(worker, std::move(*batch));
    if (worker.failed.ok()) {
      if (absl::Status health = worker.engine->Health(); !health.ok()) {
        if (RetireWorker(worker, health)) return;
      }
    }
  }
}

std::optional<BatchScheduler::Impl::PreparedBatch> BatchScheduler::Impl::NextBatch(Worker& worker) {
  std::optional<PreparedBatch> batch;
  if (worker.prefetching) {
    batch = AwaitPrefetch(worker);
  } else {
    batch = WaitAndTakeBatch(worker);
    if (!batch.has_value()) return std::nullopt;
    if (!batch->packed) {
      // Nothing ran ahead of this cut, so there is nothing to overlap the packing with.
      const absl::Time start = absl::Now();
      batch->batch = PackParts(batch->parts);
      batch->packed = true;
      batch->pack_time += absl::Now() - start;
      return batch;  // Cut just now: nothing in it has gone stale.
    }
  }
  DropStaleParts(*batch);
  return batch;
}

std::optional<BatchScheduler::Impl::PreparedBatch> BatchScheduler::Impl::WaitAndTakeBatch(
    Worker& worker) {
  TakenBatch taken;
  PreparedBatch batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!worker.idle) {
      worker.idle = true;
      ++idle_runners_;
    }
    while (true) {
      if (!orphans_.empty()) {
        batch = std::move(orphans_.front());
        orphans_.pop_front();
        worker.idle = false;
        --idle_runners_;
        return batch;
      }
      if (queue_.empty()) {
        if (stopping_ && prefetched_batches_ == 0) return std::nullopt;
        work_available_.wait(lock);
        continue;
      }
      const absl::Time now = absl::Now();
      if (BatchDueLocked(now)) break;
      const absl::Time due = *queue_.OldestSubmitTime() + options_.max_queue_delay;
      work_available_.wait_until(lock, absl::ToChronoTime(due));
    }
    // Under continuous batching, engines idle at the same time divide what is queued (the rest is
    // due at once for the next one), so that a burst runs on all of them instead of on one while
    // the others wait for the next burst.
    int64_t share = std::numeric_limits<int64_t>::max();
    if (idle_runners_ > 1 && !stopping_ && options_.max_queue_delay == absl::ZeroDuration()) {
      share = (queue_.tokens() + idle_runners_ - 1) / idle_runners_;
    }
    worker.idle = false;
    --idle_runners_;
    const absl::Time now = absl::Now();
    taken = queue_.TakeBatch(now, now, SecondsPerTokenLocked(), share);
    running_tokens_ += taken.tokens;
    batch.pack_time = absl::Now() - now;
    // Another free runner may take what is left; Submit woke only one.
    if (!queue_.empty()) work_available_.notify_one();
  }
  ReportQueueDepth();
  AnswerOnHost(std::move(taken.dropped));
  batch.parts = std::move(taken.parts);
  batch.tokens = taken.tokens;
  return batch;
}

bool BatchScheduler::Impl::BatchDueLocked(absl::Time now) const {
  if (queue_.empty()) return false;
  // Continuous batching, a full budget and draining at shutdown take what is there now.
  if (stopping_ || options_.max_queue_delay == absl::ZeroDuration() || queue_.FillsBatch()) {
    return true;
  }
  return now >= *queue_.OldestSubmitTime() + options_.max_queue_delay;
}

void BatchScheduler::Impl::Prefetch(Worker& worker, int running_tokens) {
  TakenBatch taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const absl::Time now = absl::Now();
    // Only a full batch is cut ahead: one that is not full could still take requests arriving
    // during this run, and cutting it now would make them wait for one more run (measured with
    // bench/host_path_cpu.sh and a 1 ms engine: +17% median latency at 16 calls in flight). And an
    // idle engine takes the batch at once rather than a busy one after its run.
    if (idle_runners_ > 0 || !queue_.FillsBatch()) return;
    const double seconds_per_token = SecondsPerTokenLocked();
    // The batch starts when the one about to run ends.
    const absl::Time start = now + absl::Seconds(seconds_per_token * running_tokens);
    taken = queue_.TakeBatch(now, start, seconds_per_token);
    running_tokens_ += taken.tokens;
    if (!taken.parts.empty()) {
      worker.prefetching = true;
      worker.prefetch.parts = std::move(taken.parts);
      worker.prefetch.tokens = taken.tokens;
      ++prefetched_batches_;
      cut_requests_ += static_cast<int>(worker.prefetch.parts.size());
      cut_sequences_ += taken.sequences;
    }
    if (!queue_.empty()) work_available_.notify_one();
  }
  ReportQueueDepth();
  AnswerOnHost(std::move(taken.dropped));
  if (!worker.prefetching) return;
  auto pack = [&worker] {
    const absl::Time start = absl::Now();
    PackedBatch packed = PackParts(worker.prefetch.parts);
    std::lock_guard<std::mutex> lock(worker.prefetch_mutex);
    worker.prefetch.batch = std::move(packed);
    worker.prefetch.pack_time = absl::Now() - start;
    worker.prefetch_packed = true;
    worker.prefetch_done.notify_one();
  };
  {
    std::lock_guard<std::mutex> lock(worker.prefetch_mutex);
    worker.prefetch_packed = false;
  }
  if (worker.prefetch.tokens < kHostPackedTokens) {
    pack();
  } else {
    host_pool_.Post(HostWorkPool::Urgency::kUrgent, std::move(pack));
  }
}

BatchScheduler::Impl::PreparedBatch BatchScheduler::Impl::AwaitPrefetch(Worker& worker) {
  PreparedBatch batch = AwaitPrefetchPacked(worker);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TakePrefetchPartsLocked(worker, batch);
  }
  // During shutdown, a runner with nothing left to do waits for the prefetched batches.
  work_available_.notify_all();
  return batch;
}

BatchScheduler::Impl::PreparedBatch BatchScheduler::Impl::AwaitPrefetchPacked(Worker& worker) {
  PreparedBatch batch;
  {
    std::unique_lock<std::mutex> lock(worker.prefetch_mutex);
    worker.prefetch_done.wait(lock, [&worker] { return worker.prefetch_packed; });
    batch.batch = std::move(worker.prefetch.batch);
    batch.pack_time = worker.prefetch.pack_time;
  }
  batch.packed = true;
  worker.prefetching = false;
  return batch;
}

void BatchScheduler::Impl::TakePrefetchPartsLocked(Worker& worker, PreparedBatch& batch) {
  batch.parts = std::move(worker.prefetch.parts);
  worker.prefetch.parts.clear();
  batch.tokens = worker.prefetch.tokens;
  --prefetched_batches_;
}

void BatchScheduler::Impl::DropStaleParts(PreparedBatch& batch) {
  std::vector<std::shared_ptr<PendingRequest>> finished;
  bool requeued_removed = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const absl::Time now = absl::Now();
    std::vector<BatchPart> kept;
    kept.reserve(batch.parts.size());
    for (BatchPart& part : batch.parts) {
      --cut_requests_;  // The batch starts: its parts leave the cut-ahead count.
      cut_sequences_ -= part.num_sequences;
      PendingRequest& pending = *part.request;
      if (pending.status.ok()) {
        absl::Status drop = DropStatus(pending, now);
        if (drop.ok()) {
          kept.push_back(std::move(part));
          continue;
        }
        pending.status = std::move(drop);
        pending.dropped = true;
        if (pending.next_sequence < pending.num_sequences()) {
          queue_.Remove(pending);
          requeued_removed = true;
        }
      }
      --pending.parts_in_flight;
      running_tokens_ -= part.tokens;
      batch.tokens -= part.tokens;
      if (pending.finished()) finished.push_back(std::move(part.request));
    }
    batch.parts = std::move(kept);
  }
  if (requeued_removed) ReportQueueDepth();
  if (batch.tokens != batch.batch.total_tokens()) {
    // Rare (a failure, cancellation or expiry within one engine run): the runner packs again.
    const absl::Time start = absl::Now();
    batch.batch = PackParts(batch.parts);
    batch.pack_time += absl::Now() - start;
  }
  AnswerOnHost(std::move(finished));
}

void BatchScheduler::Impl::RunBatch(Worker& worker, PreparedBatch prepared) {
  const PackedBatch& batch = prepared.batch;
  RunOptions run_options = options_.run_options;
  run_options.outputs = UnionOfOutputs(prepared.parts);
  Prefetch(worker, batch.total_tokens());

  const absl::Time start = absl::Now();
  absl::StatusOr<BatchOutput> output;
  if (!worker.failed.ok()) {
    output = worker.failed;
  } else {
    std::lock_guard<std::mutex> engine_lock(worker.engine_mutex);
    output = worker.engine->Run(batch, run_options);
  }
  const absl::Time end = absl::Now();

  absl::Status status = output.status();
  if (status.ok()) status = CheckBatchOutput(*output, batch, run_options.outputs);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_tokens_ -= batch.total_tokens();
    if (status.ok() && batch.total_tokens() > 0) {
      const double seconds = absl::ToDoubleSeconds(end - start);
      const double tokens = batch.total_tokens();
      if (throughput_tokens_ > 0) {
        throughput_seconds_ += kThroughputSmoothing * (seconds - throughput_seconds_);
        throughput_tokens_ += kThroughputSmoothing * (tokens - throughput_tokens_);
      } else {
        throughput_seconds_ = seconds;
        throughput_tokens_ = tokens;
      }
    }
  }
  if (observer_ != nullptr) {
    observer_->OnBatch(batch.num_sequences(), batch.total_tokens(), end - start, status);
  }
  AwaitDeliverySlot(worker);
  if (!status.ok()) {
    Log().error("engine batch of {} sequences, {} tokens failed: {}", batch.num_sequences(),
                batch.total_tokens(), status.ToString());
    // Settled here, before this runner takes up its prefetched batch, so that the parts of these
    // requests in it are dropped rather than computed for nothing.
    std::vector<std::shared_ptr<PendingRequest>> finished =
        FinishParts(prepared.parts, status, start, end);
    ReportQueueDepth();  // Failed requests' queued parts were removed.
    prepared.parts.clear();
    host_pool_.Post(HostWorkPool::Urgency::kNormal,
                    [this, &worker, finished = std::move(finished), pack = prepared.pack_time,
                     run = end - start, end]() mutable {
                      for (std::shared_ptr<PendingRequest>& pending : finished) {
                        Answer(*pending);
                        pending.reset();
                      }
                      DeliveryDone(worker, pack, run, std::nullopt, end);
                    });
    return;
  }
  auto delivery = std::make_shared<Delivery>();
  delivery->worker = &worker;
  delivery->output = *std::move(output);
  delivery->parts = std::move(prepared.parts);
  delivery->start = start;
  delivery->end = end;
  delivery->pack_time = prepared.pack_time;
  Deliver(std::move(delivery));
}

void BatchScheduler::Impl::Deliver(std::shared_ptr<Delivery> delivery) {
  const size_t parts = delivery->parts.size();
  const size_t tasks = (parts + kPartsPerDeliveryTask - 1) / kPartsPerDeliveryTask;
  delivery->tasks_left.store(static_cast<int>(tasks), std::memory_order_relaxed);
  BatchOffset offset;
  for (size_t task = 0; task < tasks; ++task) {
    const size_t begin = task * kPartsPerDeliveryTask;
    const size_t end = std::min(parts, begin + kPartsPerDeliveryTask);
    host_pool_.Post(HostWorkPool::Urgency::kNormal, [this, delivery, begin, end, offset] {
      DeliverParts(*delivery, begin, end, offset);
    });
    for (size_t p = begin; p < end; ++p) {
      offset.sequence += delivery->parts[p].num_sequences;
      offset.token += static_cast<size_t>(delivery->parts[p].tokens);
    }
  }
}

void BatchScheduler::Impl::DeliverParts(Delivery& delivery, size_t begin, size_t end,
                                        BatchOffset offset) {
  const std::span<BatchPart> parts(delivery.parts.data() + begin, end - begin);
  ScatterOutputs(delivery.output, parts, offset);
  std::vector<std::shared_ptr<PendingRequest>> finished =
      FinishParts(parts, absl::OkStatus(), delivery.start, delivery.end);
  // Let finished requests be freed right after their answer.
  for (BatchPart& part : parts) part.request.reset();
  for (std::shared_ptr<PendingRequest>& pending : finished) {
    Answer(*pending);
    pending.reset();
  }
  if (delivery.tasks_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    const double device_seconds = delivery.output.device_seconds;  // Negative: not measured.
    DeliveryDone(*delivery.worker, delivery.pack_time, delivery.end - delivery.start,
                 device_seconds >= 0 ? std::optional(absl::Seconds(device_seconds)) : std::nullopt,
                 delivery.end);
  }
}

void BatchScheduler::Impl::AwaitDeliverySlot(Worker& worker) {
  std::unique_lock<std::mutex> lock(worker.delivery_mutex);
  worker.delivery_done.wait(
      lock, [&worker] { return worker.batches_in_delivery < kMaxBatchesInDelivery; });
  ++worker.batches_in_delivery;
}

void BatchScheduler::Impl::DeliveryDone(Worker& worker, absl::Duration pack, absl::Duration run,
                                        std::optional<absl::Duration> device, absl::Time run_end) {
  if (observer_ != nullptr) observer_->OnBatchStages(pack, run, device, absl::Now() - run_end);
  {
    std::lock_guard<std::mutex> lock(worker.delivery_mutex);
    --worker.batches_in_delivery;
  }
  worker.delivery_done.notify_one();
}

void BatchScheduler::Impl::AnswerOnHost(std::vector<std::shared_ptr<PendingRequest>> finished) {
  if (finished.empty()) return;
  host_pool_.Post(HostWorkPool::Urgency::kNormal, [this, finished = std::move(finished)]() mutable {
    for (std::shared_ptr<PendingRequest>& pending : finished) {
      Answer(*pending);
      pending.reset();
    }
  });
}

bool BatchScheduler::Impl::RetireWorker(Worker& worker, const absl::Status& health) {
  std::optional<PreparedBatch> handed_over;
  if (worker.prefetching) handed_over = AwaitPrefetchPacked(worker);
  std::lock_guard<std::mutex> lock(mutex_);
  // Handed over under the same lock that counts it out of the prefetched batches, so that no
  // runner sees neither and stops during shutdown. A healthy runner takes it up; without one,
  // this runner fails it like the rest of the queue.
  if (handed_over.has_value()) {
    TakePrefetchPartsLocked(worker, *handed_over);
    orphans_.push_back(*std::move(handed_over));
  }
  --healthy_workers_;
  Log().error("engine on {} stopped serving ({} healthy engine(s) left): {}",
              worker.engine->Info().device, healthy_workers_, health.ToString());
  if (healthy_workers_ > 0) {
    // Wake the healthy runners for the handed-over batch, and in case this one was the only one
    // waiting for the queue.
    work_available_.notify_all();
    return true;
  }
  no_engine_ = absl::UnavailableError(
      absl::StrCat("no healthy engine left for this model: ", health.message()));
  worker.failed = no_engine_;
  return false;
}

std::vector<std::shared_ptr<PendingRequest>> BatchScheduler::Impl::FinishParts(
    std::span<const BatchPart> parts, const absl::Status& status, absl::Time start,
    absl::Time end) {
  std::vector<std::shared_ptr<PendingRequest>> finished;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const BatchPart& part : parts) {
    PendingRequest& pending = *part.request;
    --pending.parts_in_flight;
    pending.first_batch_start = std::min(pending.first_batch_start, start);
    pending.last_batch_end = std::max(pending.last_batch_end, end);
    if (!status.ok() && pending.status.ok()) {
      pending.status = status;
      // Its queued rest would be computed for nothing.
      if (pending.next_sequence < pending.num_sequences()) queue_.Remove(pending);
    }
    if (pending.finished()) finished.push_back(part.request);
  }
  return finished;
}

void BatchScheduler::Impl::Answer(PendingRequest& pending) {
  if (!pending.status.ok()) {
    if (pending.dropped && observer_ != nullptr) observer_->OnDropped(pending.status.code());
    pending.request.done(pending.status);
    return;
  }
  InferenceResult result;
  result.outputs = std::move(pending.outputs);
  result.queue_time = pending.first_batch_start - pending.submit_time;
  result.inference_time = pending.last_batch_end - pending.first_batch_start;
  result.tokens = pending.tokens;
  pending.request.done(std::move(result));
}

void BatchScheduler::Impl::ReportQueueDepth() {
  if (observer_ == nullptr) return;
  std::lock_guard<std::mutex> report_lock(depth_report_mutex_);
  const QueueStats stats = Stats();
  observer_->OnQueueDepth(stats.requests, stats.sequences, stats.tokens);
}

absl::StatusOr<std::unique_ptr<BatchScheduler>> BatchScheduler::Create(
    std::vector<std::unique_ptr<Engine>> engines, const BatchSchedulerOptions& options,
    std::shared_ptr<BatchObserver> observer) {
  DFLASH_RETURN_IF_ERROR(ValidateOptions(engines, options));
  auto impl = std::make_unique<Impl>(std::move(engines), options, std::move(observer));
  impl->Start();
  return std::unique_ptr<BatchScheduler>(new BatchScheduler(std::move(impl)));
}

BatchScheduler::BatchScheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BatchScheduler::~BatchScheduler() { Shutdown(); }

absl::Status BatchScheduler::WarmUp(int sequence_length, uint32_t outputs) {
  return impl_->WarmUp(sequence_length, outputs);
}

absl::Status BatchScheduler::Submit(InferenceRequest request) {
  return impl_->Submit(std::move(request));
}

void BatchScheduler::Shutdown() { impl_->Shutdown(); }

int BatchScheduler::AbortQueued(const absl::Status& status) { return impl_->AbortQueued(status); }

BatchScheduler::QueueStats BatchScheduler::Stats() const { return impl_->Stats(); }

int BatchScheduler::CancelledQueuedRequests() const { return impl_->CancelledQueuedRequests(); }

double BatchScheduler::SecondsPerToken() const { return impl_->SecondsPerToken(); }

const BatchSchedulerOptions& BatchScheduler::options() const { return impl_->options(); }

const Engine& BatchScheduler::engine(int index) const { return impl_->engine(index); }

int BatchScheduler::num_engines() const { return impl_->num_engines(); }

}  // namespace dflash::serving
