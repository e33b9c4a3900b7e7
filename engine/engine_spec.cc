#include "engine/engine_spec.h"

#include "common/choice_names.h"

namespace dflash {

absl::string_view EngineBackendName(EngineBackend backend) {
  return ChoiceName(kEngineBackendNames, backend);
}
absl::string_view EngineDtypeName(EngineDtype dtype) {
  return ChoiceName(kEngineDtypeNames, dtype);
}
absl::string_view TuningModeName(TuningMode mode) { return ChoiceName(kTuningModeNames, mode); }

absl::StatusOr<EngineBackend> ParseEngineBackend(absl::string_view name) {
  return ParseChoice(kEngineBackendNames, name, "backend");
}
absl::StatusOr<EngineDtype> ParseEngineDtype(absl::string_view name) {
  return ParseChoice(kEngineDtypeNames, name, "dtype");
}
absl::StatusOr<TuningMode> ParseTuningMode(absl::string_view name) {
  return ParseChoice(kTuningModeNames, name, "tuning mode");
}

}  // namespace dflash
