// When calls are sent. Closed loop: each worker sends its next call when the previous answer
// arrives, so the server's speed sets the rate. Open loop: calls are due at times fixed in advance
// (a constant rate, or a Poisson process of the same mean rate) whatever the answers do, which is
// how independent users arrive and what latency percentiles must be measured against.
#pragma once

#include <chrono>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/random.h"

namespace dflash::loadtest {

enum class ArrivalProcess { kClosedLoop, kConstant, kPoisson };

// "closed", "constant" or "poisson".
absl::StatusOr<ArrivalProcess> ParseArrivalProcess(absl::string_view name);
absl::string_view ArrivalProcessName(ArrivalProcess process);

// The intended send times of an open-loop run, or of one sender's share of it, as offsets from
// its start. Deterministic for a given seed.
class ArrivalSchedule {
 public:
  // `process` must be kConstant or kPoisson and `rate_per_second` positive and finite.
  static absl::StatusOr<ArrivalSchedule> Create(ArrivalProcess process, double rate_per_second,
                                                uint64_t seed);

  // Share `sender` (from 0) of the schedule at `rate_per_second` split over `senders` threads, so
  // that the shares together are that schedule. Constant: every senders-th arrival of Create's
  // schedule, from the sender-th, so the merged shares are exactly Create's schedule. Poisson: an
  // independent Poisson process at rate / senders seeded from (seed, sender), since independent
  // Poisson processes superpose to one at the summed rate; share 0 of 1 is Create's schedule.
  static absl::StatusOr<ArrivalSchedule> CreateShare(ArrivalProcess process, double rate_per_second,
                                                     uint64_t seed, int sender, int senders);

  // The offset of the next arrival. Constant: n / rate for the n-th call of the whole schedule
  // (from 0), computed from n so that rounding never accumulates. Poisson: the running sum of
  // exponential gaps of mean 1 / rate (of the share's rate).
  std::chrono::nanoseconds Next();

 private:
  ArrivalSchedule(ArrivalProcess process, double rate_per_second, uint64_t seed, int sender,
                  int senders)
      : process_(process),
        rate_(rate_per_second),
        share_rate_(rate_per_second / senders),
        rng_(MixSeed(seed ^ kScheduleStream, static_cast<uint64_t>(sender))),
        index_(static_cast<uint64_t>(sender)),
        stride_(static_cast<uint64_t>(senders)) {}

  // Keeps the schedule's random stream apart from those of the requests (MixSeed(seed, index)).
  static constexpr uint64_t kScheduleStream = 0x5c4ed01e5c4ed01eULL;

  ArrivalProcess process_;
  double rate_;
  double share_rate_;
  Rng rng_;
  // Constant: the index of the next call in the whole schedule, advancing by stride_.
  uint64_t index_;
  uint64_t stride_;
  double poisson_seconds_ = 0.0;
};

// The arrivals of all shares of a split schedule in time order (ties: the lower sender first): the
// stream the senders send together, computed ahead of them where a run is bounded by a count.
class MergedArrivals {
 public:
  struct Arrival {
    std::chrono::nanoseconds offset;
    int sender;
  };

  // The shares of ArrivalSchedule::CreateShare(process, rate_per_second, seed, k, senders).
  static absl::StatusOr<MergedArrivals> Create(ArrivalProcess process, double rate_per_second,
                                               uint64_t seed, int senders);

  Arrival Next();

 private:
  explicit MergedArrivals(std::vector<ArrivalSchedule> shares);

  using Head = std::pair<std::chrono::nanoseconds, int>;  // The next arrival of a share.
  std::vector<ArrivalSchedule> shares_;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads_;
};

}  // namespace dflash::loadtest
