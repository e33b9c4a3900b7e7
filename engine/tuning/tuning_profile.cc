#include "engine/tuning/tuning_profile.h"

#include <cuda_runtime_api.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace dflash::tuning {
namespace {

// Error helper: "file:line: key: message" (lines 1-based).
class Errors {
 public:
  explicit Errors(absl::string_view source) : source_(source) {}
  absl::Status At(const YAML::Node& node, absl::string_view key, absl::string_view message) const {
    const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ":", line, ": ", key.empty() ? "" : absl::StrCat(key, ": "), message));
  }

 private:
  std::string source_;
};

std::string Shown(const YAML::Node& node) {
  if (node.IsScalar()) return absl::StrCat("'", node.Scalar(), "'");
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  return "nothing";
}

// Checks that `map` is a map with only `known` keys and every `required` one.
absl::Status CheckKeys(const YAML::Node& map, absl::string_view path,
                       const std::set<std::string>& known, const std::set<std::string>& required,
                       const Errors& errors) {
  if (!map.IsMap()) return errors.At(map, path, absl::StrCat("expected a map, got ", Shown(map)));
  std::set<std::string> seen;
  for (const auto& item : map) {
    const std::string key = item.first.Scalar();
    const std::string key_path = path.empty() ? key : absl::StrCat(path, ".", key);
    if (!known.count(key)) {
      std::string expected;
      for (const std::string& k : known)
        absl::StrAppend(&expected, expected.empty() ? "" : ", ", k);
      return errors.At(item.first, key_path, absl::StrCat("unknown key (expected ", expected, ")"));
    }
    seen.insert(key);
  }
  for (const std::string& key : required) {
    if (!seen.count(key)) {
      return errors.At(map, path.empty() ? key : absl::StrCat(path, ".", key), "missing");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Text(const YAML::Node& node, absl::string_view path,
                                 const Errors& errors) {
  if (!node.IsScalar() || node.Scalar().empty()) {
    return errors.At(node, path, absl::StrCat("expected text, got ", Shown(node)));
  }
  return node.Scalar();
}

absl::StatusOr<int> Int(const YAML::Node& node, absl::string_view path, const Errors& errors) {
  int value = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &value)) {
    return errors.At(node, path, absl::StrCat("expected an integer, got ", Shown(node)));
  }
  return value;
}

absl::StatusOr<double> NonNegative(const YAML::Node& node, absl::string_view path,
                                   const Errors& errors) {
  double value = 0.0;
  if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &value) || !(value >= 0.0)) {
    return errors.At(node, path, absl::StrCat("expected a number >= 0, got ", Shown(node)));
  }
  return value;
}

// "9.0" -> 9, 0.
absl::Status Version(const YAML::Node& node, absl::string_view path, const Errors& errors,
                     int* major, int* minor) {
  const std::vector<std::string> parts = absl::StrSplit(node.IsScalar() ? node.Scalar() : "", '.');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], major) ||
      !absl::SimpleAtoi(parts[1], minor) || *major < 0 || *minor < 0) {
    return errors.At(
        node, path,
        absl::StrCat("expected a version major.minor such as \"9.0\", got ", Shown(node)));
  }
  return absl::OkStatus();
}

absl::StatusOr<kernels::AttentionKernelConfig> ParseConfig(const YAML::Node& node,
                                                           absl::string_view path,
                                                           const Errors& errors) {
  DFLASH_RETURN_IF_ERROR(CheckKeys(
      node, path,
      {"windows", "min_blocks_per_sm", "block_m", "block_n", "warps", "key_groups", "mma"},
      {"windows", "min_blocks_per_sm"}, errors));
  kernels::AttentionKernelConfig config;
  const YAML::Node windows = node["windows"];
  if (windows.IsScalar() && windows.Scalar() == "tables") {
    config.windows = kernels::AttentionWindows::kTables;
  } else if (windows.IsScalar() && windows.Scalar() == "computed") {
    config.windows = kernels::AttentionWindows::kComputed;
  } else {
    return errors.At(windows, absl::StrCat(path, ".windows"),
                     absl::StrCat("expected tables or computed, got ", Shown(windows)));
  }
  struct Field {
    const char* key;
    int* value;
  };
  for (const Field& field :
       {Field{"min_blocks_per_sm", &config.min_blocks_per_sm}, Field{"block_m", &config.block_m},
        Field{"block_n", &config.block_n}, Field{"warps", &config.warps}}) {
    const YAML::Node value = node[field.key];
    if (!value) continue;  // Optional ones keep the defaults.
    const std::string field_path = absl::StrCat(path, ".", field.key);
    DFLASH_ASSIGN_OR_RETURN(*field.value, Int(value, field_path, errors));
    if (*field.value < 1) return errors.At(value, field_path, "must be >= 1");
  }
  // Optional: absent (0) chooses at launch; 1 or 2 pins the key groups, 4 the short-sequence
  // kernel.
  if (const YAML::Node value = node["key_groups"]) {
    const std::string field_path = absl::StrCat(path, ".key_groups");
    DFLASH_ASSIGN_OR_RETURN(config.key_groups, Int(value, field_path, errors));
    if (config.key_groups < 0 || config.key_groups == 3 || config.key_groups > 4) {
      return errors.At(value, field_path, "must be 0 (automatic), 1, 2 or 4");
    }
    if (config.key_groups >= 2 && config.windows != kernels::AttentionWindows::kComputed) {
      return errors.At(value, field_path,
                       absl::StrCat(config.key_groups, " needs windows: computed"));
    }
  }
  // Optional: absent is mma.sync; wgmma the warpgroup kernels (H100 / H200).
  if (const YAML::Node value = node["mma"]) {
    const std::string field_path = absl::StrCat(path, ".mma");
    if (value.IsScalar() && value.Scalar() == "sync") {
      config.mma = kernels::AttentionMma::kSync;
    } else if (value.IsScalar() && value.Scalar() == "wgmma") {
      config.mma = kernels::AttentionMma::kWarpgroup;
    } else {
      return errors.At(value, field_path,
                       absl::StrCat("expected sync or wgmma, got ", Shown(value)));
    }
    if (config.mma == kernels::AttentionMma::kWarpgroup && config.key_groups >= 2) {
      return errors.At(
          value, field_path,
          absl::StrCat("wgmma runs one warpgroup per CTA, not key_groups: ", config.key_groups));
    }
  }
  return config;
}

absl::StatusOr<TuningProfile> FromYaml(const YAML::Node& root, const Errors& errors) {
  DFLASH_RETURN_IF_ERROR(CheckKeys(root, "",
                                   {"format", "name", "gpu", "sm", "cuda", "driver", "entries"},
                                   {"format", "name", "gpu", "sm", "cuda"}, errors));
  DFLASH_ASSIGN_OR_RETURN(const int format, Int(root["format"], "format", errors));
  if (format != kProfileFormat) {
    return errors.At(
        root["format"], "format",
        absl::StrCat("unsupported format ", format, " (this build reads ", kProfileFormat, ")"));
  }
  TuningProfile profile;
  DFLASH_ASSIGN_OR_RETURN(profile.name, Text(root["name"], "name", errors));
  DFLASH_ASSIGN_OR_RETURN(profile.gpu, Text(root["gpu"], "gpu", errors));
  DFLASH_RETURN_IF_ERROR(Version(root["sm"], "sm", errors, &profile.sm_major, &profile.sm_minor));
  DFLASH_RETURN_IF_ERROR(
      Version(root["cuda"], "cuda", errors, &profile.cuda_major, &profile.cuda_minor));
  if (root["driver"]) {
    DFLASH_ASSIGN_OR_RETURN(profile.driver, Text(root["driver"], "driver", errors));
  }
  const YAML::Node entries = root["entries"];
  if (!entries || entries.IsNull()) return profile;
  if (!entries.IsSequence()) {
    return errors.At(entries, "entries", absl::StrCat("expected a list, got ", Shown(entries)));
  }
  std::set<std::string> families;
  for (size_t i = 0; i < entries.size(); ++i) {
    const YAML::Node item = entries[i];
    const std::string path = absl::StrCat("entries[", i, "]");
    DFLASH_RETURN_IF_ERROR(CheckKeys(item, path,
                                     {"family", "config", "ms", "heuristic_ms", "rel_l2"},
                                     {"family", "config"}, errors));
    ProfileEntry entry;
    const YAML::Node family = item["family"];
    DFLASH_ASSIGN_OR_RETURN(const std::string key, Text(family, path + ".family", errors));
    absl::StatusOr<AttentionFamily> parsed = ParseFamilyKey(key);
    if (!parsed.ok()) return errors.At(family, path + ".family", parsed.status().message());
    entry.family = *parsed;
    if (!families.insert(FamilyKey(entry.family)).second) {
      return errors.At(family, path + ".family",
                       absl::StrCat("duplicate family ", FamilyKey(entry.family)));
    }
    DFLASH_ASSIGN_OR_RETURN(entry.config, ParseConfig(item["config"], path + ".config", errors));
    for (const auto& [name, field] :
         {std::pair<const char*, std::optional<double>*>{"ms", &entry.ms},
          {"heuristic_ms", &entry.heuristic_ms},
          {"rel_l2", &entry.rel_l2}}) {
      if (!item[name]) continue;
      DFLASH_ASSIGN_OR_RETURN(*field,
                              NonNegative(item[name], absl::StrCat(path, ".", name), errors));
    }
    profile.entries.push_back(entry);
  }
  return profile;
}

std::string Number(double value) { return absl::StrFormat("%.4g", value); }

}  // namespace

std::string ConfigLabel(const kernels::AttentionKernelConfig& config) {
  std::string label =
      absl::StrCat(kernels::AttentionWindowsName(config.windows), "/", config.min_blocks_per_sm);
  if (config.key_groups != 0) absl::StrAppend(&label, "/kg", config.key_groups);
  if (config.mma != kernels::AttentionMma::kSync) {
    absl::StrAppend(&label, "/", kernels::AttentionMmaName(config.mma));
  }
  return label;
}

const ProfileEntry* TuningProfile::Find(const AttentionFamily& family) const {
  for (const ProfileEntry& entry : entries) {
    if (entry.family == family) return &entry;
  }
  return nullptr;
}

void TuningProfile::Put(const ProfileEntry& entry) {
  for (ProfileEntry& existing : entries) {
    if (existing.family == entry.family) {
      existing = entry;
      return;
    }
  }
  entries.push_back(entry);
}

absl::StatusOr<TuningProfile> ParseTuningProfile(absl::string_view text, absl::string_view source) {
  const Errors errors(source);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", error.mark.line + 1, ": ", error.msg));
  }
  try {
    DFLASH_ASSIGN_OR_RETURN(TuningProfile profile, FromYaml(root, errors));
    profile.source = std::string(source);
    return profile;
  } catch (const YAML::Exception& error) {  // Defensive: a conversion the checks missed.
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", error.mark.line + 1, ": ", error.msg));
  }
}

absl::StatusOr<TuningProfile> LoadTuningProfile(const std::filesystem::path& path) {
  DFLASH_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseTuningProfile(text, path.string());
}

absl::StatusOr<std::vector<TuningProfile>> LoadTuningProfiles(
    const std::filesystem::path& directory) {
  std::vector<TuningProfile> profiles;
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) return profiles;
  std::vector<std::filesystem::path> files;
  for (const auto& item : std::filesystem::directory_iterator(directory, error)) {
    if (item.is_regular_file() && item.path().extension() == ".yaml") files.push_back(item.path());
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot list ", directory.string(), ": ", error.message()));
  }
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& file : files) {
    DFLASH_ASSIGN_OR_RETURN(TuningProfile profile, LoadTuningProfile(file));
    profiles.push_back(std::move(profile));
  }
  return profiles;
}

std::string FormatTuningProfile(const TuningProfile& profile, absl::string_view header) {
  std::string text;
  for (absl::string_view line : absl::StrSplit(header, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&text, "# ", line, "\n");
  }
  absl::StrAppend(&text, "format: ", kProfileFormat, "\n");
  absl::StrAppend(&text, "name: ", profile.name, "\n");
  absl::StrAppend(&text, "gpu: ", profile.gpu, "\n");
  absl::StrAppend(&text, "sm: \"", profile.sm_major, ".", profile.sm_minor, "\"\n");
  absl::StrAppend(&text, "cuda: \"", profile.cuda_major, ".", profile.cuda_minor, "\"\n");
  if (!profile.driver.empty()) absl::StrAppend(&text, "driver: \"", profile.driver, "\"\n");
  if (profile.entries.empty()) {
    absl::StrAppend(&text, "entries: []\n");
    return text;
  }
  absl::StrAppend(&text, "entries:\n");
  for (const ProfileEntry& entry : profile.entries) {
    const kernels::AttentionKernelConfig& c = entry.config;
    absl::StrAppend(&text, "  - family: ", FamilyKey(entry.family), "\n");
    absl::StrAppend(&text, "    config: {windows: ", kernels::AttentionWindowsName(c.windows),
                    ", min_blocks_per_sm: ", c.min_blocks_per_sm, ", block_m: ", c.block_m,
                    ", block_n: ", c.block_n, ", warps: ", c.warps,
                    c.key_groups != 0 ? absl::StrCat(", key_groups: ", c.key_groups) : "",
                    c.mma != kernels::AttentionMma::kSync
                        ? absl::StrCat(", mma: ", kernels::AttentionMmaName(c.mma))
                        : "",
                    "}\n");
    if (entry.ms) absl::StrAppend(&text, "    ms: ", Number(*entry.ms), "\n");
    if (entry.heuristic_ms) {
      absl::StrAppend(&text, "    heuristic_ms: ", Number(*entry.heuristic_ms), "\n");
    }
    if (entry.rel_l2) absl::StrAppend(&text, "    rel_l2: ", Number(*entry.rel_l2), "\n");
  }
  return text;
}

absl::Status SaveTuningProfile(const TuningProfile& profile, absl::string_view header,
                               const std::filesystem::path& path) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << FormatTuningProfile(profile, header);
    out.close();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temporary.string()));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", temporary.string(), " to ",
                                               path.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceDescription> DescribeCudaDevice(int device) {
  cudaDeviceProp properties{};
  if (const cudaError_t error = cudaGetDeviceProperties(&properties, device);
      error != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA device ", device, ": ", cudaGetErrorString(error)));
  }
  DeviceDescription description;
  description.name = properties.name;
  description.sm_major = properties.major;
  description.sm_minor = properties.minor;
  description.sm_count = properties.multiProcessorCount;
  int runtime = 0;
  int driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  description.cuda_major = runtime / 1000;
  description.cuda_minor = runtime % 1000 / 10;
  description.driver_major = driver / 1000;
  description.driver_minor = driver % 1000 / 10;
  return description;
}

std::string DeviceSummary(const DeviceDescription& device) {
  return absl::StrCat(device.name, " sm_", device.sm_major, device.sm_minor, " CUDA ",
                      device.cuda_major, ".", device.cuda_minor);
}

std::string DefaultProfileName(const DeviceDescription& device) {
  std::string gpu = absl::AsciiStrToLower(device.name);
  for (absl::string_view vendor : {"nvidia ", "tesla "}) {
    if (absl::StartsWith(gpu, vendor)) gpu = gpu.substr(vendor.size());
  }
  std::string name;
  for (char c : gpu) {
    const bool keep = absl::ascii_isalnum(static_cast<unsigned char>(c));
    if (keep) {
      name.push_back(c);
    } else if (!name.empty() && name.back() != '-') {
      name.push_back('-');
    }
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return absl::StrCat(name.empty() ? "gpu" : name, "-sm", device.sm_major, device.sm_minor, "-cuda",
                      device.cuda_major, ".", device.cuda_minor);
}

TuningProfile EmptyProfileFor(const DeviceDescription& device) {
  TuningProfile profile;
  profile.name = DefaultProfileName(device);
  profile.gpu = device.name;
  profile.sm_major = device.sm_major;
  profile.sm_minor = device.sm_minor;
  profile.cuda_major = device.cuda_major;
  profile.cuda_minor = device.cuda_minor;
  profile.driver = absl::StrCat(device.driver_major, ".", device.driver_minor);
  return profile;
}

const TuningProfile* MatchTuningProfile(const std::vector<TuningProfile>& profiles,
                                        const DeviceDescription& device, std::string* why) {
  const TuningProfile* exact = nullptr;
  const TuningProfile* below = nullptr;  // Same major, newest minor <= the device's.
  const TuningProfile* above = nullptr;  // Same major, oldest minor > the device's.
  for (const TuningProfile& profile : profiles) {
    if (profile.gpu != device.name || profile.sm_major != device.sm_major ||
        profile.sm_minor != device.sm_minor || profile.cuda_major != device.cuda_major) {
      continue;
    }
    if (profile.cuda_minor == device.cuda_minor) {
      if (exact == nullptr) exact = &profile;
    } else if (profile.cuda_minor < device.cuda_minor) {
      if (below == nullptr || profile.cuda_minor > below->cuda_minor) below = &profile;
    } else if (above == nullptr || profile.cuda_minor < above->cuda_minor) {
      above = &profile;
    }
  }
  const TuningProfile* chosen = exact != nullptr ? exact : below != nullptr ? below : above;
  if (why != nullptr) {
    if (chosen == nullptr) {
      *why = absl::StrCat("no profile for ", DeviceSummary(device), " among ", profiles.size());
    } else if (chosen == exact) {
      *why = absl::StrCat(chosen->name, " (", chosen->source, ") matches ", DeviceSummary(device));
    } else {
      *why = absl::StrCat(chosen->name, " (", chosen->source, ", CUDA ", chosen->cuda_major, ".",
                          chosen->cuda_minor, ") is the nearest for ", DeviceSummary(device));
    }
  }
  return chosen;
}

}  // namespace dflash::tuning
