// What the engine factory (engine/engine_factory.h) builds for one model: the backend, the
// precision, the devices, the largest batch, and how the CUDA engine tunes its kernels. The
// configuration file and the command-line tools fill it in; only the factory names engines.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash {

// kNull computes nothing and returns zeros: it measures what the server itself costs per request.
// kAuto takes CUDA where this build has the CUDA engine and the machine a usable GPU, else the CPU.
enum class EngineBackend { kAuto, kCpu, kCuda, kNull };
enum class EngineDtype { kAuto, kFloat32, kFloat16, kBfloat16 };
// How the CUDA engine picks attention kernel variants (engine/tuning/attention_tuner.h).
enum class TuningMode { kHeuristic, kProfile, kProfileOnly, kAutotune };

// The spellings of the configuration file and of the command lines ("cuda", "bfloat16",
// "profile_only"); YAML reads a bare null as "no value", so a file spells "null" in quotes.
inline constexpr std::array<std::pair<absl::string_view, EngineBackend>, 4> kEngineBackendNames = {{
    {"auto", EngineBackend::kAuto},
    {"cpu", EngineBackend::kCpu},
    {"cuda", EngineBackend::kCuda},
    {"null", EngineBackend::kNull},
}};
inline constexpr std::array<std::pair<absl::string_view, EngineDtype>, 4> kEngineDtypeNames = {{
    {"auto", EngineDtype::kAuto},
    {"float32", EngineDtype::kFloat32},
    {"float16", EngineDtype::kFloat16},
    {"bfloat16", EngineDtype::kBfloat16},
}};
inline constexpr std::array<std::pair<absl::string_view, TuningMode>, 4> kTuningModeNames = {{
    {"heuristic", TuningMode::kHeuristic},
    {"profile", TuningMode::kProfile},
    {"profile_only", TuningMode::kProfileOnly},
    {"autotune", TuningMode::kAutotune},
}};

absl::string_view EngineBackendName(EngineBackend backend);
absl::string_view EngineDtypeName(EngineDtype dtype);
absl::string_view TuningModeName(TuningMode mode);

// INVALID_ARGUMENT for a name outside the tables above, listing the accepted ones.
absl::StatusOr<EngineBackend> ParseEngineBackend(absl::string_view name);
absl::StatusOr<EngineDtype> ParseEngineDtype(absl::string_view name);
absl::StatusOr<TuningMode> ParseTuningMode(absl::string_view name);

struct EngineSpec {
  std::string model_name;  // Names the model in log lines and errors.
  EngineBackend backend = EngineBackend::kAuto;
  // kAuto: float16 on CUDA (DeBERTa-v3 was trained in fp16), float32 on the CPU, which computes
  // nothing else.
  EngineDtype dtype = EngineDtype::kAuto;
  std::vector<int> devices;  // CUDA device ordinals, one engine each; empty: device 0.
  // dtype float32 on CUDA only: TF32 tensor cores for the GEMMs and attention (about 1e-3
  // relative error) instead of strict float32 (CudaEngine::Options::allow_tf32).
  bool allow_tf32 = false;
  int cpu_threads = 0;  // BLAS threads of the CPU engine; 0: all cores.
  // The largest batch the CUDA engine accepts, which sizes its workspace: total tokens, and
  // sequences (0: as many as tokens).
  int64_t max_batch_tokens = 16384;
  int max_batch_sequences = 0;
  TuningMode tuning_mode = TuningMode::kProfile;
  std::string tuning_profile = "auto";  // "auto", "none" or the path of a profile.
};

}  // namespace dflash
