// Prometheus naming rules, checked when a family is created so that the exposition never carries a
// name a scraper would reject.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dflash::metrics {

// [a-zA-Z_:][a-zA-Z0-9_:]*
absl::Status ValidateMetricName(absl::string_view name);

// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for Prometheus-internal labels).
absl::Status ValidateLabelName(absl::string_view name);

}  // namespace dflash::metrics
