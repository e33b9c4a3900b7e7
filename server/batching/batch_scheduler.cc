#include "server/batching/batch_scheduler.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "engine/common/logging.h"
#include "engine/common/status_macros.h"
#include "server/batching/batch_packing.h"
#include "server/batching/request_queue.h"
#include "server/batching/request_validation.h"

namespace dflash::serving {
namespace {

// The weight of the newest batch in the throughput estimate: about the last ten batches count, so
// the estimate follows a change of load within a few batches without jumping at one outlier.
constexpr double kThroughputSmoothing = 0.2;
// Admission takes a request only when its expected wait, times this, ends before its deadline.
constexpr double kAdmissionHeadroom = 1.25;

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
        queue_(options.max_batch_tokens, options.max_batch_sequences) {
    options_.run_options.normalize = false;  // Callers normalize; the scheduler never does.
    for (std::unique_ptr<Engine>& engine : engines) {
      workers_.push_back(std::make_unique<Worker>());
      workers_.back()->engine = std::move(engine);
    }
    healthy_workers_ = static_cast<int>(workers_.size());
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
  struct Worker {
    std::unique_ptr<Engine> engine;
    // Engines are not thread-safe; this keeps WarmUp off an engine while its worker runs it.
    std::mutex engine_mutex;
    std::thread thread;
    // Set when this worker's engine failed for good and no healthy engine is left: the worker
    // then answers every batch with this status instead of running it.
    absl::Status failed;
  };

  void WorkerLoop(Worker& worker);
  // Blocks until a batch is due by the queue-delay policy (or there is nothing left to do during
  // shutdown: then returns nullopt) and takes it.
  std::optional<TakenBatch> WaitAndTakeBatch();
  void RunBatch(Worker& worker, std::vector<BatchPart> parts);
  // After an engine reported itself unhealthy: true when the worker may stop (another engine
  // serves the queue); false for the last one, which stays to fail what is queued.
  bool RetireWorker(Worker& worker, const absl::Status& health);
  // Bookkeeping after a batch of `tokens` tokens ended; returns the requests that may now be
  // answered.
  std::vector<std::shared_ptr<PendingRequest>> FinishParts(const std::vector<BatchPart>& parts,
                                                           int tokens, const absl::Status& status,
                                                           absl::Time start, absl::Time end);
  // The throughput estimate; 0 while there is none.
  double SecondsPerTokenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // RESOURCE_EXHAUSTED when `pending`, queued now, would by the estimate end after its deadline.
  absl::Status CheckDeadline(const PendingRequest& pending) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Calls `done`; the request must be finished and out of the queue. No lock may be held.
  void Answer(PendingRequest& pending);
  void ReportQueueDepth();

  BatchSchedulerOptions options_;
  const std::shared_ptr<BatchObserver> observer_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::once_flag shutdown_once_;

  mutable std::mutex mutex_;
  std::condition_variable work_available_;  // The queue changed, or shutdown began.
  RequestQueue queue_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  int healthy_workers_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Status no_engine_ ABSL_GUARDED_BY(mutex_);  // Set when every engine failed.
  // The throughput estimate is the ratio of these exponentially weighted averages of the batches'
  // engine time and tokens, rather than an average of each batch's seconds per token: a batch then
  // weighs by its tokens, and small batches, whose fixed costs per batch make their tokens look
  // expensive, cannot talk the estimate of a full queue up. Successful batches only (a failure may
  // return early); the warm-up batch does not count (its one-off costs would make the estimate
  // refuse requests the engines can serve).
  double throughput_seconds_ ABSL_GUARDED_BY(mutex_) = 0;
  double throughput_tokens_ ABSL_GUARDED_BY(mutex_) = 0;
  // Tokens of the batches taken and not yet finished: a queued request also waits for them.
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
    while (!queue_.empty()) {
      TakenBatch taken = queue_.TakeBatch(absl::Now(), /*seconds_per_token=*/0);
      if (taken.parts.empty() && taken.dropped.empty()) break;  // No progress: workers drain it.
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
        }
        if (pending.finished()) to_answer.push_back(std::move(part.request));
      }
    }
  }
  work_available_.notify_all();
  ReportQueueDepth();
  for (std::shared_ptr<PendingRequest>& pending : to_answer) Answer(*pending);
  return aborted;
}

BatchScheduler::QueueStats BatchScheduler::Impl::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return QueueStats{queue_.requests(), queue_.sequences(), queue_.tokens()};
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
  while (std::optional<TakenBatch> taken = WaitAndTakeBatch()) {
    for (std::shared_ptr<PendingRequest>& pending : taken->dropped) Answer(*pending);
    ReportQueueDepth();
    if (!taken->parts.empty()) RunBatch(worker, std::move(taken->parts));
    if (worker.failed.ok()) {
      if (absl::Status health = worker.engine->Health(); !health.ok()) {
        if (RetireWorker(worker, health)) return;
      }
    }
  }
}

bool BatchScheduler::Impl::RetireWorker(Worker& worker, const absl::Status& health) {
  std::lock_guard<std::mutex> lock(mutex_);
  --healthy_workers_;
  Log().error("engine on {} stopped serving ({} healthy engine(s) left): {}",
              worker.engine->Info().device, healthy_workers_, health.ToString());
  if (healthy_workers_ > 0) {
    // Wake a healthy worker in case this one was the only one waiting for the queue.
    work_available_.notify_one();
    return true;
  }
  no_engine_ = absl::UnavailableError(
      absl::StrCat("no healthy engine left for this model: ", health.message()));
  worker.failed = no_engine_;
  return false;
}

std::optional<TakenBatch> BatchScheduler::Impl::WaitAndTakeBatch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (queue_.empty()) {
      if (stopping_) return std::nullopt;
      work_available_.wait(lock);
      continue;
    }
    // Continuous batching, a full budget and draining at shutdown take what is there now.
    if (stopping_ || options_.max_queue_delay == absl::ZeroDuration() || queue_.FillsBatch()) {
      break;
    }
    const absl::Time due = *queue_.OldestSubmitTime() + options_.max_queue_delay;
    if (absl::Now() >= due) break;
    work_available_.wait_until(lock, absl::ToChronoTime(due));
  }
  TakenBatch taken = queue_.TakeBatch(absl::Now(), SecondsPerTokenLocked());
  running_tokens_ += taken.tokens;
  // Another free worker may take what is left; Submit woke only one.
  if (!queue_.empty()) work_available_.notify_one();
  return taken;
}

void BatchScheduler::Impl::RunBatch(Worker& worker, std::vector<BatchPart> parts) {
  const PackedBatch batch = PackParts(parts);
  RunOptions run_options = options_.run_options;
  run_options.outputs = UnionOfOutputs(parts);

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
  if (status.ok()) {
    ScatterOutputs(*output, parts);
  } else {
    Log().error("engine batch of {} sequences, {} tokens failed: {}", batch.num_sequences(),
                batch.total_tokens(), status.ToString());
  }
  if (observer_ != nullptr) {
    observer_->OnBatch(batch.num_sequences(), batch.total_tokens(), end - start, status);
  }
  std::vector<std::shared_ptr<PendingRequest>> finished =
      FinishParts(parts, batch.total_tokens(), status, start, end);
  if (!status.ok()) ReportQueueDepth();  // Failed requests' queued parts were removed.
  parts.clear();                         // Let finished requests be freed right after their answer.
  for (std::shared_ptr<PendingRequest>& pending : finished) Answer(*pending);
}

std::vector<std::shared_ptr<PendingRequest>> BatchScheduler::Impl::FinishParts(
    const std::vector<BatchPart>& parts, int tokens, const absl::Status& status, absl::Time start,
    absl::Time end) {
  std::vector<std::shared_ptr<PendingRequest>> finished;
  std::lock_guard<std::mutex> lock(mutex_);
  running_tokens_ -= tokens;
  if (status.ok() && tokens > 0) {
    const double seconds = absl::ToDoubleSeconds(end - start);
    if (throughput_tokens_ > 0) {
      throughput_seconds_ += kThroughputSmoothing * (seconds - throughput_seconds_);
      throughput_tokens_ += kThroughputSmoothing * (tokens - throughput_tokens_);
    } else {
      throughput_seconds_ = seconds;
      throughput_tokens_ = tokens;
    }
  }
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
