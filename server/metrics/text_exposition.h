// Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/metrics/metric_registry.h"
#include "server/metrics/metric_snapshot.h"

namespace dflash::metrics {

// The Content-Type a scrape response must carry for this format.
inline constexpr absl::string_view kTextExpositionContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Families in the given order: "# HELP", "# TYPE", then one line per sample. Histograms expose
// cumulative name_bucket{...,le="<bound>"} lines ending with le="+Inf", then name_sum and
// name_count. Numbers use the shortest text that parses back to the same double; infinities and
// NaN are written +Inf, -Inf and NaN.
std::string SerializeTextExposition(const std::vector<MetricFamilySnapshot>& families);
std::string SerializeTextExposition(const Registry& registry);

// Exposed for tests: the number and escaping rules the serializer uses.
std::string FormatSampleValue(double value);
std::string EscapeHelp(absl::string_view help);               // \ and newline
std::string EscapeLabelValue(absl::string_view label_value);  // \, " and newline

}  // namespace dflash::metrics
