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

// The report; loadtest/README.md documents every field.
nlohmann::ordered_json ReportJson(const RunDescription& description, const LoadOptions& options,
                                  const RunResult& result);

// A few lines for a terminal.
std::string SummaryTable(const nlohmann::ordered_json& report);

// Writes the report, pretty-printed, to `path` (created or replaced).
absl::Status WriteReport(const std::string& path, const nlohmann::ordered_json& report);

}  // namespace dflash::loadtest
