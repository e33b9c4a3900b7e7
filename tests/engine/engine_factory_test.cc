// engine/engine_factory.{h,cc}: which engines an engine spec gives, on a tiny checkpoint.
#include "engine/engine_factory.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tiny_checkpoint.h"

namespace dflash {
namespace {

using ::testing::HasSubstr;

class EngineFactoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(test::WriteTinyCheckpoint(dir_.path(), test::TinyConfigJson()).ok());
  }

  absl::StatusOr<std::vector<std::unique_ptr<Engine>>> Create(const EngineSpec& spec) {
    absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(dir_.path());
    if (!checkpoint.ok()) return checkpoint.status();
    return CreateEngines(spec, *std::move(checkpoint));
  }

  static EngineSpec Spec(EngineBackend backend, EngineDtype dtype = EngineDtype::kAuto) {
    EngineSpec spec;
    spec.model_name = "tiny";
    spec.backend = backend;
    spec.dtype = dtype;
    return spec;
  }

  test::ScopedTempDir dir_;
};

TEST_F(EngineFactoryTest, CpuGivesOneCpuEngine) {
  auto engines = Create(Spec(EngineBackend::kCpu, EngineDtype::kFloat32));
  ASSERT_TRUE(engines.ok()) << engines.status();
  ASSERT_EQ(engines->size(), 1u);
  EXPECT_EQ((*engines)[0]->Info().backend, "cpu");
}

TEST_F(EngineFactoryTest, CpuRefusesHalfPrecision) {
  for (EngineDtype dtype : {EngineDtype::kFloat16, EngineDtype::kBfloat16}) {
    auto engines = Create(Spec(EngineBackend::kCpu, dtype));
    EXPECT_EQ(engines.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(engines.status().message(),
                HasSubstr("model 'tiny': the CPU engine computes in float32 only"));
  }
}

TEST_F(EngineFactoryTest, NullGivesOneNullEngine) {
  auto engines = Create(Spec(EngineBackend::kNull));
  ASSERT_TRUE(engines.ok()) << engines.status();
  ASSERT_EQ(engines->size(), 1u);
  EXPECT_EQ((*engines)[0]->Info().backend, "null");
}

// Listed devices give one stand-in each, so the server's multi-engine scheduling runs on CPUs.
TEST_F(EngineFactoryTest, NullGivesOneNullEnginePerListedDevice) {
  EngineSpec spec = Spec(EngineBackend::kNull);
  spec.devices = {0, 1, 3};
  auto engines = Create(spec);
  ASSERT_TRUE(engines.ok()) << engines.status();
  ASSERT_EQ(engines->size(), 3u);
  for (const std::unique_ptr<Engine>& engine : *engines) {
    EXPECT_EQ(engine->Info().backend, "null");
  }
}

// The null engine's test delay: a duration, optionally + a duration per token.
TEST_F(EngineFactoryTest, NullEngineTestDelayTakesATimePerBatchAndPerToken) {
  for (const char* valid : {"0s", "500ms", "1ms+2us/token", "0s+1us/token"}) {
    setenv("DFLASH_TEST_NULL_ENGINE_DELAY", valid, 1);
    EXPECT_TRUE(Create(Spec(EngineBackend::kNull)).ok()) << valid;
  }
  for (const char* invalid :
       {"soon", "-1ms", "1ms+2us", "1ms+2us/token+1s", "1ms+x/token", "inf"}) {
    setenv("DFLASH_TEST_NULL_ENGINE_DELAY", invalid, 1);
    auto engines = Create(Spec(EngineBackend::kNull));
    EXPECT_EQ(engines.status().code(), absl::StatusCode::kInvalidArgument) << invalid;
    EXPECT_THAT(engines.status().message(), HasSubstr("DFLASH_TEST_NULL_ENGINE_DELAY")) << invalid;
  }
  unsetenv("DFLASH_TEST_NULL_ENGINE_DELAY");
}

TEST_F(EngineFactoryTest, WithoutTheCudaEngineCudaIsRefusedAndAutoTakesTheCpu) {
  if (CudaEngineBuilt()) GTEST_SKIP() << "this build has the CUDA engine";
  auto cuda = Create(Spec(EngineBackend::kCuda));
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(cuda.status().message(), HasSubstr("built without a CUDA toolkit"));
  // A half-precision dtype falls back to float32 with the CPU engine.
  auto automatic = Create(Spec(EngineBackend::kAuto, EngineDtype::kFloat16));
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  ASSERT_EQ(automatic->size(), 1u);
  EXPECT_EQ((*automatic)[0]->Info().backend, "cpu");
}

}  // namespace
}  // namespace dflash
