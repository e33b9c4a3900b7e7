#include "loadtest/arrival_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace dflash::loadtest {
namespace {

TEST(ArrivalScheduleTest, ParsesModes) {
  EXPECT_EQ(*ParseArrivalProcess("closed"), ArrivalProcess::kClosedLoop);
  EXPECT_EQ(*ParseArrivalProcess("constant"), ArrivalProcess::kConstant);
  EXPECT_EQ(*ParseArrivalProcess("poisson"), ArrivalProcess::kPoisson);
  EXPECT_EQ(ParseArrivalProcess("open").status().code(), absl::StatusCode::kInvalidArgument);
  for (auto process :
       {ArrivalProcess::kClosedLoop, ArrivalProcess::kConstant, ArrivalProcess::kPoisson}) {
    EXPECT_EQ(*ParseArrivalProcess(ArrivalProcessName(process)), process);
  }
}

TEST(ArrivalScheduleTest, RejectsClosedLoopAndBadRates) {
  EXPECT_FALSE(ArrivalSchedule::Create(ArrivalProcess::kClosedLoop, 10.0, 1).ok());
  EXPECT_FALSE(ArrivalSchedule::Create(ArrivalProcess::kConstant, 0.0, 1).ok());
  EXPECT_FALSE(ArrivalSchedule::Create(ArrivalProcess::kPoisson, -1.0, 1).ok());
  EXPECT_FALSE(ArrivalSchedule::Create(ArrivalProcess::kPoisson, std::nan(""), 1).ok());
  EXPECT_FALSE(ArrivalSchedule::Create(ArrivalProcess::kPoisson, INFINITY, 1).ok());
}

TEST(ArrivalScheduleTest, ConstantRateIsExactAndDoesNotDrift) {
  auto schedule = ArrivalSchedule::Create(ArrivalProcess::kConstant, 3.0, 1);
  ASSERT_TRUE(schedule.ok());
  for (int64_t n = 0; n < 300000; ++n) {
    const int64_t expected = std::llround(static_cast<double>(n) / 3.0 * 1e9);
    ASSERT_EQ(schedule->Next().count(), expected) << n;
  }
}

// Statistical checks of the Poisson schedule with a fixed seed: deterministic, with bounds several
// standard errors wide.
class PoissonScheduleTest : public ::testing::Test {
 protected:
  static constexpr double kRate = 1000.0;
  static constexpr int kArrivals = 200000;

  void SetUp() override {
    auto schedule = ArrivalSchedule::Create(ArrivalProcess::kPoisson, kRate, 42);
    ASSERT_TRUE(schedule.ok());
    double previous = 0.0;
    for (int i = 0; i < kArrivals; ++i) {
      const double t = static_cast<double>(schedule->Next().count()) * 1e-9;
      ASSERT_GE(t, previous);
      gaps_.push_back(t - previous);
      times_.push_back(t);
      previous = t;
    }
  }

  std::vector<double> gaps_;
  std::vector<double> times_;
};

TEST_F(PoissonScheduleTest, MeanRate) {
  // 200,000 arrivals over about 200 s: the standard error of the rate is about 0.2%.
  const double rate = kArrivals / times_.back();
  EXPECT_NEAR(rate, kRate, 0.01 * kRate);
}

TEST_F(PoissonScheduleTest, GapsAreExponential) {
  double sum = 0.0;
  double sum_squares = 0.0;
  for (double gap : gaps_) {
    sum += gap;
    sum_squares += gap * gap;
  }
  const double mean = sum / kArrivals;
  const double stddev = std::sqrt(sum_squares / kArrivals - mean * mean);
  EXPECT_NEAR(mean, 1.0 / kRate, 0.01 / kRate);
  // An exponential's coefficient of variation is 1.
  EXPECT_NEAR(stddev / mean, 1.0, 0.02);
  // Its survival function is exp(-x / mean).
  for (double multiple : {0.1, 0.5, 1.0, 2.0, 4.0}) {
    const double above =
        static_cast<double>(std::count_if(gaps_.begin(), gaps_.end(),
                                          [&](double gap) { return gap > multiple / kRate; })) /
        kArrivals;
    EXPECT_NEAR(above, std::exp(-multiple), 0.01) << "P(gap > " << multiple << " / rate)";
  }
  // Kolmogorov-Smirnov distance to the exponential CDF, under its 0.1% critical value
  // 1.95 / sqrt(n).
  std::vector<double> sorted = gaps_;
  std::sort(sorted.begin(), sorted.end());
  double distance = 0.0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const double cdf = 1.0 - std::exp(-kRate * sorted[i]);
    distance = std::max({distance, std::abs(cdf - static_cast<double>(i) / kArrivals),
                         std::abs(cdf - static_cast<double>(i + 1) / kArrivals)});
  }
  EXPECT_LT(distance, 1.95 / std::sqrt(static_cast<double>(kArrivals)));
}

TEST_F(PoissonScheduleTest, CountsPerSecondHavePoissonDispersion) {
  // Arrivals per 1 s window: mean = variance = rate for a Poisson process (a constant-rate
  // schedule would have variance 0).
  std::vector<int> counts(static_cast<size_t>(times_.back()), 0);
  for (double t : times_) {
    if (static_cast<size_t>(t) < counts.size()) ++counts[static_cast<size_t>(t)];
  }
  double mean = 0.0;
  for (int c : counts) mean += c;
  mean /= static_cast<double>(counts.size());
  double variance = 0.0;
  for (int c : counts) variance += (c - mean) * (c - mean);
  variance /= static_cast<double>(counts.size() - 1);
  EXPECT_NEAR(mean, kRate, 0.02 * kRate);
  EXPECT_NEAR(variance / mean, 1.0, 0.35);
}

TEST(ArrivalScheduleTest, PoissonIsReproducibleBySeed) {
  auto a = ArrivalSchedule::Create(ArrivalProcess::kPoisson, 50.0, 9);
  auto b = ArrivalSchedule::Create(ArrivalProcess::kPoisson, 50.0, 9);
  auto c = ArrivalSchedule::Create(ArrivalProcess::kPoisson, 50.0, 10);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto ta = a->Next();
    EXPECT_EQ(ta, b->Next());
    differs = differs || ta != c->Next();
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace dflash::loadtest
