// Chooses the attention kernel variant (kernels::AttentionKernelConfig) of every forward the
// engine runs, by mode:
//   heuristic     the built-in choice (kernels::HeuristicAttentionConfig); profiles are not read.
//   profile       the matching profile's entry for the problem's family, else the heuristic.
//   profile_only  the profile's entry; a family it lacks is FAILED_PRECONDITION, and so is
//                 starting without a profile for the device.
//   autotune      the first problem of each family times every candidate variant on the live
//                 inputs and keeps the fastest for the family (in memory, per tuner); profiles
//                 are not read. Candidates are not checked against a reference here: each is a
//                 tested variant, and dflash-tune checks them on the tuning shapes.
// The strict float32 path has a single variant and never misses.
// Not thread-safe: one tuner per engine thread.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/engine_spec.h"
#include "engine/tuning/attention_family.h"
#include "engine/tuning/profiles_directory.h"
#include "engine/tuning/tuning_profile.h"
#include "kernels/attention/disentangled_attention.h"

namespace dflash::tuning {

struct AttentionTunerOptions {
  TuningMode mode = TuningMode::kProfile;
  // "auto": the profile of profiles_dir matching the device (MatchTuningProfile); "none": no
  // profile; else the path of a YAML profile, used whatever its GPU name and toolkit as long as
  // its SM matches the device's (a warning is logged when the name or toolkit differ).
  std::string profile = "auto";
  std::filesystem::path profiles_dir = DefaultProfilesDirectory();
  int device = 0;
};

class AttentionTuner {
 public:
  // Reads the device (DescribeCudaDevice) and the profiles the options name.
  static absl::StatusOr<std::unique_ptr<AttentionTuner>> Create(
      const AttentionTunerOptions& options);
  // The same for a given device description: what Create does after asking CUDA (tests).
  static absl::StatusOr<std::unique_ptr<AttentionTuner>> CreateForDevice(
      const AttentionTunerOptions& options, const DeviceDescription& device);

  ~AttentionTuner();
  AttentionTuner(const AttentionTuner&) = delete;
  AttentionTuner& operator=(const AttentionTuner&) = delete;

  // The variant for `problem` (its config field is ignored). In autotune mode the first problem
  // of a family runs every candidate whose workspace fits in `workspace_bytes` on `stream`
  // (writing problem.out and lse), synchronizing the stream; pass a workspace of
  // kernels::AttentionMaxWorkspaceBytes(problem) bytes to let every candidate compete
  // (InvalidArgument when none fits: a padded problem needs a copy of V whatever the variant).
  // Other modes touch neither the device nor the workspace.
  absl::StatusOr<kernels::AttentionKernelConfig> Select(const kernels::AttentionProblem& problem,
                                                        cudaStream_t stream, void* workspace,
                                                        size_t workspace_bytes);

  // One line for Info and metrics: "h200-sm90-cuda13.0 (profile)", "heuristic (no profile for
  // NVIDIA GeForce RTX 4090 sm_89 CUDA 13.0 among 1)", "autotune (3 families tuned)".
  std::string Describe() const;

  TuningMode mode() const { return mode_; }
  // The profile in use (null: none).
  const TuningProfile* profile() const { return profile_.get(); }

 private:
  AttentionTuner(TuningMode mode, const DeviceDescription& device) : mode_(mode), device_(device) {}

  absl::StatusOr<kernels::AttentionKernelConfig> Autotune(const kernels::AttentionProblem& problem,
                                                          const std::string& family,
                                                          cudaStream_t stream, void* workspace,
                                                          size_t workspace_bytes);

  TuningMode mode_;
  DeviceDescription device_;
  std::unique_ptr<TuningProfile> profile_;
  std::string why_;  // How the profile was (not) chosen.
  std::map<std::string, kernels::AttentionKernelConfig> tuned_;  // Autotune winners by family.
  std::map<std::string, bool> warned_;  // Families whose profile entry did not apply.
  cublasHandle_t blas_ = nullptr;       // Created at the first autotune.
};

}  // namespace dflash::tuning
