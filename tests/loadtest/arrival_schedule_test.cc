#include "loadtest/arrival_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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

TEST(ArrivalScheduleTest, SplitConstantScheduleMergesToTheSingleOne) {
  for (double rate : {3.0, 43080.0}) {
    for (int senders : {1, 2, 3, 4, 7}) {
      auto single = ArrivalSchedule::Create(ArrivalProcess::kConstant, rate, 1);
      auto merged = MergedArrivals::Create(ArrivalProcess::kConstant, rate, 1, senders);
      ASSERT_TRUE(single.ok() && merged.ok());
      for (int n = 0; n < 100000; ++n) {
        const MergedArrivals::Arrival arrival = merged->Next();
        ASSERT_EQ(arrival.offset, single->Next()) << "rate " << rate << ", senders " << senders;
        // Sender k has calls k, k + senders, ...: the request indices it sends.
        ASSERT_EQ(arrival.sender, n % senders);
      }
    }
  }
}

TEST(ArrivalScheduleTest, SharesOfASplitSchedule) {
  EXPECT_FALSE(ArrivalSchedule::CreateShare(ArrivalProcess::kPoisson, 10.0, 1, 0, 0).ok());
  EXPECT_FALSE(ArrivalSchedule::CreateShare(ArrivalProcess::kPoisson, 10.0, 1, 2, 2).ok());
  EXPECT_FALSE(ArrivalSchedule::CreateShare(ArrivalProcess::kPoisson, 10.0, 1, -1, 2).ok());
  EXPECT_FALSE(ArrivalSchedule::CreateShare(ArrivalProcess::kClosedLoop, 10.0, 1, 0, 2).ok());
  // The only share of one sender is the whole schedule, so --senders=1 keeps earlier runs' times.
  auto whole = ArrivalSchedule::Create(ArrivalProcess::kPoisson, 50.0, 9);
  auto only = ArrivalSchedule::CreateShare(ArrivalProcess::kPoisson, 50.0, 9, 0, 1);
  // Constant share 1 of 3 at 30/s: calls 1, 4, 7, ... of the whole schedule.
  auto constant = ArrivalSchedule::CreateShare(ArrivalProcess::kConstant, 30.0, 9, 1, 3);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(whole->Next(), only->Next());
    EXPECT_EQ(constant->Next().count(), std::llround((1.0 + 3.0 * i) / 30.0 * 1e9));
  }
  // Poisson shares are distinct streams, each reproducible by seed.
  auto a = ArrivalSchedule::CreateShare(ArrivalProcess::kPoisson, 50.0, 9, 0, 2);
  auto b = ArrivalSchedule::CreateShare(ArrivalProcess::kPoisson, 50.0, 9, 1, 2);
  auto b_again = ArrivalSchedule::CreateShare(ArrivalProcess::kPoisson, 50.0, 9, 1, 2);
  int equal = 0;
  for (int i = 0; i < 100; ++i) {
    const auto tb = b->Next();
    EXPECT_EQ(tb, b_again->Next());
    equal += a->Next() == tb ? 1 : 0;
  }
  EXPECT_EQ(equal, 0);
}

TEST(ArrivalScheduleTest, SplitPoissonCountsAreWithinTenSigma) {
  // Arrivals in a window of T seconds are Poisson with mean and variance rate * T, for the merged
  // stream and for each share (at rate / senders). Ten standard deviations: a fixed seed makes
  // this deterministic, and the bound would hold for any seed but with odds far below 1e-20.
  constexpr double kRate = 1000.0;
  constexpr double kWindowSeconds = 100.0;
  const auto window = std::chrono::nanoseconds(static_cast<int64_t>(kWindowSeconds * 1e9));
  for (int senders : {2, 4, 16}) {
    auto merged = MergedArrivals::Create(ArrivalProcess::kPoisson, kRate, 7, senders);
    ASSERT_TRUE(merged.ok());
    std::vector<int64_t> per_sender(static_cast<size_t>(senders), 0);
    int64_t total = 0;
    std::chrono::nanoseconds previous{0};
    for (MergedArrivals::Arrival arrival = merged->Next(); arrival.offset < window;
         arrival = merged->Next()) {
      ASSERT_GE(arrival.offset, previous);
      previous = arrival.offset;
      ++total;
      ++per_sender[static_cast<size_t>(arrival.sender)];
    }
    const double expected = kRate * kWindowSeconds;
    EXPECT_NEAR(static_cast<double>(total), expected, 10.0 * std::sqrt(expected)) << senders;
    for (int64_t count : per_sender) {
      EXPECT_NEAR(static_cast<double>(count), expected / senders,
                  10.0 * std::sqrt(expected / senders))
          << senders;
    }
  }
}

// Statistical checks of the Poisson schedule with a fixed seed, whole and merged from 4 shares:
// deterministic, with bounds several standard errors wide.
class PoissonScheduleTest : public ::testing::TestWithParam<int> {
 protected:
  static constexpr double kRate = 1000.0;
  static constexpr int kArrivals = 200000;

  void SetUp() override {
    auto schedule = MergedArrivals::Create(ArrivalProcess::kPoisson, kRate, 42, GetParam());
    ASSERT_TRUE(schedule.ok());
    double previous = 0.0;
    for (int i = 0; i < kArrivals; ++i) {
      const double t = static_cast<double>(schedule->Next().offset.count()) * 1e-9;
      ASSERT_GE(t, previous);
      gaps_.push_back(t - previous);
      times_.push_back(t);
      previous = t;
    }
  }

  std::vector<double> gaps_;
  std::vector<double> times_;
};

TEST_P(PoissonScheduleTest, MeanRate) {
  // 200,000 arrivals over about 200 s: the standard error of the rate is about 0.2%.
  const double rate = kArrivals / times_.back();
  EXPECT_NEAR(rate, kRate, 0.01 * kRate);
}

TEST_P(PoissonScheduleTest, GapsAreExponential) {
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

TEST_P(PoissonScheduleTest, CountsPerSecondHavePoissonDispersion) {
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

INSTANTIATE_TEST_SUITE_P(Senders, PoissonScheduleTest, ::testing::Values(1, 4));

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
