// A point-in-time copy of a registry's families, the data the exposition formats. Mirrors
// prometheus-cpp's ClientMetric/MetricFamily so a serializer can be swapped with the library.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dflash::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

struct HistogramSnapshot {
  std::vector<double> upper_bounds;  // finite, strictly increasing; +Inf is implicit
  // Cumulative counts, one per bound plus the final +Inf bucket (== count).
  std::vector<uint64_t> cumulative_counts;
  double sum = 0.0;
  uint64_t count = 0;
};

struct MetricSnapshot {
  std::vector<std::pair<std::string, std::string>> labels;  // in the family's label-name order
  double value = 0.0;                                       // counter and gauge
  HistogramSnapshot histogram;                              // histogram only
};

struct MetricFamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<MetricSnapshot> metrics;  // sorted by label values
};

}  // namespace dflash::metrics
