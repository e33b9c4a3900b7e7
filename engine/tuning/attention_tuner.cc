#include "engine/tuning/attention_tuner.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/tuning/attention_benchmark.h"

namespace dflash::tuning {
absl::StatusOr<std::unique_ptr<AttentionTuner>> AttentionTuner::Create(
    const AttentionTunerOptions& options) {
  DFLASH_ASSIGN_OR_RETURN(const DeviceDescription device, DescribeCudaDevice(options.device));
  return CreateForDevice(options, device);
}

absl::StatusOr<std::unique_ptr<AttentionTuner>> AttentionTuner::CreateForDevice(
    const AttentionTunerOptions& options, const DeviceDescription& device) {
  std::unique_ptr<AttentionTuner> tuner(new AttentionTuner(options.mode, device));
  const bool reads_profiles =
      options.mode == TuningMode::kProfile || options.mode == TuningMode::kProfileOnly;
  if (!reads_profiles) return tuner;
  if (options.profile == "none") {
    tuner->why_ = "profile: none";
  } else if (options.profile == "auto") {
    DFLASH_ASSIGN_OR_RETURN(const std::vector<TuningProfile> profiles,
                            LoadTuningProfiles(options.profiles_dir));
    const TuningProfile* match = MatchTuningProfile(profiles, device, &tuner->why_);
    if (match == nullptr) {
      absl::StrAppend(&tuner->why_, " in ", options.profiles_dir.string());
    } else {
      tuner->profile_ = std::make_unique<TuningProfile>(*match);
    }
  } else {
    DFLASH_ASSIGN_OR_RETURN(TuningProfile profile, LoadTuningProfile(options.profile));
    if (profile.sm_major != device.sm_major || profile.sm_minor != device.sm_minor) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tuning profile ", options.profile, " is for sm_", profile.sm_major, profile.sm_minor,
          " (", profile.gpu, "), the device is ", DeviceSummary(device)));
    }
    if (profile.gpu != device.name || profile.cuda_major != device.cuda_major ||
        profile.cuda_minor != device.cuda_minor) {
      Log().warn("tuning profile {} was made on {} with CUDA {}.{}; running on {}", options.profile,
                 profile.gpu, profile.cuda_major, profile.cuda_minor, DeviceSummary(device));
    }
    tuner->why_ = absl::StrCat(profile.name, " (", options.profile, ") given explicitly");
    tuner->profile_ = std::make_unique<TuningProfile>(std::move(profile));
  }
  if (tuner->profile_ == nullptr && options.mode == TuningMode::kProfileOnly) {
    return absl::FailedPreconditionError(
        absl::StrCat("tuning mode profile_only needs a profile: ", tuner->why_));
  }
  Log().info("attention tuning: {}", tuner->Describe());
  return tuner;
}

AttentionTuner::~AttentionTuner() {
  if (blas_ != nullptr) cublasDestroy(blas_);
}

absl::StatusOr<kernels::AttentionKernelConfig> AttentionTuner::Select(
    const kernels::AttentionProblem& problem, cudaStream_t stream, void* workspace,
    size_t workspace_bytes) {
  kernels::AttentionProblem plain = problem;
  plain.config = nullptr;
  const kernels::AttentionKernelConfig heuristic = kernels::HeuristicAttentionConfig(plain);
  if (problem.dtype == kernels::DataType::kFloat32 || mode_ == TuningMode::kHeuristic) {
    return heuristic;
  }
  const std::string family = FamilyKey(FamilyOf(problem));
  if (mode_ == TuningMode::kAutotune) {
    if (auto it = tuned_.find(family); it != tuned_.end()) return it->second;
    return Autotune(plain, family, stream, workspace, workspace_bytes);
  }
  const ProfileEntry* entry = profile_ != nullptr ? profile_->Find(FamilyOf(problem)) : nullptr;
  if (entry == nullptr) {
    if (mode_ == TuningMode::kProfileOnly) {
      return absl::FailedPreconditionError(
          absl::StrCat("tuning profile ", profile_->name, " (", profile_->source,
                       ") has no entry for family ", family, " and the mode is profile_only"));
    }
    return heuristic;
  }
  if (kernels::CheckAttentionConfig(plain, entry->config) != cudaSuccess) {
    const std::string message = absl::StrCat("tuning profile ", profile_->name, " names variant ",
                                             ConfigLabel(entry->config), " for family ", family,
                                             ", which this build cannot run for the problem");
    if (mode_ == TuningMode::kProfileOnly) return absl::FailedPreconditionError(message);
    if (!warned_[family]) {
      Log().warn("{}; using the heuristic's {}", message, ConfigLabel(heuristic));
      warned_[family] = true;
    }
    return heuristic;
  }
  return entry->config;
}

absl::StatusOr<kernels::AttentionKernelConfig> AttentionTuner::Autotune(
    const kernels::AttentionProblem& problem, const std::string& family, cudaStream_t stream,
    void* workspace, size_t workspace_bytes) {
  // The candidates the workspace lets run. None (a padded problem needs its V copy whatever the
  // variant) is the caller's error: the heuristic's variant would be refused at launch too.
  const std::vector<kernels::AttentionKernelConfig> candidates =
      kernels::AttentionCandidateConfigs(problem);
  if (candidates.empty()) {  // Nothing to compare: the heuristic's variant, untimed.
    return tuned_[family] = kernels::HeuristicAttentionConfig(problem);
  }
  std::vector<kernels::AttentionKernelConfig> runnable;
  std::string report;
  size_t least_bytes = std::numeric_limits<size_t>::max();
  for (const kernels::AttentionKernelConfig& config : candidates) {
    kernels::AttentionProblem with = problem;
    with.config = &config;
    const size_t bytes = kernels::AttentionWorkspaceBytes(with);
    least_bytes = std::min(least_bytes, bytes);
    if (bytes > workspace_bytes) {
      absl::StrAppend(&report, " ", ConfigLabel(config), " (workspace too small)");
    } else {
      runnable.push_back(config);
    }
  }
  if (runnable.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("autotune ", family, ": no candidate variant runs in ", workspace_bytes,
                     " bytes of workspace (the smallest needs ", least_bytes, ")"));
  }
  if (blas_ == nullptr && cublasCreate(&blas_) != CUBLAS_STATUS_SUCCESS) {
    blas_ = nullptr;
    return absl::InternalError("autotune: cublasCreate failed");
  }
  AttentionTiming timing;
  timing.warmup = 2;
  timing.repeats = 5;
  kernels::AttentionKernelConfig best = runnable.front();
  double best_ms = std::numeric_limits<double>::infinity();
  for (const kernels::AttentionKernelConfig& config : runnable) {
    DFLASH_ASSIGN_OR_RETURN(const double ms,
                            TimeAttention(problem, config, workspace, blas_, stream, timing));
    absl::StrAppend(&report, " ", ConfigLabel(config), " ", ms, " ms");
    if (ms < best_ms) {
      best_ms = ms;
      best = config;
    }
  }
  Log().info("autotune {}:{} -> {}", family, report, ConfigLabel(best));
  tuned_[family] = best;
  return best;
}

std::string AttentionTuner::Describe() const {
  switch (mode_) {
    case TuningMode::kHeuristic:
      return "heuristic";
    case TuningMode::kAutotune:
      return absl::StrCat("autotune (", tuned_.size(), " families tuned on ",
                          DeviceSummary(device_), ")");
    case TuningMode::kProfile:
    case TuningMode::kProfileOnly:
      if (profile_ == nullptr) return absl::StrCat("heuristic (", why_, ")");
      return absl::StrCat(profile_->name, " (", TuningModeName(mode_), ")");
  }
  return "?";
}

}  // namespace dflash::tuning
