#include "loadtest/arrival_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

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
  if (process == ArrivalProcess::kClosedLoop) {
    return absl::InvalidArgumentError("a closed loop has no arrival schedule");
  }
  if (!std::isfinite(rate_per_second) || rate_per_second <= 0.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "open-loop rate must be a positive number of calls per second, got ", rate_per_second));
  }
  return ArrivalSchedule(process, rate_per_second, seed);
}

std::chrono::nanoseconds ArrivalSchedule::Next() {
  double seconds = 0.0;
  if (process_ == ArrivalProcess::kConstant) {
    seconds = static_cast<double>(index_) / rate_;
  } else {
    poisson_seconds_ += Exponential(rng_, rate_);
    seconds = poisson_seconds_;
  }
  ++index_;
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(seconds * 1e9)));
}

}  // namespace dflash::loadtest
