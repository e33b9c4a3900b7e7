// Runs a load test: sends calls by a closed loop or an open-loop schedule, bounded in time and in
// count, and collects what happened. Latency is measured from each call's INTENDED send time, so a
// generator (or server) that falls behind shows up in the latencies instead of hiding them (no
// coordinated omission).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "loadtest/arrival_schedule.h"
#include "loadtest/http_caller.h"
#include "loadtest/request_generator.h"
#include "loadtest/run_stats.h"

namespace dflash::loadtest {

struct LoadOptions {
  ArrivalProcess process = ArrivalProcess::kClosedLoop;
  // Closed loop: workers, each with exactly one call in flight; a worker's intended send time is
  // the moment its previous answer arrived.
  int concurrency = 1;
  // Open loop: mean calls per second. A call's intended send time is its scheduled time.
  double rate = 0.0;
  // The measured period, after the warm-up. Zero: bounded by max_requests only.
  absl::Duration duration = absl::ZeroDuration();
  // The most measured calls. 0: bounded by duration only.
  int64_t max_requests = 0;
  // Calls intended before the warm-up ends are sent but left out of every statistic.
  absl::Duration warmup = absl::ZeroDuration();
  // Per-call deadline, from the actual send.
  absl::Duration timeout = absl::Seconds(5);
  // Seeds the Poisson schedule (requests are seeded by their RequestGenerator).
  uint64_t seed = 1;
  // Open loop: threads that send the schedule, each its own share of it (ArrivalSchedule::
  // CreateShare) and of the requests (sender k of N sends calls k, k + N, k + 2N, ...). 0: one per
  // kCallsPerSender calls/s of the rate, at most half the cores the process may run on
  // (SendersFor).
  int senders = 0;
  // Open loop: a sender that reaches this many unanswered calls waits (the wait counts as send
  // lag and latency), so a stalled server cannot make the generator allocate without bound.
  int64_t max_in_flight = 10000;
  // When set, sent as "authorization: Bearer <api_key>" (HTTP: the HttpCaller sends it).
  std::string api_key;
  // Interval of progress lines on stderr; zero: none.
  absl::Duration progress_interval = absl::ZeroDuration();
  // When set, sending stops once it reads true (Ctrl-C); calls in flight are still awaited.
  const std::atomic<bool>* stop = nullptr;
};

// The rate one sending thread is given by default: well below what one thread can prepare and
// start (some tens of thousands of small calls per second), so that a sender keeps its schedule on
// a busy machine.
inline constexpr double kCallsPerSender = 10000.0;
// The most --senders.
inline constexpr int kMaxSenders = 256;

// INVALID_ARGUMENT naming the offending option.
absl::Status ValidateLoadOptions(const LoadOptions& options);

// The open loop's sending threads: LoadOptions::senders, or for 0 ceil(rate / kCallsPerSender)
// but at most half the cores this process may run on (its CPU affinity; the other half is for
// gRPC's completion threads, which cost about as much per call), at least 1. 0 in a closed
// loop, whose --concurrency workers send.
int SendersFor(const LoadOptions& options);

struct RunResult {
  // Wall-clock start, for the report.
  absl::Time started_at;
  RunTotals totals;
  // Seconds from the end of the warm-up until sending stopped: the window of the sent rate.
  double send_seconds = 0.0;
  // Seconds from the end of the warm-up until the last measured answer: the throughput window.
  double measured_seconds = 0.0;
  // Open loop: seconds from the end of the warm-up until the last measured call was due, and
  // until it was actually sent. Their ratio is the pace the generator kept (1: on schedule).
  double scheduled_send_seconds = 0.0;
  double actual_send_seconds = 0.0;
  // Sending was cut short by LoadOptions::stop.
  bool interrupted = false;
  // Open loop: the sending threads (SendersFor); 0 in a closed loop.
  int senders = 0;
};

// Runs the load over `channels` (calls go round-robin over them; each is its own connection when
// created with distinct channel arguments). Returns once every sent call has been answered or has
// passed its deadline.
absl::StatusOr<RunResult> RunLoad(const LoadOptions& options, const RequestGenerator& generator,
                                  const std::vector<std::shared_ptr<grpc::Channel>>& channels);

// The same over HTTP/JSON (--protocol=http): each request goes to its TEI route through `http`'s
// keep-alive connections; a non-2xx answer is an error counted as "HTTP_<status>". HTTP answers
// carry no server timings, so the report's server_* figures stay zero.
absl::StatusOr<RunResult> RunLoad(const LoadOptions& options, const RequestGenerator& generator,
                                  HttpCaller& http);

}  // namespace dflash::loadtest
