#include "server/metrics/text_exposition.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dflash::metrics {
namespace {

absl::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Appends `{a="x",b="y"}` (nothing when there are no labels); `extra` is appended last (le).
void AppendLabels(std::string& out, const std::vector<std::pair<std::string, std::string>>& labels,
                  const std::pair<std::string, std::string>* extra) {
  if (labels.empty() && extra == nullptr) return;
  out += '{';
  bool first = true;
  auto append_one = [&](const std::pair<std::string, std::string>& label) {
    if (!first) out += ',';
    first = false;
    absl::StrAppend(&out, label.first, "=\"", EscapeLabelValue(label.second), "\"");
  };
  for (const auto& label : labels) append_one(label);
  if (extra != nullptr) append_one(*extra);
  out += '}';
}

void AppendSample(std::string& out, absl::string_view name,
                  const std::vector<std::pair<std::string, std::string>>& labels,
                  absl::string_view value,
                  const std::pair<std::string, std::string>* extra = nullptr) {
  out.append(name.data(), name.size());
  AppendLabels(out, labels, extra);
  absl::StrAppend(&out, " ", value, "\n");
}

}  // namespace

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Shortest round-trip representation, locale-independent.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeLabelValue(absl::string_view label_value) {
  std::string out;
  out.reserve(label_value.size());
  for (char c : label_value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string SerializeTextExposition(const std::vector<MetricFamilySnapshot>& families) {
  std::string out;
  for (const MetricFamilySnapshot& family : families) {
    absl::StrAppend(&out, "# HELP ", family.name, " ", EscapeHelp(family.help), "\n");
    absl::StrAppend(&out, "# TYPE ", family.name, " ", TypeName(family.type), "\n");
    for (const MetricSnapshot& metric : family.metrics) {
      if (family.type != MetricType::kHistogram) {
        AppendSample(out, family.name, metric.labels, FormatSampleValue(metric.value));
        continue;
      }
      const HistogramSnapshot& histogram = metric.histogram;
      const std::string bucket_name = absl::StrCat(family.name, "_bucket");
      for (size_t i = 0; i < histogram.cumulative_counts.size(); ++i) {
        const std::pair<std::string, std::string> le(
            "le", i < histogram.upper_bounds.size() ? FormatSampleValue(histogram.upper_bounds[i])
                                                    : std::string("+Inf"));
        AppendSample(out, bucket_name, metric.labels, absl::StrCat(histogram.cumulative_counts[i]),
                     &le);
      }
      AppendSample(out, absl::StrCat(family.name, "_sum"), metric.labels,
                   FormatSampleValue(histogram.sum));
      AppendSample(out, absl::StrCat(family.name, "_count"), metric.labels,
                   absl::StrCat(histogram.count));
    }
  }
  return out;
}

std::string SerializeTextExposition(const Registry& registry) {
  return SerializeTextExposition(registry.Collect());
}

}  // namespace dflash::metrics
