#include "server/metrics/text_exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "server/metrics/metric_registry.h"

namespace dflash::metrics {
namespace {

TEST(TextExpositionTest, GoldenForSmallRegistry) {
  Registry registry;
  auto requests =
      registry.AddCounterFamily("dflash_requests_total", "Requests handled.", {"model", "code"});
  auto in_flight = registry.AddGaugeFamily("dflash_in_flight_requests", "Requests running.", {});
  auto latency = registry.AddHistogramFamily("dflash_request_duration_seconds", "Request latency.",
                                             {"model"}, {0.005, 0.25, 1});
  ASSERT_TRUE(requests.ok() && in_flight.ok() && latency.ok());
  // Created out of order: the exposition sorts label sets.
  ASSERT_TRUE((*(*requests)->WithLabels({"mnli", "OK"}))->Increment(3).ok());
  ASSERT_TRUE((*(*requests)->WithLabels({"base", "OK"}))->Increment().ok());
  (*(*in_flight)->WithLabels({}))->Set(2);
  Histogram* histogram = *(*latency)->WithLabels({"base"});
  histogram->Observe(0.001);
  histogram->Observe(0.25);
  histogram->Observe(3);

  EXPECT_EQ(SerializeTextExposition(registry),
            "# HELP dflash_requests_total Requests handled.\n"
            "# TYPE dflash_requests_total counter\n"
            "dflash_requests_total{model=\"base\",code=\"OK\"} 1\n"
            "dflash_requests_total{model=\"mnli\",code=\"OK\"} 3\n"
            "# HELP dflash_in_flight_requests Requests running.\n"
            "# TYPE dflash_in_flight_requests gauge\n"
            "dflash_in_flight_requests 2\n"
            "# HELP dflash_request_duration_seconds Request latency.\n"
            "# TYPE dflash_request_duration_seconds histogram\n"
            "dflash_request_duration_seconds_bucket{model=\"base\",le=\"0.005\"} 1\n"
            "dflash_request_duration_seconds_bucket{model=\"base\",le=\"0.25\"} 2\n"
            "dflash_request_duration_seconds_bucket{model=\"base\",le=\"1\"} 2\n"
            "dflash_request_duration_seconds_bucket{model=\"base\",le=\"+Inf\"} 3\n"
            "dflash_request_duration_seconds_sum{model=\"base\"} 3.251\n"
            "dflash_request_duration_seconds_count{model=\"base\"} 3\n");
}

TEST(TextExpositionTest, HistogramWithoutBucketsOrLabels) {
  Registry registry;
  auto family = registry.AddHistogramFamily("h", "", {}, {});
  ASSERT_TRUE(family.ok());
  (*(*family)->WithLabels({}))->Observe(-2);
  EXPECT_EQ(SerializeTextExposition(registry),
            "# HELP h \n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum -2\nh_count 1\n");
}

TEST(TextExpositionTest, EmptyFamilyHasOnlyHeader) {
  Registry registry;
  ASSERT_TRUE(registry.AddGaugeFamily("g", "help", {"a"}).ok());
  EXPECT_EQ(SerializeTextExposition(registry), "# HELP g help\n# TYPE g gauge\n");
}

TEST(TextExpositionTest, EscapesHelpAndLabelValues) {
  EXPECT_EQ(EscapeHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d");
  EXPECT_EQ(EscapeLabelValue("a\\b\nc\"d"), "a\\\\b\\nc\\\"d");
  Registry registry;
  auto family = registry.AddGaugeFamily("g", "line1\nline2 \\", {"path"});
  ASSERT_TRUE(family.ok());
  (*(*family)->WithLabels({"C:\\x \"q\"\n"}))->Set(1);
  EXPECT_EQ(SerializeTextExposition(registry),
            "# HELP g line1\\nline2 \\\\\n# TYPE g gauge\ng{path=\"C:\\\\x \\\"q\\\"\\n\"} 1\n");
}

TEST(TextExpositionTest, NumbersRoundTripAndSpecialValues) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(-0.5), "-0.5");
  EXPECT_EQ(FormatSampleValue(0.1), "0.1");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
  for (double v : {0.1 + 0.2, 1e300, 5e-324, 123456789.123456789, 1.0 / 3.0}) {
    EXPECT_EQ(std::strtod(FormatSampleValue(v).c_str(), nullptr), v) << FormatSampleValue(v);
  }
}

}  // namespace
}  // namespace dflash::metrics
