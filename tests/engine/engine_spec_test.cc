// engine/engine_spec.{h,cc}: the spellings of the engine choices, both ways.
#include "engine/engine_spec.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash {
namespace {

using ::testing::HasSubstr;

TEST(EngineSpecTest, BackendNamesRoundTrip) {
  for (const auto& [name, backend] : kEngineBackendNames) {
    EXPECT_EQ(EngineBackendName(backend), name);
    EXPECT_EQ(*ParseEngineBackend(name), backend);
  }
  EXPECT_EQ(*ParseEngineBackend("cuda"), EngineBackend::kCuda);
  const absl::StatusOr<EngineBackend> unknown = ParseEngineBackend("gpu");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("unknown backend 'gpu' (expected auto, cpu, cuda or null)"));
}

TEST(EngineSpecTest, DtypeNamesRoundTrip) {
  for (const auto& [name, dtype] : kEngineDtypeNames) {
    EXPECT_EQ(EngineDtypeName(dtype), name);
    EXPECT_EQ(*ParseEngineDtype(name), dtype);
  }
  EXPECT_EQ(*ParseEngineDtype("bfloat16"), EngineDtype::kBfloat16);
  EXPECT_FALSE(ParseEngineDtype("fp16").ok());
}

TEST(EngineSpecTest, ParsesTheFourTuningModes) {
  EXPECT_EQ(*ParseTuningMode("heuristic"), TuningMode::kHeuristic);
  EXPECT_EQ(*ParseTuningMode("profile"), TuningMode::kProfile);
  EXPECT_EQ(*ParseTuningMode("profile_only"), TuningMode::kProfileOnly);
  EXPECT_EQ(*ParseTuningMode("autotune"), TuningMode::kAutotune);
  const absl::StatusOr<TuningMode> unknown = ParseTuningMode("auto");
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("unknown tuning mode 'auto' (expected heuristic, profile, profile_only "
                        "or autotune)"));
  EXPECT_EQ(TuningModeName(TuningMode::kProfileOnly), "profile_only");
}

}  // namespace
}  // namespace dflash
