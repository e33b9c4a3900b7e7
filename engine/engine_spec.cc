#include "engine/engine_spec.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dflash {
namespace {

template <typename Enum, size_t N>
absl::string_view NameOf(const std::array<std::pair<absl::string_view, Enum>, N>& names,
                         Enum value) {
  for (const auto& [name, choice] : names) {
    if (choice == value) return name;
  }
  return "?";
}

// `what` names the choice in the error ("backend"); the accepted names follow it.
template <typename Enum, size_t N>
absl::StatusOr<Enum> Parse(const std::array<std::pair<absl::string_view, Enum>, N>& names,
                           absl::string_view name, absl::string_view what) {
  std::string expected;
  for (size_t i = 0; i < N; ++i) {
    if (names[i].first == name) return names[i].second;
    absl::StrAppend(&expected, i == 0 ? "" : i + 1 == N ? " or " : ", ", names[i].first);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " '", name, "' (expected ", expected, ")"));
}

}  // namespace

absl::string_view EngineBackendName(EngineBackend backend) {
  return NameOf(kEngineBackendNames, backend);
}
absl::string_view EngineDtypeName(EngineDtype dtype) { return NameOf(kEngineDtypeNames, dtype); }
absl::string_view TuningModeName(TuningMode mode) { return NameOf(kTuningModeNames, mode); }

absl::StatusOr<EngineBackend> ParseEngineBackend(absl::string_view name) {
  return Parse(kEngineBackendNames, name, "backend");
}
absl::StatusOr<EngineDtype> ParseEngineDtype(absl::string_view name) {
  return Parse(kEngineDtypeNames, name, "dtype");
}
absl::StatusOr<TuningMode> ParseTuningMode(absl::string_view name) {
  return Parse(kTuningModeNames, name, "tuning mode");
}

}  // namespace dflash
