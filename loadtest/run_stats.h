// What a run measured, accumulated from many gRPC threads at once.
#pragma once

#include <grpcpp/support/status.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "dflash/v1/dflash.pb.h"
#include "loadtest/latency_histogram.h"

namespace dflash::loadtest {

using Clock = std::chrono::steady_clock;

// Calls of one phase (warm-up or measured).
struct PhaseCounts {
  int64_t sent = 0;
  int64_t ok = 0;
  int64_t errors = 0;
};

// The totals of a run. Histograms hold nanoseconds.
struct RunTotals {
  PhaseCounts warmup;
  PhaseCounts measured;
  // Measured failed calls by gRPC status code name (HTTP: "HTTP_<status>"), and the first message
  // seen for each code.
  std::map<std::string, int64_t> errors_by_code;
  std::map<std::string, std::string> first_error_message;
  // Measured successful calls: completion minus INTENDED send time (see LoadOptions).
  LatencyHistogram latency;
  // Measured failed calls, kept apart so that fast rejections cannot flatter `latency`.
  LatencyHistogram error_latency;
  // Measured calls: actual minus intended send time (open loop; 0 in a closed loop).
  LatencyHistogram send_lag;
  // From the ResponseMetadata of measured successful calls.
  LatencyHistogram server_total;
  LatencyHistogram server_queue;
  int64_t server_tokens = 0;
  // Model sequences (texts, pairs, documents) of measured successful calls.
  int64_t sequences = 0;
  // Completion time of the last measured call; time_point{} when none completed.
  Clock::time_point last_measured_completion{};
  // Open loop: the latest intended and actual send times of measured calls (time_point{} when
  // none was sent), and how many measured sends waited because --max_in_flight calls were
  // unanswered. Together they say whether the generator kept to its schedule, and why not.
  Clock::time_point last_measured_intended{};
  Clock::time_point last_measured_send{};
  int64_t max_in_flight_waits = 0;
};

// Thread-safe accumulator. Counters for progress lines are atomics; everything else is guarded by
// one mutex, which costs far less than the gRPC call it is recorded for.
class RunStats {
 public:
  void RecordSend(bool measured, Clock::time_point intended, Clock::time_point sent);
  // A measured open-loop send that had to wait for answers (LoadOptions::max_in_flight).
  void RecordMaxInFlightWait();
  // `metadata` and `sequences` are only read when `code` is OK.
  void RecordCompletion(bool measured, Clock::time_point completed, grpc::StatusCode code,
                        const std::string& message, std::chrono::nanoseconds latency,
                        const dflash::v1::ResponseMetadata& metadata, int64_t sequences);
  // The same for any protocol: a failure is counted under `error_code` ("HTTP_503").
  void RecordCompletion(bool measured, Clock::time_point completed, bool ok,
                        const std::string& error_code, const std::string& message,
                        std::chrono::nanoseconds latency,
                        const dflash::v1::ResponseMetadata& metadata, int64_t sequences);

  // For progress lines: calls sent, answered OK and failed so far (both phases).
  int64_t sent() const { return sent_.load(std::memory_order_relaxed); }
  int64_t ok() const { return ok_.load(std::memory_order_relaxed); }
  int64_t errors() const { return errors_.load(std::memory_order_relaxed); }

  RunTotals Totals() const;

 private:
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> ok_{0};
  std::atomic<int64_t> errors_{0};
  mutable std::mutex mutex_;
  RunTotals totals_;
};

}  // namespace dflash::loadtest
