#include "loadtest/load_generator.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace dflash::loadtest {
namespace {

namespace v1 = ::dflash::v1;
using std::chrono::nanoseconds;

// The longest a sleeping sender or worker goes without checking LoadOptions::stop.
constexpr nanoseconds kStopPollInterval = std::chrono::milliseconds(50);
// One thread per closed-loop worker; beyond a few thousand, use an open loop.
constexpr int kMaxConcurrency = 4096;

double Seconds(Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

class Runner {
 public:
  Runner(const LoadOptions& options, const RequestGenerator& generator,
         const std::vector<std::shared_ptr<grpc::Channel>>& channels)
      : options_(options), generator_(generator) {
    for (const auto& channel : channels) callers_.push_back(std::make_unique<RpcCaller>(channel));
  }
  Runner(const LoadOptions& options, const RequestGenerator& generator, HttpCaller& http)
      : options_(options), generator_(generator), http_(&http) {}

  absl::StatusOr<RunResult> Run();

 private:
  struct Call {
    uint64_t index = 0;
    grpc::ClientContext context;
    RpcRequest request;
    RpcResponse response;
    // --protocol=http: the request as its TEI route's JSON, or why it cannot be sent.
    absl::StatusOr<HttpCall> http = absl::UnknownError("not an HTTP call");
    Clock::time_point intended;
    bool measured = false;
    int64_t sequences = 0;
  };

  // Builds the request of call `index`. Done before the call is due, so that the generator's own
  // work neither delays an open-loop send nor counts in a closed-loop latency.
  std::unique_ptr<Call> Prepare(uint64_t index) const;
  // Starts a prepared call, counted in in_flight_ by the caller; `done`, when set, is notified
  // after it completed.
  void Start(std::unique_ptr<Call> call, Clock::time_point intended, bool measured,
             absl::Notification* done);
  void RunClosedLoop();
  // Computes senders_, send_end_offset_ and share_calls_; before the run starts, since a count
  // bound can take a moment to place.
  absl::Status PlanOpenLoop();
  absl::Status RunOpenLoop();
  // Sends one share of the open-loop schedule: calls sender, sender + senders, ...
  void SendShare(ArrivalSchedule schedule, int sender, int senders, int64_t calls);
  void Worker();
  void ProgressLoop();
  bool StopRequested() const {
    return options_.stop != nullptr && options_.stop->load(std::memory_order_relaxed);
  }
  // Records when sending stopped (the earliest of the calls wins: senders that stop for the same
  // bound give the same time, and after LoadOptions::stop nothing more is sent).
  void MarkSendingStopped(Clock::time_point when);

  const LoadOptions& options_;
  const RequestGenerator& generator_;
  std::vector<std::unique_ptr<RpcCaller>> callers_;
  HttpCaller* http_ = nullptr;  // Set: calls go over HTTP instead of callers_.
  RunStats stats_;

  Clock::time_point start_;
  Clock::time_point warmup_end_;
  Clock::time_point end_;  // time_point::max() when bounded by count only.
  // Open loop: calls due from here on are not sent (the end of the duration, or where the first
  // call beyond LoadOptions::max_requests is due). An offset from start_ until the run starts.
  nanoseconds send_end_offset_ = nanoseconds::max();
  Clock::time_point send_end_;
  // Open loop: the sending threads (SendersFor), and how many calls (warm-up included) each sends
  // at most.
  int senders_ = 0;
  std::vector<int64_t> share_calls_;

  std::atomic<uint64_t> next_index_{0};
  std::atomic<int64_t> measured_claimed_{0};

  std::mutex mutex_;
  // Notified on every completion (for waits on in_flight_).
  std::condition_variable changed_;
  // Notified when the run has finished (for the progress thread only, so that completions do not
  // wake it).
  std::condition_variable finished_cv_;
  int64_t in_flight_ = 0;                     // Guarded by mutex_.
  bool finished_ = false;                     // Guarded by mutex_; ends the progress thread.
  std::optional<Clock::time_point> stopped_;  // Guarded by mutex_.
};

void Runner::MarkSendingStopped(Clock::time_point when) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!stopped_.has_value() || when < *stopped_) stopped_ = when;
}

std::unique_ptr<Runner::Call> Runner::Prepare(uint64_t index) const {
  auto call = std::make_unique<Call>();
  call->index = index;
  call->request = generator_.Generate(index);
  call->sequences = SequencesOf(call->request);
  if (http_ != nullptr) {
    call->http = ToHttpCall(call->request);
    return call;
  }
  if (!options_.api_key.empty()) {
    call->context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.api_key));
  }
  return call;
}

void Runner::Start(std::unique_ptr<Call> call, Clock::time_point intended, bool measured,
                   absl::Notification* done) {
  call->intended = intended;
  call->measured = measured;
  const Clock::time_point sent = Clock::now();
  call->context.set_deadline(std::chrono::system_clock::now() +
                             absl::ToChronoNanoseconds(options_.timeout));
  // Recorded before the call starts so that no progress line shows more answers than sends.
  stats_.RecordSend(measured, intended, sent);
  Call* raw = call.release();
  if (http_ != nullptr) {
    auto complete = [this, raw, done](const HttpOutcome& outcome) {
      const Clock::time_point completed = Clock::now();
      stats_.RecordCompletion(raw->measured, completed, outcome.ok, outcome.code, outcome.message,
                              completed - raw->intended, v1::ResponseMetadata(), raw->sequences);
      delete raw;
      if (done != nullptr) done->Notify();
      std::lock_guard<std::mutex> lock(mutex_);
      --in_flight_;
      changed_.notify_all();
    };
    if (!raw->http.ok()) {
      complete(HttpOutcome{false, "INVALID_ARGUMENT", std::string(raw->http.status().message())});
      return;
    }
    http_->Start(&*raw->http, absl::ToChronoNanoseconds(options_.timeout), std::move(complete));
    return;
  }
  callers_[raw->index % callers_.size()]->Start(
      &raw->context, &raw->request, &raw->response, [this, raw, done](grpc::Status status) {
        const Clock::time_point completed = Clock::now();
        stats_.RecordCompletion(raw->measured, completed, status.error_code(),
                                status.error_message(), completed - raw->intended,
                                MetadataOf(raw->response), raw->sequences);
        delete raw;
        if (done != nullptr) done->Notify();
        // Notified under the lock: once Run sees in_flight_ == 0 nothing here touches the runner.
        std::lock_guard<std::mutex> lock(mutex_);
        --in_flight_;
        changed_.notify_all();
      });
}

void Runner::Worker() {
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (StopRequested() || now >= end_) {
      MarkSendingStopped(std::min(now, end_));
      return;
    }
    const bool measured = now >= warmup_end_;
    if (measured && options_.max_requests > 0 &&
        measured_claimed_.fetch_add(1) >= options_.max_requests) {
      MarkSendingStopped(now);
      return;
    }
    std::unique_ptr<Call> call = Prepare(next_index_.fetch_add(1));
    // A closed-loop call is due at once: the worker's previous answer has arrived.
    absl::Notification done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++in_flight_;
    }
    Start(std::move(call), Clock::now(), measured, &done);
    done.WaitForNotification();
  }
}

void Runner::RunClosedLoop() {
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(options_.concurrency));
  for (int i = 0; i < options_.concurrency; ++i) workers.emplace_back([this] { Worker(); });
  for (std::thread& worker : workers) worker.join();
}

absl::Status Runner::PlanOpenLoop() {
  senders_ = SendersFor(options_);
  const int senders = senders_;
  share_calls_.assign(static_cast<size_t>(senders), std::numeric_limits<int64_t>::max());
  const nanoseconds warmup = absl::ToChronoNanoseconds(options_.warmup);
  if (options_.duration > absl::ZeroDuration()) {
    send_end_offset_ = warmup + absl::ToChronoNanoseconds(options_.duration);
  }
  if (options_.max_requests == 0) return absl::OkStatus();
  // The senders' shares merged in time order are the whole schedule. Its first max_requests
  // measured calls (and the warm-up's before them) are counted out to their senders, so together
  // they send exactly those, and the window of n calls ends where call n + 1 is due (the sent
  // rate of a constant schedule is exactly its rate).
  DFLASH_ASSIGN_OR_RETURN(
      MergedArrivals merged,
      MergedArrivals::Create(options_.process, options_.rate, options_.seed, senders));
  std::vector<int64_t> calls(static_cast<size_t>(senders), 0);
  for (int64_t measured = 0;;) {
    const MergedArrivals::Arrival arrival = merged.Next();
    if (arrival.offset >= send_end_offset_) return absl::OkStatus();  // The duration ends first.
    if (arrival.offset >= warmup) {
      if (measured == options_.max_requests) {
        send_end_offset_ = arrival.offset;
        share_calls_ = std::move(calls);
        return absl::OkStatus();
      }
      ++measured;
    }
    ++calls[static_cast<size_t>(arrival.sender)];
  }
}

absl::Status Runner::RunOpenLoop() {
  const int senders = senders_;
  std::vector<ArrivalSchedule> schedules;
  for (int sender = 0; sender < senders; ++sender) {
    DFLASH_ASSIGN_OR_RETURN(ArrivalSchedule schedule,
                            ArrivalSchedule::CreateShare(options_.process, options_.rate,
                                                         options_.seed, sender, senders));
    schedules.push_back(std::move(schedule));
  }
  std::vector<std::thread> threads;
  threads.reserve(schedules.size());
  for (int sender = 0; sender < senders; ++sender) {
    threads.emplace_back([this, &schedules, sender, senders] {
      SendShare(std::move(schedules[static_cast<size_t>(sender)]), sender, senders,
                share_calls_[static_cast<size_t>(sender)]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return absl::OkStatus();
}

void Runner::SendShare(ArrivalSchedule schedule, int sender, int senders, int64_t calls) {
  // Named so that per-thread CPU (top -H, /proc/PID/task) tells the senders' cost from gRPC's.
  pthread_setname_np(pthread_self(), "dflash-sender");
  uint64_t index = static_cast<uint64_t>(sender);
  for (int64_t sent = 0;; ++sent, index += static_cast<uint64_t>(senders)) {
    const Clock::time_point intended = start_ + schedule.Next();
    if (sent == calls || intended >= send_end_) {
      MarkSendingStopped(send_end_);
      return;
    }
    const bool measured = intended >= warmup_end_;
    std::unique_ptr<Call> call = Prepare(index);
    // Sleep until due; if late (behind schedule), send at once: the lag is recorded and counts
    // against latency, which runs from `intended`.
    for (Clock::time_point now = Clock::now(); now < intended; now = Clock::now()) {
      if (StopRequested()) break;
      std::this_thread::sleep_for(std::min<Clock::duration>(intended - now, kStopPollInterval));
    }
    bool waited = false;
    bool stop = false;
    {
      // The check and the count are one step, so that senders together never pass the cap.
      std::unique_lock<std::mutex> lock(mutex_);
      while (in_flight_ >= options_.max_in_flight && !StopRequested()) {
        waited = true;
        changed_.wait_for(lock, kStopPollInterval);
      }
      stop = StopRequested();
      if (!stop) ++in_flight_;
    }
    if (waited && measured) stats_.RecordMaxInFlightWait();
    if (stop) {
      MarkSendingStopped(Clock::now());
      return;
    }
    Start(std::move(call), intended, measured, nullptr);
  }
}

void Runner::ProgressLoop() {
  const nanoseconds interval = absl::ToChronoNanoseconds(options_.progress_interval);
  int64_t last_done = 0;
  Clock::time_point last_time = start_;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!finished_) {
    finished_cv_.wait_for(lock, interval);
    const Clock::time_point now = Clock::now();
    if (finished_ || now - last_time < interval) continue;
    const int64_t done = stats_.ok() + stats_.errors();
    const char* phase = stopped_.has_value() ? "draining"
                        : now < warmup_end_  ? "warm-up"
                                             : "measuring";
    const int64_t in_flight = in_flight_;
    // Logged without the lock, which completions need.
    lock.unlock();
    Log().info("{:7.1f}s {:9} sent={} ok={} errors={} in_flight={} rate={:.1f}/s",
               Seconds(now - start_), phase, stats_.sent(), stats_.ok(), stats_.errors(), in_flight,
               static_cast<double>(done - last_done) / Seconds(now - last_time));
    lock.lock();
    last_done = done;
    last_time = now;
  }
}

absl::StatusOr<RunResult> Runner::Run() {
  const bool open_loop = options_.process != ArrivalProcess::kClosedLoop;
  if (open_loop) DFLASH_RETURN_IF_ERROR(PlanOpenLoop());
  const absl::Time started_at = absl::Now();
  start_ = Clock::now();
  warmup_end_ = start_ + absl::ToChronoNanoseconds(options_.warmup);
  end_ = options_.duration > absl::ZeroDuration()
             ? warmup_end_ + absl::ToChronoNanoseconds(options_.duration)
             : Clock::time_point::max();
  send_end_ = send_end_offset_ < Clock::time_point::max() - start_ ? start_ + send_end_offset_
                                                                   : Clock::time_point::max();
  std::thread progress;
  if (options_.progress_interval > absl::ZeroDuration()) {
    progress = std::thread([this] { ProgressLoop(); });
  }
  absl::Status status = absl::OkStatus();
  if (open_loop) {
    status = RunOpenLoop();
  } else {
    RunClosedLoop();
  }
  RunResult result;
  result.started_at = started_at;
  result.senders = senders_;
  {
    // Every call ends by its deadline at the latest, so this wait is bounded.
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return in_flight_ == 0; });
    finished_ = true;
    finished_cv_.notify_all();
    result.send_seconds = Seconds(std::max(stopped_.value_or(start_), warmup_end_) - warmup_end_);
  }
  if (progress.joinable()) progress.join();
  DFLASH_RETURN_IF_ERROR(status);
  result.totals = stats_.Totals();
  result.interrupted = StopRequested();
  if (result.totals.last_measured_completion > warmup_end_) {
    result.measured_seconds = Seconds(result.totals.last_measured_completion - warmup_end_);
  }
  if (result.totals.last_measured_send > warmup_end_) {
    result.scheduled_send_seconds = Seconds(result.totals.last_measured_intended - warmup_end_);
    result.actual_send_seconds = Seconds(result.totals.last_measured_send - warmup_end_);
  }
  return result;
}

}  // namespace

absl::Status ValidateLoadOptions(const LoadOptions& options) {
  if (options.process == ArrivalProcess::kClosedLoop) {
    if (options.concurrency < 1 || options.concurrency > kMaxConcurrency) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--concurrency must be in [1, ", kMaxConcurrency, "], got ", options.concurrency));
    }
  } else if (!(options.rate > 0.0) || !std::isfinite(options.rate)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rate must be a positive number of calls per second for mode ",
                     ArrivalProcessName(options.process), ", got ", options.rate));
  }
  if (options.duration < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--duration must not be negative");
  }
  if (options.max_requests < 0)
    return absl::InvalidArgumentError("--requests must not be negative");
  if (options.duration == absl::ZeroDuration() && options.max_requests == 0) {
    return absl::InvalidArgumentError(
        "the run is unbounded: give --duration, --requests or both (a positive value)");
  }
  if (options.warmup < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--warmup must not be negative");
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--timeout must be positive");
  }
  if (options.max_in_flight < 1) return absl::InvalidArgumentError("--max_in_flight must be >= 1");
  if (options.senders < 0 || options.senders > kMaxSenders) {
    return absl::InvalidArgumentError(absl::StrCat("--senders must be in [0, ", kMaxSenders,
                                                   "] (0: auto), got ", options.senders));
  }
  if (options.progress_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the progress interval must not be negative");
  }
  return absl::OkStatus();
}

int SendersFor(const LoadOptions& options) {
  if (options.process == ArrivalProcess::kClosedLoop) return 0;
  if (options.senders > 0) return options.senders;
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) cores = CPU_COUNT(&allowed);
  const double wanted = std::ceil(options.rate / kCallsPerSender);
  return static_cast<int>(std::clamp(wanted, 1.0, static_cast<double>(std::max(cores / 2, 1))));
}

absl::StatusOr<RunResult> RunLoad(const LoadOptions& options, const RequestGenerator& generator,
                                  const std::vector<std::shared_ptr<grpc::Channel>>& channels) {
  DFLASH_RETURN_IF_ERROR(ValidateLoadOptions(options));
  if (channels.empty()) return absl::InvalidArgumentError("no channel to send on");
  Runner runner(options, generator, channels);
  return runner.Run();
}

absl::StatusOr<RunResult> RunLoad(const LoadOptions& options, const RequestGenerator& generator,
                                  HttpCaller& http) {
  DFLASH_RETURN_IF_ERROR(ValidateLoadOptions(options));
  Runner runner(options, generator, http);
  return runner.Run();
}

}  // namespace dflash::loadtest
