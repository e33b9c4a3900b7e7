#include "server/metrics/metric_name.h"

#include "absl/strings/str_cat.h"

namespace dflash::metrics {
namespace {

bool IsLetterOrUnderscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

absl::Status ValidateMetricName(absl::string_view name) {
  bool valid = !name.empty();
  for (size_t i = 0; valid && i < name.size(); ++i) {
    const char c = name[i];
    valid = IsLetterOrUnderscore(c) || c == ':' || (i > 0 && IsDigit(c));
  }
  if (!valid) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid metric name '", name, "': must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelName(absl::string_view name) {
  bool valid = !name.empty();
  for (size_t i = 0; valid && i < name.size(); ++i) {
    const char c = name[i];
    valid = IsLetterOrUnderscore(c) || (i > 0 && IsDigit(c));
  }
  if (!valid) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid label name '", name, "': must match [a-zA-Z_][a-zA-Z0-9_]*"));
  }
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid label name '", name, "': the '__' prefix is reserved"));
  }
  return absl::OkStatus();
}

}  // namespace dflash::metrics
