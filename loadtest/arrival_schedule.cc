#include "loadtest/arrival_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dflash::loadtest {

absl::StatusOr<ArrivalProcess> ParseArrivalProcess(absl::string_view name) {
  if (name == "closed") return ArrivalProcess::kClosedLoop;
  if (name == "constant") return ArrivalProcess::kConstant;
  if (name == "poisson") return ArrivalProcess::kPoisson;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", name, "': expected closed, constant or poisson"));
}

absl::string_view ArrivalProcessName(ArrivalProcess process) {
  switch (process) {
    case ArrivalProcess::kClosedLoop:
      return "closed";
    case ArrivalProcess::kConstant:
      return "constant";
    case ArrivalProcess::kPoisson:
      return "poisson";
  }
  return "unknown";
}

absl::StatusOr<ArrivalSchedule> ArrivalSchedule::Create(ArrivalProcess process,
                                                        double rate_per_second, uint64_t seed) {
  return CreateShare(process, rate_per_second, seed, 0, 1);
}

absl::StatusOr<ArrivalSchedule> ArrivalSchedule::CreateShare(ArrivalProcess process,
                                                             double rate_per_second, uint64_t seed,
                                                             int sender, int senders) {
  if (process == ArrivalProcess::kClosedLoop) {
    return absl::InvalidArgumentError("a closed loop has no arrival schedule");
  }
  if (!std::isfinite(rate_per_second) || rate_per_second <= 0.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "open-loop rate must be a positive number of calls per second, got ", rate_per_second));
  }
  if (senders < 1 || sender < 0 || sender >= senders) {
    return absl::InvalidArgumentError(
        absl::StrCat("no share ", sender, " of a schedule split over ", senders, " senders"));
  }
  return ArrivalSchedule(process, rate_per_second, seed, sender, senders);
}

std::chrono::nanoseconds ArrivalSchedule::Next() {
  double seconds = 0.0;
  if (process_ == ArrivalProcess::kConstant) {
    seconds = static_cast<double>(index_) / rate_;
    index_ += stride_;
  } else {
    poisson_seconds_ += Exponential(rng_, share_rate_);
    seconds = poisson_seconds_;
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(seconds * 1e9)));
}

absl::StatusOr<MergedArrivals> MergedArrivals::Create(ArrivalProcess process,
                                                      double rate_per_second, uint64_t seed,
                                                      int senders) {
  std::vector<ArrivalSchedule> shares;
  for (int sender = 0; sender < std::max(senders, 1); ++sender) {
    DFLASH_ASSIGN_OR_RETURN(
        ArrivalSchedule share,
        ArrivalSchedule::CreateShare(process, rate_per_second, seed, sender, senders));
    shares.push_back(std::move(share));
  }
  return MergedArrivals(std::move(shares));
}

MergedArrivals::MergedArrivals(std::vector<ArrivalSchedule> shares) : shares_(std::move(shares)) {
  for (size_t sender = 0; sender < shares_.size(); ++sender) {
    heads_.emplace(shares_[sender].Next(), static_cast<int>(sender));
  }
}

MergedArrivals::Arrival MergedArrivals::Next() {
  const auto [offset, sender] = heads_.top();
  heads_.pop();
  heads_.emplace(shares_[static_cast<size_t>(sender)].Next(), sender);
  return Arrival{offset, sender};
}

}  // namespace dflash::loadtest
