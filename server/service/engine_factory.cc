#include "server/service/engine_factory.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/null/null_engine.h"
#if DFLASH_WITH_CUDA_ENGINE
#include "engine/cuda/cuda_devices.h"
#include "engine/cuda/cuda_engine.h"
#endif

namespace dflash::serving {
namespace {

using Engines = std::vector<std::unique_ptr<Engine>>;

// DFLASH_TEST_NULL_ENGINE_DELAY (a duration, e.g. "500ms"): every null-engine batch sleeps this
// long, so that tests of the whole dflash-server process can keep requests queued (drain and
// signal tests). For tests only; unset in service.
absl::StatusOr<absl::Duration> NullEngineTestDelay() {
  const char* text = std::getenv("DFLASH_TEST_NULL_ENGINE_DELAY");
  if (text == nullptr || *text == '\0') return absl::ZeroDuration();
  absl::Duration delay;
  if (!absl::ParseDuration(text, &delay) || delay < absl::ZeroDuration() ||
      delay == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DFLASH_TEST_NULL_ENGINE_DELAY: expected a finite duration such as "
                     "\"500ms\", got '",
                     text, "'"));
  }
  Log().warn("null engine batches sleep {} each (DFLASH_TEST_NULL_ENGINE_DELAY; tests only)",
             absl::FormatDuration(delay));
  return delay;
}

absl::StatusOr<Engines> CreateCpuEngine(const ModelEntry& entry, Checkpoint checkpoint) {
  if (entry.dtype == DtypeChoice::kFloat16 || entry.dtype == DtypeChoice::kBfloat16) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", entry.name,
                     "': the CPU engine computes in float32 only; use dtype: auto or float32"));
  }
  Engines engines;
  DFLASH_ASSIGN_OR_RETURN(
      std::unique_ptr<CpuEngine> engine,
      CpuEngine::Create(std::move(checkpoint), CpuEngine::Options{entry.cpu_threads}));
  engines.push_back(std::move(engine));
  return engines;
}

#if DFLASH_WITH_CUDA_ENGINE
absl::StatusOr<Engines> CreateCudaEngines(const ModelEntry& entry, Checkpoint checkpoint) {
  cuda::CudaEngine::Options options;
  switch (entry.dtype) {
    case DtypeChoice::kAuto:  // DeBERTa-v3 was trained in fp16; bf16 loses decision parity.
    case DtypeChoice::kFloat16:
      options.dtype = kernels::DataType::kFloat16;
      break;
    case DtypeChoice::kBfloat16:
      options.dtype = kernels::DataType::kBFloat16;
      break;
    case DtypeChoice::kFloat32:
      options.dtype = kernels::DataType::kFloat32;
      break;
  }
  switch (entry.tuning_mode) {
    case TuningMode::kHeuristic:
      options.tuning.mode = tuning::TuningMode::kHeuristic;
      break;
    case TuningMode::kProfile:
      options.tuning.mode = tuning::TuningMode::kProfile;
      break;
    case TuningMode::kProfileOnly:
      options.tuning.mode = tuning::TuningMode::kProfileOnly;
      break;
    case TuningMode::kAutotune:
      options.tuning.mode = tuning::TuningMode::kAutotune;
      break;
  }
  options.tuning.profile = entry.tuning_profile;
  options.allow_tf32 = entry.allow_tf32;
  options.max_batch_tokens = entry.batching.max_batch_tokens;
  options.max_batch_sequences = entry.batching.max_batch_sequences;
  const std::vector<int> devices = entry.devices.empty() ? std::vector<int>{0} : entry.devices;
  Engines engines;
  for (size_t i = 0; i < devices.size(); ++i) {
    options.device = devices[i];
    // Each engine consumes a checkpoint; the last one takes the original.
    Checkpoint copy = i + 1 < devices.size() ? checkpoint : std::move(checkpoint);
    absl::StatusOr<std::unique_ptr<cuda::CudaEngine>> engine =
        cuda::CudaEngine::Create(std::move(copy), options);
    if (!engine.ok()) {
      return absl::Status(engine.status().code(),
                          absl::StrCat("model '", entry.name, "' on CUDA device ", devices[i], ": ",
                                       engine.status().message()));
    }
    engines.push_back(*std::move(engine));
  }
  return engines;
}
#endif

}  // namespace

bool CudaEngineBuilt() { return DFLASH_WITH_CUDA_ENGINE != 0; }

absl::StatusOr<Engines> CreateEngines(const ModelEntry& entry, Checkpoint checkpoint) {
  switch (entry.backend) {
    case BackendChoice::kNull: {
      Log().warn("model '{}' uses the null engine: every output is zero", entry.name);
      DFLASH_ASSIGN_OR_RETURN(const absl::Duration delay, NullEngineTestDelay());
      Engines engines;
      engines.push_back(std::make_unique<NullEngine>(checkpoint.config, delay));
      return engines;
    }
    case BackendChoice::kCpu:
      return CreateCpuEngine(entry, std::move(checkpoint));
    case BackendChoice::kCuda:
#if DFLASH_WITH_CUDA_ENGINE
      return CreateCudaEngines(entry, std::move(checkpoint));
#else
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", entry.name,
          "': backend cuda is not available: this binary was built without a CUDA toolkit; use "
          "backend: cpu or auto"));
#endif
    case BackendChoice::kAuto:
      break;
  }
#if DFLASH_WITH_CUDA_ENGINE
  absl::StatusOr<int> usable = cuda::CountUsableCudaDevices();
  if (usable.ok()) {
    Log().info("model '{}': backend auto chose cuda ({} usable device(s); serving on {})",
               entry.name, *usable,
               entry.devices.empty()
                   ? std::string("device 0")
                   : absl::StrCat("devices ", absl::StrJoin(entry.devices, ", ")));
    return CreateCudaEngines(entry, std::move(checkpoint));
  }
  const std::string reason(usable.status().message());
#else
  const std::string reason = "this binary was built without a CUDA toolkit";
#endif
  Log().info("model '{}': backend auto chose cpu ({})", entry.name, reason);
  ModelEntry cpu_entry = entry;
  if (cpu_entry.dtype != DtypeChoice::kFloat32 && cpu_entry.dtype != DtypeChoice::kAuto) {
    Log().warn("model '{}': dtype {} needs the CUDA engine; the CPU engine computes float32",
               entry.name, DtypeChoiceName(entry.dtype));
    cpu_entry.dtype = DtypeChoice::kFloat32;
  }
  return CreateCpuEngine(cpu_entry, std::move(checkpoint));
}

}  // namespace dflash::serving
