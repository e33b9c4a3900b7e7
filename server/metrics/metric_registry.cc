#include "server/metrics/metric_registry.h"

#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/metrics/metric_name.h"

namespace dflash::metrics {
namespace {

absl::Status ValidateFamily(MetricType type, const std::string& name,
                            const std::vector<std::string>& label_names) {
  DFLASH_RETURN_IF_ERROR(ValidateMetricName(name));
  if (type == MetricType::kCounter && !absl::EndsWith(name, "_total")) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter name '", name, "' must end in _total (Prometheus naming)"));
  }
  std::set<std::string> seen;
  for (const std::string& label : label_names) {
    DFLASH_RETURN_IF_ERROR(ValidateLabelName(label));
    if (type == MetricType::kHistogram && label == "le") {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram '", name, "': label name 'le' is reserved for buckets"));
    }
    if (!seen.insert(label).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric '", name, "': label name '", label, "' given twice"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ExposedNames(MetricType type, const std::string& name) {
  if (type == MetricType::kHistogram) {
    return {name, name + "_bucket", name + "_sum", name + "_count"};
  }
  return {name};
}

}  // namespace

absl::StatusOr<Family<Counter>*> Registry::AddCounterFamily(std::string name, std::string help,
                                                            std::vector<std::string> label_names) {
  std::unique_ptr<Family<Counter>> family(
      new Family<Counter>(name, std::move(help), label_names, {}));
  Family<Counter>* result = family.get();
  DFLASH_RETURN_IF_ERROR(Register(MetricType::kCounter, name, label_names, std::move(family)));
  return result;
}

absl::StatusOr<Family<Gauge>*> Registry::AddGaugeFamily(std::string name, std::string help,
                                                        std::vector<std::string> label_names) {
  std::unique_ptr<Family<Gauge>> family(new Family<Gauge>(name, std::move(help), label_names, {}));
  Family<Gauge>* result = family.get();
  DFLASH_RETURN_IF_ERROR(Register(MetricType::kGauge, name, label_names, std::move(family)));
  return result;
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogramFamily(
    std::string name, std::string help, std::vector<std::string> label_names,
    std::vector<double> bucket_bounds) {
  DFLASH_RETURN_IF_ERROR(ValidateBucketBounds(bucket_bounds));
  std::unique_ptr<Family<Histogram>> family(
      new Family<Histogram>(name, std::move(help), label_names, std::move(bucket_bounds)));
  Family<Histogram>* result = family.get();
  DFLASH_RETURN_IF_ERROR(Register(MetricType::kHistogram, name, label_names, std::move(family)));
  return result;
}

absl::Status Registry::Register(MetricType type, const std::string& name,
                                const std::vector<std::string>& label_names,
                                std::unique_ptr<FamilyBase> family) {
  DFLASH_RETURN_IF_ERROR(ValidateFamily(type, name, label_names));
  const std::vector<std::string> exposed = ExposedNames(type, name);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& exposed_name : exposed) {
    if (exposed_names_.count(exposed_name) > 0) {
      return absl::AlreadyExistsError(absl::StrCat("metric '", name, "': name '", exposed_name,
                                                   "' is already used by another family"));
    }
  }
  exposed_names_.insert(exposed.begin(), exposed.end());
  families_.push_back(std::move(family));
  return absl::OkStatus();
}

void Registry::AddCollectHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  hooks_.push_back(std::move(hook));
}

std::vector<MetricFamilySnapshot> Registry::Collect() const {
  {
    std::lock_guard<std::mutex> hooks_lock(hooks_mutex_);
    for (const std::function<void()>& hook : hooks_) hook();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<MetricFamilySnapshot> snapshots;
  snapshots.reserve(families_.size());
  for (const auto& family : families_) {
    snapshots.push_back(family->Collect());
  }
  return snapshots;
}

}  // namespace dflash::metrics
