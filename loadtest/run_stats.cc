#include "loadtest/run_stats.h"

#include <algorithm>

#include "loadtest/rpc_caller.h"

namespace dflash::loadtest {

void RunStats::RecordSend(bool measured, Clock::time_point intended, Clock::time_point sent) {
  sent_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  PhaseCounts& phase = measured ? totals_.measured : totals_.warmup;
  ++phase.sent;
  if (!measured) return;
  totals_.send_lag.Record(std::chrono::nanoseconds(sent - intended).count());
  totals_.last_measured_intended = std::max(totals_.last_measured_intended, intended);
  totals_.last_measured_send = std::max(totals_.last_measured_send, sent);
}

void RunStats::RecordMaxInFlightWait() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++totals_.max_in_flight_waits;
}

void RunStats::RecordCompletion(bool measured, Clock::time_point completed, grpc::StatusCode code,
                                const std::string& message, std::chrono::nanoseconds latency,
                                const dflash::v1::ResponseMetadata& metadata, int64_t sequences) {
  const bool ok = code == grpc::StatusCode::OK;
  RecordCompletion(measured, completed, ok, ok ? std::string() : StatusCodeName(code), message,
                   latency, metadata, sequences);
}

void RunStats::RecordCompletion(bool measured, Clock::time_point completed, bool ok,
                                const std::string& error_code, const std::string& message,
                                std::chrono::nanoseconds latency,
                                const dflash::v1::ResponseMetadata& metadata, int64_t sequences) {
  (ok ? ok_ : errors_).fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  PhaseCounts& phase = measured ? totals_.measured : totals_.warmup;
  ++(ok ? phase.ok : phase.errors);
  if (!measured) return;
  totals_.last_measured_completion = std::max(totals_.last_measured_completion, completed);
  if (ok) {
    totals_.latency.Record(latency.count());
    totals_.server_total.Record(static_cast<int64_t>(metadata.total_us()) * 1000);
    totals_.server_queue.Record(static_cast<int64_t>(metadata.queue_us()) * 1000);
    totals_.server_tokens += static_cast<int64_t>(metadata.tokens());
    totals_.sequences += sequences;
    return;
  }
  totals_.error_latency.Record(latency.count());
  ++totals_.errors_by_code[error_code];
  totals_.first_error_message.emplace(error_code, message);
}

RunTotals RunStats::Totals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return totals_;
}

}  // namespace dflash::loadtest
