// Turns an engine spec into engines: the CPU engine, one CUDA engine per configured GPU, or the
// null engine. `auto` picks CUDA when this build has the CUDA engine and the machine a usable GPU,
// else the CPU engine, and logs which and why. The only place that names the engines.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/engine_spec.h"
#include "engine/model/checkpoint.h"

namespace dflash {

absl::StatusOr<std::vector<std::unique_ptr<Engine>>> CreateEngines(const EngineSpec& spec,
                                                                   Checkpoint checkpoint);

// Whether this binary contains the CUDA engine (built with a CUDA toolkit).
bool CudaEngineBuilt();

}  // namespace dflash
