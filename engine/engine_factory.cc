#include "engine/engine_factory.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/null/null_engine.h"
#if DFLASH_WITH_CUDA_ENGINE
#include "engine/cuda/cuda_devices.h"
#include "engine/cuda/cuda_engine.h"
#endif

namespace dflash {
namespace {

using Engines = std::vector<std::unique_ptr<Engine>>;

// DFLASH_TEST_NULL_ENGINE_DELAY: every null-engine batch sleeps this long, a duration ("500ms")
// optionally followed by a time per token of the batch ("1ms+2us/token"), so that tests of the
// whole dflash-server process can keep requests queued (drain and signal tests) and benchmarks can
// stand in for device time. For tests only; unset in service.
absl::StatusOr<NullEngine::Delay> NullEngineTestDelay() {
  const char* text = std::getenv("DFLASH_TEST_NULL_ENGINE_DELAY");
  if (text == nullptr || *text == '\0') return NullEngine::Delay{};
  auto parse = [](absl::string_view value, absl::Duration* delay) {
    return absl::ParseDuration(value, delay) && *delay >= absl::ZeroDuration() &&
           *delay != absl::InfiniteDuration();
  };
  NullEngine::Delay delay;
  std::vector<absl::string_view> parts = absl::StrSplit(text, '+');
  bool valid = parts.size() <= 2 && parse(parts[0], &delay.per_batch);
  if (valid && parts.size() == 2) {
    valid = absl::ConsumeSuffix(&parts[1], "/token") && parse(parts[1], &delay.per_token);
  }
  if (!valid) {
    return absl::InvalidArgumentError(
        absl::StrCat("DFLASH_TEST_NULL_ENGINE_DELAY: expected a finite duration such as "
                     "\"500ms\", optionally + a duration per token such as \"1ms+2us/token\", "
                     "got '",
                     text, "'"));
  }
  Log().warn("null engine batches sleep {} each (DFLASH_TEST_NULL_ENGINE_DELAY; tests only)", text);
  return delay;
}

absl::StatusOr<Engines> CreateCpuEngine(const EngineSpec& spec, Checkpoint checkpoint) {
  if (spec.dtype == EngineDtype::kFloat16 || spec.dtype == EngineDtype::kBfloat16) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", spec.model_name,
                     "': the CPU engine computes in float32 only; use dtype: auto or float32"));
  }
  Engines engines;
  DFLASH_ASSIGN_OR_RETURN(
      std::unique_ptr<CpuEngine> engine,
      CpuEngine::Create(std::move(checkpoint), CpuEngine::Options{spec.cpu_threads}));
  engines.push_back(std::move(engine));
  return engines;
}

#if DFLASH_WITH_CUDA_ENGINE
absl::StatusOr<Engines> CreateCudaEngines(const EngineSpec& spec, Checkpoint checkpoint) {
  cuda::CudaEngine::Options options;
  switch (spec.dtype) {
    case EngineDtype::kAuto:  // DeBERTa-v3 was trained in fp16; bf16 loses decision parity.
    case EngineDtype::kFloat16:
      options.dtype = kernels::DataType::kFloat16;
      break;
    case EngineDtype::kBfloat16:
      options.dtype = kernels::DataType::kBFloat16;
      break;
    case EngineDtype::kFloat32:
      options.dtype = kernels::DataType::kFloat32;
      break;
  }
  options.tuning.mode = spec.tuning_mode;
  options.tuning.profile = spec.tuning_profile;
  options.allow_tf32 = spec.allow_tf32;
  options.max_batch_tokens = spec.max_batch_tokens;
  options.max_batch_sequences = spec.max_batch_sequences;
  const std::vector<int> devices = spec.devices.empty() ? std::vector<int>{0} : spec.devices;
  Engines engines;
  for (size_t i = 0; i < devices.size(); ++i) {
    options.device = devices[i];
    // Each engine consumes a checkpoint; the last one takes the original.
    Checkpoint copy = i + 1 < devices.size() ? checkpoint : std::move(checkpoint);
    absl::StatusOr<std::unique_ptr<cuda::CudaEngine>> engine =
        cuda::CudaEngine::Create(std::move(copy), options);
    if (!engine.ok()) {
      return absl::Status(engine.status().code(),
                          absl::StrCat("model '", spec.model_name, "' on CUDA device ", devices[i],
                                       ": ", engine.status().message()));
    }
    engines.push_back(*std::move(engine));
  }
  return engines;
}
#endif

}  // namespace

bool CudaEngineBuilt() { return DFLASH_WITH_CUDA_ENGINE != 0; }

absl::StatusOr<Engines> CreateEngines(const EngineSpec& spec, Checkpoint checkpoint) {
  switch (spec.backend) {
    case EngineBackend::kNull: {
      // One stand-in per listed device (one without a list): the scheduler's multi-engine path,
      // its queue shared by several runners, then runs on a machine without GPUs.
      const size_t count = spec.devices.empty() ? 1 : spec.devices.size();
      Log().warn("model '{}' uses the null engine ({} of them): every output is zero",
                 spec.model_name, count);
      DFLASH_ASSIGN_OR_RETURN(const NullEngine::Delay delay, NullEngineTestDelay());
      Engines engines;
      for (size_t i = 0; i < count; ++i) {
        engines.push_back(std::make_unique<NullEngine>(checkpoint.config, delay));
      }
      return engines;
    }
    case EngineBackend::kCpu:
      return CreateCpuEngine(spec, std::move(checkpoint));
    case EngineBackend::kCuda:
#if DFLASH_WITH_CUDA_ENGINE
      return CreateCudaEngines(spec, std::move(checkpoint));
#else
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", spec.model_name,
          "': backend cuda is not available: this binary was built without a CUDA toolkit; use "
          "backend: cpu or auto"));
#endif
    case EngineBackend::kAuto:
      break;
  }
#if DFLASH_WITH_CUDA_ENGINE
  absl::StatusOr<int> usable = cuda::CountUsableCudaDevices();
  if (usable.ok()) {
    Log().info("model '{}': backend auto chose cuda ({} usable device(s); serving on {})",
               spec.model_name, *usable,
               spec.devices.empty() ? std::string("device 0")
                                    : absl::StrCat("devices ", absl::StrJoin(spec.devices, ", ")));
    return CreateCudaEngines(spec, std::move(checkpoint));
  }
  const std::string reason(usable.status().message());
#else
  const std::string reason = "this binary was built without a CUDA toolkit";
#endif
  Log().info("model '{}': backend auto chose cpu ({})", spec.model_name, reason);
  EngineSpec cpu_spec = spec;
  if (cpu_spec.dtype != EngineDtype::kFloat32 && cpu_spec.dtype != EngineDtype::kAuto) {
    Log().warn("model '{}': dtype {} needs the CUDA engine; the CPU engine computes float32",
               spec.model_name, EngineDtypeName(spec.dtype));
    cpu_spec.dtype = EngineDtype::kFloat32;
  }
  return CreateCpuEngine(cpu_spec, std::move(checkpoint));
}

}  // namespace dflash
