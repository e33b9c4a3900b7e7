// When calls are sent. Closed loop: each worker sends its next call when the previous answer
// arrives, so the server's speed sets the rate. Open loop: calls are due at times fixed in advance
// (a constant rate, or a Poisson process of the same mean rate) whatever the answers do, which is
// how independent users arrive and what latency percentiles must be measured against.
#pragma once

#include <chrono>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/random.h"

namespace dflash::loadtest {

enum class ArrivalProcess { kClosedLoop, kConstant, kPoisson };

// "closed", "constant" or "poisson".
absl::StatusOr<ArrivalProcess> ParseArrivalProcess(absl::string_view name);
absl::string_view ArrivalProcessName(ArrivalProcess process);

// The intended send times of an open-loop run, as offsets from its start. Deterministic for a
// given seed.
class ArrivalSchedule {
 public:
  // `process` must be kConstant or kPoisson and `rate_per_second` positive and finite.
  static absl::StatusOr<ArrivalSchedule> Create(ArrivalProcess process, double rate_per_second,
                                                uint64_t seed);

  // The offset of the next arrival. Constant: n / rate for the n-th call (from 0), computed from
  // n so that rounding never accumulates. Poisson: the running sum of exponential gaps of mean
  // 1 / rate.
  std::chrono::nanoseconds Next();

 private:
  ArrivalSchedule(ArrivalProcess process, double rate_per_second, uint64_t seed)
      : process_(process), rate_(rate_per_second), rng_(MixSeed(seed ^ kScheduleStream, 0)) {}

  // Keeps the schedule's random stream apart from those of the requests (MixSeed(seed, index)).
  static constexpr uint64_t kScheduleStream = 0x5c4ed01e5c4ed01eULL;

  ArrivalProcess process_;
  double rate_;
  Rng rng_;
  uint64_t index_ = 0;
  double poisson_seconds_ = 0.0;
};

}  // namespace dflash::loadtest
