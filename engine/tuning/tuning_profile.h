// Tuning profiles: which attention kernel variant runs each workload family on one GPU model
// built with one CUDA toolkit. One YAML file per (GPU, toolkit) in config/profiles/, written by
// dflash-tune and chosen at start by the running device (MatchTuningProfile).
//
// File format (every key required unless marked optional; unknown keys are errors):
//   format: 1
//   name: h200-sm90-cuda13.0          # free text, shown by the engine (Describe)
//   gpu: NVIDIA H200                  # cudaDeviceProp::name, matched exactly
//   sm: "9.0"                         # compute capability major.minor
//   cuda: "13.0"                      # CUDA runtime the kernels were built with, major.minor
//   driver: "13.0"                    # optional, informational
//   entries:                          # optional (empty profile), one per family, no duplicates
//     - family: bf16/d64/packed/c2p+p2c/L1024        # attention_family.h
//       config: {windows: computed, min_blocks_per_sm: 3, block_m: 64, block_n: 64, warps: 4}
//                # block_m, block_n, warps optional (defaults 64, 64, 4); key_groups optional:
//                # 0 or absent chooses at launch (AttentionKernelConfig), 1 or 2 pins it,
//                # 4 pins the short-sequence kernel (sequences <= 128); mma optional: sync
//                # (absent) or wgmma, the warpgroup kernels (H100 / H200, d = 64: tables / 2
//                # or computed / 3; no pinned key groups)
//       ms: 0.688            # optional: measured time of the winner on the tuning shape
//       heuristic_ms: 0.688  # optional: the built-in heuristic's time on it
//       rel_l2: 0.0029       # optional: the winner's error against the strict fp32 path
// Errors name the file, the line and the key: "h200.yaml:12: entries[3].config.windows: ...".
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tuning/attention_family.h"
#include "kernels/attention/attention_kernel_config.h"

namespace dflash::tuning {

inline constexpr int kProfileFormat = 1;

struct ProfileEntry {
  AttentionFamily family;
  kernels::AttentionKernelConfig config;
  std::optional<double> ms;
  std::optional<double> heuristic_ms;
  std::optional<double> rel_l2;
};

struct TuningProfile {
  std::string name;
  std::string gpu;
  int sm_major = 0;
  int sm_minor = 0;
  int cuda_major = 0;
  int cuda_minor = 0;
  std::string driver;
  std::vector<ProfileEntry> entries;
  std::string source;  // The file it was read from ("" when built in memory).

  const ProfileEntry* Find(const AttentionFamily& family) const;
  // Replaces the entry of the same family or appends.
  void Put(const ProfileEntry& entry);
};

// "computed/3": the window mode and register cap, as logs and dflash-tune show a variant.
std::string ConfigLabel(const kernels::AttentionKernelConfig& config);

// `source` names the text in errors (a file name).
absl::StatusOr<TuningProfile> ParseTuningProfile(absl::string_view text, absl::string_view source);
absl::StatusOr<TuningProfile> LoadTuningProfile(const std::filesystem::path& path);
// Every *.yaml file of `directory`, in file-name order; any invalid file is an error (a broken
// profile should not be skipped silently). A missing directory holds no profiles.
absl::StatusOr<std::vector<TuningProfile>> LoadTuningProfiles(
    const std::filesystem::path& directory);

// The YAML text of a profile, `header` (lines without '#') first as comments.
std::string FormatTuningProfile(const TuningProfile& profile, absl::string_view header);
// Writes FormatTuningProfile atomically (a temporary file renamed over `path`).
absl::Status SaveTuningProfile(const TuningProfile& profile, absl::string_view header,
                               const std::filesystem::path& path);

// The running GPU as profile selection sees it (DescribeCudaDevice, or made up in tests).
struct DeviceDescription {
  std::string name;  // cudaDeviceProp::name, e.g. "NVIDIA H200".
  int sm_major = 0;
  int sm_minor = 0;
  int sm_count = 0;
  int cuda_major = 0;  // cudaRuntimeGetVersion: the toolkit the kernels were compiled with.
  int cuda_minor = 0;
  int driver_major = 0;  // cudaDriverGetVersion.
  int driver_minor = 0;
};

absl::StatusOr<DeviceDescription> DescribeCudaDevice(int device);
// "NVIDIA H200 sm_90 CUDA 13.0".
std::string DeviceSummary(const DeviceDescription& device);
// "h200-sm90-cuda13.0": the lower-cased GPU name without the vendor, SM and toolkit.
std::string DefaultProfileName(const DeviceDescription& device);
// A profile describing `device` with no entries (dflash-tune starts from it).
TuningProfile EmptyProfileFor(const DeviceDescription& device);

// Selection rules, in order:
//   1. the same GPU name, SM and CUDA major.minor;
//   2. else the same GPU name and SM, CUDA with the same major version (the newest minor at or
//      below the device's, else the oldest above): the variants are the same source compiled by
//      a neighbouring toolkit, so the winners rarely move, and every variant is valid anywhere;
//   3. else none: the heuristic runs. A profile of another GPU with the same SM (H100 vs H200)
//      is not used, since SM count, clocks and bandwidth move the crossovers.
// Ties (two files for the same device) go to the earlier file name. `why` gets a sentence.
const TuningProfile* MatchTuningProfile(const std::vector<TuningProfile>& profiles,
                                        const DeviceDescription& device, std::string* why);

}  // namespace dflash::tuning
