// The results of a run: a JSON report (for files, scripts and the project's bench/results) and a
// human summary table, which is rendered from the JSON so that the two can never disagree.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "loadtest/latency_histogram.h"
#include "loadtest/load_generator.h"

namespace dflash::loadtest {

// The setup of a run as the report states it, beyond LoadOptions.
struct RunDescription {
  std::string target;
  std::string workload_path;
  std::string workload_description;
  std::string rpc;
  std::string model;
  std::string corpus;
  int channels = 1;
};

// {"count", "min", "mean", "p50", "p90", "p99", "p99_9", "max"}, values in milliseconds.
nlohmann::ordered_json HistogramJson(const LatencyHistogram& nanoseconds);

// Whether an open-loop run sent its calls at the offered rate. A run that did not measured the
// generator (or the --max_in_flight cap), not the server at that rate.
struct ScheduleVerdict {
  bool kept = true;
  // Why not, in a sentence that names the remedy; empty when kept.
  std::string cause;
};

// Kept: the measured calls went out at >= 98% of the schedule's pace (`scheduled_seconds` over
// `actual_seconds`, the windows from the warm-up's end to the last due and the last actual send)
// and the send lag's p99 is at most 10 ms. Otherwise the cause is the --max_in_flight cap when a
// measured send waited for it (the server answered slower than the offered rate), else the
// generator itself (its sending threads ran late).
ScheduleVerdict JudgeSchedule(double scheduled_seconds, double actual_seconds,
                              double send_lag_p99_ms, int64_t max_in_flight_waits,
                              int64_t max_in_flight);

// The report; loadtest/README.md documents every field.
nlohmann::ordered_json ReportJson(const RunDescription& description, const LoadOptions& options,
                                  const RunResult& result);

// A few lines for a terminal.
std::string SummaryTable(const nlohmann::ordered_json& report);

// Writes the report, pretty-printed, to `path` (created or replaced).
absl::Status WriteReport(const std::string& path, const nlohmann::ordered_json& report);

}  // namespace dflash::loadtest
