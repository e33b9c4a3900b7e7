// engine/tuning: family keys, the profile format and its errors, profile selection by device,
// and the tuner's modes against a made-up device (no GPU needed); the autotune case runs on a GPU
// and skips visibly without one.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/model_config.h"
#include "engine/model/relative_position.h"
#include "engine/tuning/attention_family.h"
#include "engine/tuning/attention_tuner.h"
#include "engine/tuning/profiles_directory.h"
#include "engine/tuning/tuning_profile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/cuda_test_support.h"

namespace dflash::tuning {
namespace {

using kernels::AttentionKernelConfig;
using kernels::AttentionWindows;
using kernels::DataType;
using testing::HasSubstr;
using testing::Not;

ModelConfig V3Positions() {
  ModelConfig config;
  config.relative_attention = true;
  config.position_buckets = 256;
  config.max_relative_positions = -1;
  config.max_position_embeddings = 512;
  return config;
}

// A host-only problem description: what Select reads (no device pointer is dereferenced).
kernels::AttentionProblem Problem(const RelativePositionIndex& index, int max_seqlen,
                                  DataType dtype = DataType::kBFloat16) {
  alignas(16) static int dummy = 0;  // Stand-in for device tensors: 16-byte aligned as they are.
  kernels::AttentionProblem problem;
  problem.dtype = dtype;
  problem.num_heads = 12;
  problem.head_dim = 64;
  problem.num_sequences = 1;
  problem.max_seqlen = max_seqlen;
  problem.total_tokens = max_seqlen;
  problem.pos_key = &dummy;
  problem.pos_query = &dummy;
  problem.positions = {index.table().data(), index.table().data(), index.band(), index.span()};
  return problem;
}

DeviceDescription H200() {
  DeviceDescription device;
  device.name = "NVIDIA H200";
  device.sm_major = 9;
  device.sm_minor = 0;
  device.sm_count = 132;
  device.cuda_major = 13;
  device.cuda_minor = 0;
  return device;
}

constexpr char kProfile[] = R"(# a comment
format: 1
name: h200-test
gpu: NVIDIA H200
sm: "9.0"
cuda: "13.0"
driver: "13.0"
entries:
  - family: bf16/d64/packed/c2p+p2c/L2048
    config: {windows: computed, min_blocks_per_sm: 3, block_m: 64, block_n: 64, warps: 4}
    ms: 1.0
    heuristic_ms: 1.2
    rel_l2: 0.003
  - family: bf16/d64/packed/c2p+p2c/L512
    config: {windows: tables, min_blocks_per_sm: 2}
  - family: fp16/d64/padded/c2p+p2c/L8192
    config: {windows: computed, min_blocks_per_sm: 2}
)";

// A temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("dflash_tuning_test_" + std::to_string(::getpid()) + "_" +
             testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::filesystem::path Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return path_ / name;
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(AttentionFamilyTest, KeysRoundTripAndBucketByLongestSequence) {
  const RelativePositionIndex index(V3Positions());
  kernels::AttentionProblem problem = Problem(index, 700);
  EXPECT_EQ(FamilyKey(FamilyOf(problem)), "bf16/d64/packed/c2p+p2c/L1024");
  problem.max_seqlen = 1024;
  EXPECT_EQ(FamilyOf(problem).length_bucket, 1024);
  problem.max_seqlen = 1;
  EXPECT_EQ(FamilyOf(problem).length_bucket, 64);
  problem.pos_query = nullptr;
  uint8_t mask = 1;
  problem.key_padding_mask = &mask;
  problem.padded_length = 4097;
  problem.dtype = DataType::kFloat16;
  EXPECT_EQ(FamilyKey(FamilyOf(problem)), "fp16/d64/padded/c2p/L8192");
  for (const char* key : {"bf16/d64/packed/c2p+p2c/L1024", "fp16/d128/padded/none/L64",
                          "fp32/d32/packed/p2c/L32768"}) {
    absl::StatusOr<AttentionFamily> family = ParseFamilyKey(key);
    ASSERT_TRUE(family.ok()) << family.status();
    EXPECT_EQ(FamilyKey(*family), key);
  }
  for (const char* key :
       {"bf16/d64/packed/c2p+p2c", "int8/d64/packed/none/L64", "bf16/64/packed/none/L64",
        "bf16/d64/dense/none/L64", "bf16/d64/packed/both/L64", "bf16/d64/packed/none/L100",
        "bf16/d64/packed/none/L32"}) {
    EXPECT_FALSE(ParseFamilyKey(key).ok()) << key;
  }
}

TEST(ProfilesDirectoryTest, EnvironmentWinsElseTheProfilesBesideTheBinaries) {
  ASSERT_EQ(setenv("DFLASH_PROFILES_DIR", "/opt/profiles", 1), 0);
  EXPECT_EQ(DefaultProfilesDirectory(), std::filesystem::path("/opt/profiles"));
  ASSERT_EQ(unsetenv("DFLASH_PROFILES_DIR"), 0);
  // The test binary lives in <build>/bin; the committed profiles are found from there whatever
  // the working directory is.
  const std::filesystem::path found = DefaultProfilesDirectory();
  EXPECT_TRUE(std::filesystem::is_directory(found)) << found;
  EXPECT_TRUE(std::filesystem::equivalent(
      found, std::filesystem::path(DFLASH_SOURCE_DIR) / "config/profiles"))
      << found;
  EXPECT_EQ(AttentionTunerOptions{}.profiles_dir, found) << "the tuner's default follows the rule";
}

TEST(TuningProfileTest, ParsesAndRoundTrips) {
  absl::StatusOr<TuningProfile> profile = ParseTuningProfile(kProfile, "h200.yaml");
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->name, "h200-test");
  EXPECT_EQ(profile->gpu, "NVIDIA H200");
  EXPECT_EQ(profile->sm_major, 9);
  EXPECT_EQ(profile->cuda_major, 13);
  ASSERT_EQ(profile->entries.size(), 3u);
  EXPECT_EQ(profile->entries[2].config.windows, AttentionWindows::kComputed);
  EXPECT_EQ(profile->entries[2].config.min_blocks_per_sm, 2);
  EXPECT_EQ(profile->entries[0].config.windows, AttentionWindows::kComputed);
  EXPECT_EQ(profile->entries[0].config.min_blocks_per_sm, 3);
  EXPECT_DOUBLE_EQ(*profile->entries[0].heuristic_ms, 1.2);
  EXPECT_FALSE(profile->entries[1].ms.has_value());
  const std::string text = FormatTuningProfile(*profile, "made by a test\nsecond line");
  EXPECT_THAT(text, HasSubstr("# made by a test\n# second line\n"));
  absl::StatusOr<TuningProfile> again = ParseTuningProfile(text, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  ASSERT_EQ(again->entries.size(), 3u);
  EXPECT_EQ(again->entries[2].config, profile->entries[2].config);
  EXPECT_EQ(again->entries[0].family, profile->entries[0].family);
  EXPECT_EQ(again->entries[0].config, profile->entries[0].config);
  EXPECT_EQ(again->entries[1].config, profile->entries[1].config);
  EXPECT_DOUBLE_EQ(*again->entries[0].rel_l2, 0.003);
}

TEST(TuningProfileTest, ErrorsNameFileLineAndKey) {
  struct Bad {
    std::string from;
    std::string to;
    std::string error;
  };
  const std::vector<Bad> cases = {
      {"windows: computed, min", "windows: window, min",
       "p.yaml:10: entries[0].config.windows: expected tables or computed, got 'window'"},
      {"name: h200-test\n", "name: h200-test\ncolour: red\n", "p.yaml:4: colour: unknown key"},
      {"gpu: NVIDIA H200\n", "", "p.yaml:2: gpu: missing"},
      {"sm: \"9.0\"", "sm: nine", "p.yaml:5: sm: expected a version major.minor"},
      {"format: 1", "format: 2", "p.yaml:2: format: unsupported format 2"},
      {"L512", "L2048", "p.yaml:14: entries[1].family: duplicate family"},
      {"L512", "L500", "p.yaml:14: entries[1].family: bad family"},
      {"{windows: tables, min_blocks_per_sm: 2}", "{windows: tables}",
       "p.yaml:15: entries[1].config.min_blocks_per_sm: missing"},
      {"ms: 1.0", "ms: fast", "p.yaml:11: entries[0].ms: expected a number >= 0, got 'fast'"},
      {"    ms: 1.0", "    seconds: 1.0", "p.yaml:11: entries[0].seconds: unknown key"},
      {"min_blocks_per_sm: 3", "min_blocks_per_sm: 0",
       "p.yaml:10: entries[0].config.min_blocks_per_sm: must be >= 1"},
      {"{windows: tables, min_blocks_per_sm: 2}",
       "{windows: tables, min_blocks_per_sm: 2, key_groups: 3}",
       "p.yaml:15: entries[1].config.key_groups: must be 0 (automatic), 1, 2 or 4"},
      {"{windows: tables, min_blocks_per_sm: 2}",
       "{windows: tables, min_blocks_per_sm: 2, key_groups: 2}",
       "p.yaml:15: entries[1].config.key_groups: 2 needs windows: computed"},
      {"{windows: tables, min_blocks_per_sm: 2}",
       "{windows: tables, min_blocks_per_sm: 2, key_groups: 4}",
       "p.yaml:15: entries[1].config.key_groups: 4 needs windows: computed"},
      {"{windows: tables, min_blocks_per_sm: 2}",
       "{windows: computed, min_blocks_per_sm: 2, key_groups: 5}",
       "p.yaml:15: entries[1].config.key_groups: must be 0 (automatic), 1, 2 or 4"},
      {"{windows: tables, min_blocks_per_sm: 2}",
       "{windows: tables, min_blocks_per_sm: 2, mma: tensor}",
       "p.yaml:15: entries[1].config.mma: expected sync or wgmma, got 'tensor'"},
      {"{windows: tables, min_blocks_per_sm: 2}",
       "{windows: computed, min_blocks_per_sm: 3, key_groups: 2, mma: wgmma}",
       "p.yaml:15: entries[1].config.mma: wgmma runs one warpgroup per CTA, not key_groups: 2"},
      {"name: h200-test", "name: [h200", "p.yaml:"},
  };
  for (const Bad& bad : cases) {
    std::string text = kProfile;
    const size_t at = text.find(bad.from);
    ASSERT_NE(at, std::string::npos) << bad.from;
    text.replace(at, bad.from.size(), bad.to);
    absl::StatusOr<TuningProfile> profile = ParseTuningProfile(text, "p.yaml");
    ASSERT_FALSE(profile.ok()) << bad.to;
    EXPECT_EQ(profile.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(profile.status().message()), HasSubstr(bad.error)) << bad.to;
  }
  std::string text = kProfile;
  text = text.substr(0, text.find("entries:")) + "entries: {a: 1}\n";
  EXPECT_THAT(std::string(ParseTuningProfile(text, "p.yaml").status().message()),
              HasSubstr("p.yaml:8: entries: expected a list, got a map"));
}

TEST(TuningProfileTest, DirectoryLoadsInNameOrderAndRefusesBrokenFiles) {
  TempDir dir;
  EXPECT_TRUE(LoadTuningProfiles(dir.path() / "missing")->empty());
  std::string other = kProfile;
  other.replace(other.find("h200-test"), 9, "h200-other");
  dir.Write("b.yaml", kProfile);
  dir.Write("a.yaml", other);
  dir.Write("notes.txt", "not a profile");
  absl::StatusOr<std::vector<TuningProfile>> profiles = LoadTuningProfiles(dir.path());
  ASSERT_TRUE(profiles.ok()) << profiles.status();
  ASSERT_EQ(profiles->size(), 2u);
  EXPECT_EQ((*profiles)[0].name, "h200-other");
  EXPECT_THAT((*profiles)[1].source, HasSubstr("b.yaml"));
  dir.Write("c.yaml", "format: 1\n");
  profiles = LoadTuningProfiles(dir.path());
  ASSERT_FALSE(profiles.ok());
  EXPECT_THAT(std::string(profiles.status().message()), HasSubstr("c.yaml:1: cuda: missing"));
}

TEST(TuningProfileTest, SaveWritesWhatLoadReads) {
  TempDir dir;
  TuningProfile profile = EmptyProfileFor(H200());
  EXPECT_EQ(profile.name, "h200-sm90-cuda13.0");
  ProfileEntry entry;
  entry.family = *ParseFamilyKey("fp16/d64/padded/c2p+p2c/L256");
  entry.config.windows = AttentionWindows::kComputed;
  entry.config.min_blocks_per_sm = 2;
  entry.config.key_groups = 2;  // Optional: written only when pinned.
  entry.ms = 0.25;
  profile.Put(entry);
  entry.ms = 0.2;
  profile.Put(entry);  // Replaces.
  ASSERT_TRUE(SaveTuningProfile(profile, "header", dir.path() / "p.yaml").ok());
  absl::StatusOr<TuningProfile> loaded = LoadTuningProfile(dir.path() / "p.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->entries.size(), 1u);
  EXPECT_DOUBLE_EQ(*loaded->entries[0].ms, 0.2);
  EXPECT_EQ(loaded->entries[0].config, entry.config);
  EXPECT_EQ(loaded->entries[0].config.key_groups, 2);
  EXPECT_EQ(loaded->Find(entry.family), &loaded->entries[0]);
  EXPECT_THAT(FormatTuningProfile(*loaded, "header"), HasSubstr("key_groups: 2"));
  // Automatic (0), the default, is not written.
  loaded->entries[0].config.key_groups = 0;
  EXPECT_THAT(FormatTuningProfile(*loaded, "header"), Not(HasSubstr("key_groups")));
  // The short-sequence kernel (key_groups 4) reads back as written.
  loaded->entries[0].config.key_groups = 4;
  ASSERT_TRUE(SaveTuningProfile(*loaded, "header", dir.path() / "p.yaml").ok());
  absl::StatusOr<TuningProfile> short_kernel = LoadTuningProfile(dir.path() / "p.yaml");
  ASSERT_TRUE(short_kernel.ok()) << short_kernel.status();
  EXPECT_EQ(short_kernel->entries[0].config.key_groups, 4);
  // The warpgroup table kernel: written as mma: wgmma, read back; sync (the default) not written.
  loaded->entries[0].config = kernels::AttentionKernelConfig{};
  EXPECT_THAT(FormatTuningProfile(*loaded, "header"), Not(HasSubstr("mma")));
  loaded->entries[0].config.mma = kernels::AttentionMma::kWarpgroup;
  EXPECT_THAT(FormatTuningProfile(*loaded, "header"), HasSubstr("mma: wgmma"));
  EXPECT_EQ(ConfigLabel(loaded->entries[0].config), "tables/2/wgmma");
  ASSERT_TRUE(SaveTuningProfile(*loaded, "header", dir.path() / "p.yaml").ok());
  absl::StatusOr<TuningProfile> warpgroup = LoadTuningProfile(dir.path() / "p.yaml");
  ASSERT_TRUE(warpgroup.ok()) << warpgroup.status();
  EXPECT_EQ(warpgroup->entries[0].config.mma, kernels::AttentionMma::kWarpgroup);
  // The warpgroup computed-window kernel likewise.
  loaded->entries[0].config.windows = kernels::AttentionWindows::kComputed;
  loaded->entries[0].config.min_blocks_per_sm = 3;
  EXPECT_EQ(ConfigLabel(loaded->entries[0].config), "computed/3/wgmma");
  ASSERT_TRUE(SaveTuningProfile(*loaded, "header", dir.path() / "p.yaml").ok());
  absl::StatusOr<TuningProfile> warpgroup_computed = LoadTuningProfile(dir.path() / "p.yaml");
  ASSERT_TRUE(warpgroup_computed.ok()) << warpgroup_computed.status();
  EXPECT_EQ(warpgroup_computed->entries[0].config, loaded->entries[0].config);
}

TEST(ProfileMatchTest, ExactThenSameMajorToolkitElseNone) {
  auto make = [](const std::string& gpu, int sm, int cuda_major, int cuda_minor,
                 const std::string& name) {
    TuningProfile profile;
    profile.name = name;
    profile.gpu = gpu;
    profile.sm_major = sm / 10;
    profile.sm_minor = sm % 10;
    profile.cuda_major = cuda_major;
    profile.cuda_minor = cuda_minor;
    return profile;
  };
  const DeviceDescription device = H200();  // CUDA 13.0.
  std::string why;
  std::vector<TuningProfile> profiles = {
      make("NVIDIA H100 80GB HBM3", 90, 13, 0, "h100"), make("NVIDIA H200", 90, 12, 8, "cuda12"),
      make("NVIDIA H200", 90, 13, 2, "cuda13.2"), make("NVIDIA H200", 90, 13, 1, "cuda13.1")};
  // No exact one and none below 13.0: the oldest minor above.
  ASSERT_NE(MatchTuningProfile(profiles, device, &why), nullptr);
  EXPECT_EQ(MatchTuningProfile(profiles, device, &why)->name, "cuda13.1");
  EXPECT_THAT(why, HasSubstr("nearest"));
  profiles.push_back(make("NVIDIA H200", 90, 13, 0, "exact"));
  profiles.push_back(make("NVIDIA H200", 90, 13, 0, "exact-later-file"));
  EXPECT_EQ(MatchTuningProfile(profiles, device, &why)->name, "exact");
  EXPECT_THAT(why, HasSubstr("matches NVIDIA H200 sm_90 CUDA 13.0"));
  DeviceDescription newer = device;
  newer.cuda_minor = 3;  // Newest minor at or below 13.3.
  EXPECT_EQ(MatchTuningProfile(profiles, newer, &why)->name, "cuda13.2");
  // Same SM, other GPU; other SM; other major toolkit: none.
  DeviceDescription h100 = device;
  h100.name = "NVIDIA H100 PCIe";
  EXPECT_EQ(MatchTuningProfile(profiles, h100, &why), nullptr);
  EXPECT_THAT(why, HasSubstr("no profile for NVIDIA H100 PCIe sm_90 CUDA 13.0"));
  DeviceDescription cuda12 = device;
  cuda12.cuda_major = 12;
  cuda12.cuda_minor = 4;
  EXPECT_EQ(MatchTuningProfile(profiles, cuda12, &why)->name, "cuda12");  // 12.8 above 12.4.
  cuda12.cuda_major = 11;
  EXPECT_EQ(MatchTuningProfile(profiles, cuda12, &why), nullptr);
  DeviceDescription ada = device;
  ada.sm_minor = 9;
  EXPECT_EQ(MatchTuningProfile(profiles, ada, &why), nullptr);
}

class TunerTest : public testing::Test {
 protected:
  TunerTest() : index_(V3Positions()) { dir_.Write("h200.yaml", kProfile); }

  absl::StatusOr<std::unique_ptr<AttentionTuner>> Make(TuningMode mode, const std::string& profile,
                                                       const DeviceDescription& device = H200()) {
    AttentionTunerOptions options;
    options.mode = mode;
    options.profile = profile;
    options.profiles_dir = dir_.path();
    return AttentionTuner::CreateForDevice(options, device);
  }

  absl::StatusOr<AttentionKernelConfig> Select(AttentionTuner& tuner, int max_seqlen,
                                               DataType dtype = DataType::kBFloat16) {
    return tuner.Select(Problem(index_, max_seqlen, dtype), nullptr, nullptr, 0);
  }

  TempDir dir_;
  RelativePositionIndex index_;
};

// kProfile's entries: computed windows (mma.sync, 3 CTAs per SM) at L2048, tables at L512.
AttentionKernelConfig ProfileEntryL2048() {
  AttentionKernelConfig config;
  config.windows = AttentionWindows::kComputed;
  config.min_blocks_per_sm = 3;
  return config;
}
AttentionKernelConfig ProfileEntryL512() { return AttentionKernelConfig{}; }

TEST_F(TunerTest, HeuristicModeIgnoresProfiles) {
  auto tuner = Make(TuningMode::kHeuristic, "auto");
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  // The built-in choice (this machine's: the warpgroup kernels where they run), which differs
  // from both entries: tables at 2048 and computed windows at 300 without the warpgroup kernels,
  // their computed-window kernel at both with them.
  EXPECT_EQ(*Select(**tuner, 2048), kernels::HeuristicAttentionConfig(Problem(index_, 2048)));
  EXPECT_NE(*Select(**tuner, 2048), ProfileEntryL2048());
  EXPECT_EQ(*Select(**tuner, 300), kernels::HeuristicAttentionConfig(Problem(index_, 300)));
  EXPECT_NE(*Select(**tuner, 300), ProfileEntryL512());
  EXPECT_EQ((*tuner)->Describe(), "heuristic");
  EXPECT_EQ((*tuner)->profile(), nullptr);
}

TEST_F(TunerTest, ProfileModeUsesEntriesAndFallsBackToTheHeuristic) {
  auto tuner = Make(TuningMode::kProfile, "auto");
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  EXPECT_EQ((*tuner)->Describe(), "h200-test (profile)");
  EXPECT_EQ(*Select(**tuner, 2048), ProfileEntryL2048());  // Entry L2048.
  EXPECT_EQ(*Select(**tuner, 1025), ProfileEntryL2048());  // Same bucket.
  EXPECT_EQ(*Select(**tuner, 300), ProfileEntryL512());    // Entry L512.
  for (int length : {4096, 100}) {                         // Misses: the heuristic.
    EXPECT_EQ(*Select(**tuner, length), kernels::HeuristicAttentionConfig(Problem(index_, length)))
        << length;
  }
  // fp16 has no entries: the heuristic.
  EXPECT_EQ(*Select(**tuner, 2048, DataType::kFloat16),
            kernels::HeuristicAttentionConfig(Problem(index_, 2048, DataType::kFloat16)));

  // Another GPU: no profile, the heuristic, and Describe says why.
  DeviceDescription other = H200();
  other.name = "NVIDIA GeForce RTX 4090";
  other.sm_major = 8;
  other.sm_minor = 9;
  tuner = Make(TuningMode::kProfile, "auto", other);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  EXPECT_THAT((*tuner)->Describe(),
              HasSubstr("heuristic (no profile for NVIDIA GeForce RTX 4090 sm_89 CUDA 13.0"));
  EXPECT_EQ(*Select(**tuner, 2048), kernels::HeuristicAttentionConfig(Problem(index_, 2048)));
  tuner = Make(TuningMode::kProfile, "none");
  ASSERT_TRUE(tuner.ok());
  EXPECT_EQ((*tuner)->Describe(), "heuristic (profile: none)");
}

TEST_F(TunerTest, ProfileOnlyFailsOnAMissNamingTheFamily) {
  auto tuner = Make(TuningMode::kProfileOnly, "auto");
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  EXPECT_EQ(Select(**tuner, 2048)->windows, AttentionWindows::kComputed);
  absl::StatusOr<AttentionKernelConfig> miss = Select(**tuner, 4096);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(miss.status().message()), HasSubstr("bf16/d64/packed/c2p+p2c/L4096"));
  // The strict float32 path has one variant: never a miss.
  EXPECT_TRUE(Select(**tuner, 4096, DataType::kFloat32).ok());
  // No profile for the device: refused at start.
  DeviceDescription other = H200();
  other.name = "NVIDIA A100-SXM4-80GB";
  other.sm_major = 8;
  absl::StatusOr<std::unique_ptr<AttentionTuner>> none =
      Make(TuningMode::kProfileOnly, "auto", other);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(Make(TuningMode::kProfileOnly, "none").ok());
}

TEST_F(TunerTest, ExplicitProfilePathMustMatchTheSm) {
  std::string text = kProfile;
  text.replace(text.find("gpu: NVIDIA H200"), 16, "gpu: NVIDIA H100 80GB HBM3");
  const std::filesystem::path h100 = dir_.Write("h100.txt", text);
  // Another GPU of the same SM, given explicitly: used (with a warning).
  auto tuner = Make(TuningMode::kProfile, h100.string());
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  EXPECT_EQ((*tuner)->Describe(), "h200-test (profile)");
  EXPECT_EQ(Select(**tuner, 2048)->windows, AttentionWindows::kComputed);
  DeviceDescription ampere = H200();
  ampere.sm_major = 8;
  tuner = Make(TuningMode::kProfile, h100.string(), ampere);
  ASSERT_FALSE(tuner.ok());
  EXPECT_THAT(std::string(tuner.status().message()), HasSubstr("is for sm_90"));
  // A broken explicit file is an error, with its line.
  const std::filesystem::path broken = dir_.Write("broken.txt", "format: 1\nname: [x\n");
  tuner = Make(TuningMode::kProfile, broken.string());
  ASSERT_FALSE(tuner.ok());
  EXPECT_THAT(std::string(tuner.status().message()), HasSubstr("broken.txt:"));
  EXPECT_FALSE(Make(TuningMode::kProfile, (dir_.path() / "absent.yaml").string()).ok());
}

TEST_F(TunerTest, EntryThatDoesNotApplyFallsBackOrFails) {
  // d = 128 has no computed-window variant.
  std::string text = kProfile;
  text.replace(text.find("bf16/d64/packed/c2p+p2c/L2048"), 29, "bf16/d128/packed/c2p+p2c/L2048");
  TempDir dir;
  dir.Write("p.yaml", text);
  for (TuningMode mode : {TuningMode::kProfile, TuningMode::kProfileOnly}) {
    AttentionTunerOptions options;
    options.mode = mode;
    options.profiles_dir = dir.path();
    auto tuner = AttentionTuner::CreateForDevice(options, H200());
    ASSERT_TRUE(tuner.ok()) << tuner.status();
    kernels::AttentionProblem problem = Problem(index_, 2048);
    problem.head_dim = 128;
    problem.num_heads = 6;
    absl::StatusOr<AttentionKernelConfig> config = (*tuner)->Select(problem, nullptr, nullptr, 0);
    if (mode == TuningMode::kProfile) {
      ASSERT_TRUE(config.ok()) << config.status();
      EXPECT_EQ(config->windows, AttentionWindows::kTables);
    } else {
      ASSERT_FALSE(config.ok());
      EXPECT_THAT(std::string(config.status().message()), HasSubstr("cannot run"));
    }
  }
}

TEST_F(TunerTest, BrokenProfileInTheDirectoryIsAnError) {
  dir_.Write("zz.yaml", "format: 1\nname: x\ngpu: y\nsm: \"9.0\"\ncuda: 13\n");
  absl::StatusOr<std::unique_ptr<AttentionTuner>> tuner = Make(TuningMode::kProfile, "auto");
  ASSERT_FALSE(tuner.ok());
  EXPECT_THAT(std::string(tuner.status().message()), HasSubstr("zz.yaml:5: cuda:"));
}

// A padded problem needs a copy of V in the workspace whatever the variant: autotuning it without
// one is refused before any candidate runs (no device needed), not answered with a variant that
// would be refused at launch.
TEST(AutotuneTest, PaddedProblemWithoutWorkspaceIsRefused) {
  const RelativePositionIndex index(V3Positions());
  kernels::AttentionProblem problem = Problem(index, 512);
  alignas(16) static uint8_t mask = 1;
  problem.key_padding_mask = &mask;
  problem.padded_length = 512;
  AttentionTunerOptions options;
  options.mode = TuningMode::kAutotune;
  auto tuner = AttentionTuner::CreateForDevice(options, H200());
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  // The V copy alone: 512 rows x 12 heads x 64 x 2 bytes.
  ASSERT_GT(kernels::AttentionMaxWorkspaceBytes(problem), 512u * 12 * 64 * 2);
  for (size_t bytes : {size_t{0}, size_t{4096}}) {
    absl::StatusOr<AttentionKernelConfig> config =
        (*tuner)->Select(problem, nullptr, nullptr, bytes);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        std::string(config.status().message()),
        HasSubstr(absl::StrCat("bf16/d64/padded/c2p+p2c/L512: no candidate variant runs in ", bytes,
                               " bytes of workspace")));
  }
  EXPECT_THAT((*tuner)->Describe(), HasSubstr("autotune (0 families tuned"));
}

// On a GPU: the first problem of a family times the candidates, later ones reuse the winner.
TEST(AutotuneTest, TunesOncePerFamilyOnTheLiveProblem) {
  DFLASH_REQUIRE_GPU();
  const RelativePositionIndex index(V3Positions());
  const int heads = 4;
  const int width = heads * 64;
  const int length = 512;
  test::DeviceBuffer qkv(static_cast<size_t>(length) * 3 * width * 2);
  const size_t pos_rows = static_cast<size_t>(2 * index.span()) * width;  // Elements of one.
  test::DeviceBuffer pos(2 * pos_rows * 2);                               // PosK, then PosQ.
  test::DeviceBuffer out(static_cast<size_t>(length) * width * 2);
  test::DeviceBuffer lut(index.table().size() * 4);
  test::DeviceBuffer cu(8);
  DFLASH_CUDA_OK(cudaMemset(qkv.get(), 0, qkv.bytes()));
  DFLASH_CUDA_OK(cudaMemset(pos.get(), 0, pos.bytes()));
  DFLASH_CUDA_OK(cudaMemcpy(lut.get(), index.table().data(), index.table().size() * 4,
                            cudaMemcpyHostToDevice));
  const int32_t cu_host[2] = {0, length};
  DFLASH_CUDA_OK(cudaMemcpy(cu.get(), cu_host, 8, cudaMemcpyHostToDevice));
  kernels::AttentionProblem problem;
  problem.dtype = DataType::kFloat16;
  problem.num_heads = heads;
  problem.head_dim = 64;
  problem.q = qkv.get();
  problem.k = static_cast<uint16_t*>(qkv.get()) + width;
  problem.v = static_cast<uint16_t*>(qkv.get()) + 2 * width;
  problem.q_row_stride = problem.k_row_stride = problem.v_row_stride = 3 * width;
  problem.out = out.get();
  problem.out_row_stride = width;
  problem.pos_key = pos.get();
  problem.pos_query = static_cast<uint16_t*>(pos.get()) + pos_rows;
  problem.cu_seqlens = cu.as<int32_t>();
  problem.num_sequences = 1;
  problem.max_seqlen = length;
  problem.total_tokens = length;
  problem.scale = 0.07f;
  problem.positions = {index.table().data(), lut.as<int32_t>(), index.band(), index.span()};
  test::DeviceBuffer workspace(kernels::AttentionMaxWorkspaceBytes(problem));

  AttentionTunerOptions options;
  options.mode = TuningMode::kAutotune;
  absl::StatusOr<std::unique_ptr<AttentionTuner>> tuner = AttentionTuner::Create(options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  EXPECT_THAT((*tuner)->Describe(), HasSubstr("autotune (0 families tuned"));
  absl::StatusOr<AttentionKernelConfig> first =
      (*tuner)->Select(problem, nullptr, workspace.get(), workspace.bytes());
  ASSERT_TRUE(first.ok()) << first.status();
  const std::vector<AttentionKernelConfig> candidates = kernels::AttentionCandidateConfigs(problem);
  EXPECT_NE(std::find(candidates.begin(), candidates.end(), *first), candidates.end());
  EXPECT_THAT((*tuner)->Describe(), HasSubstr("autotune (1 families tuned"));
  problem.max_seqlen = 300;  // Same family (L512): no new timing, the same answer.
  absl::StatusOr<AttentionKernelConfig> second =
      (*tuner)->Select(problem, nullptr, workspace.get(), workspace.bytes());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first);
  EXPECT_THAT((*tuner)->Describe(), HasSubstr("autotune (1 families tuned"));
  // Without workspace only the table-free variants can run (computed windows).
  problem.max_seqlen = 2000;
  absl::StatusOr<AttentionKernelConfig> small = (*tuner)->Select(problem, nullptr, nullptr, 0);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_NE(small->windows, AttentionWindows::kTables);
}

}  // namespace
}  // namespace dflash::tuning
