#include "server/service/model_capabilities.h"

#include <gtest/gtest.h>

#include <set>

namespace dflash::serving {
namespace {

ModelConfig Classifier(std::vector<std::string> labels) {
  ModelConfig config;
  config.head = HeadKind::kSequenceClassification;
  config.id2label = std::move(labels);
  return config;
}

TEST(ModelCapabilitiesTest, NliClassifierDoesClassifyAndZeroShot) {
  const ModelCapabilities caps =
      DeriveCapabilities(Classifier({"CONTRADICTION", "Neutral", "Entailment"}), {});
  EXPECT_TRUE(caps.Supports(ServedTask::kClassify));
  EXPECT_TRUE(caps.Supports(ServedTask::kZeroShot));
  EXPECT_FALSE(caps.Supports(ServedTask::kRerank));
  EXPECT_FALSE(caps.Supports(ServedTask::kEmbed));
  EXPECT_EQ(caps.entailment_id, 2);
  EXPECT_EQ(caps.contradiction_id, 0);
}

TEST(ModelCapabilitiesTest, OneLabelClassifierIsACrossEncoder) {
  const ModelCapabilities caps = DeriveCapabilities(Classifier({"LABEL_0"}), {});
  EXPECT_TRUE(caps.Supports(ServedTask::kRerank));
  EXPECT_TRUE(caps.Supports(ServedTask::kClassify));
  EXPECT_FALSE(caps.Supports(ServedTask::kZeroShot));
}

TEST(ModelCapabilitiesTest, EncoderEmbeds) {
  ModelConfig config;
  config.head = HeadKind::kEncoderOnly;
  EXPECT_EQ(DeriveCapabilities(config, {}).tasks, std::set<ServedTask>{ServedTask::kEmbed});
  // A classifier shipped with sentence-transformers pooling files also embeds.
  EmbeddingConfig pooling;
  pooling.from_sentence_transformers = true;
  EXPECT_TRUE(DeriveCapabilities(Classifier({"a", "b"}), pooling).Supports(ServedTask::kEmbed));
}

TEST(ModelCapabilitiesTest, ConfiguredTasksNarrowAndAreChecked) {
  const ModelCapabilities nli = DeriveCapabilities(Classifier({"entailment", "contradiction"}), {});
  absl::StatusOr<ModelCapabilities> narrowed =
      ApplyConfiguredTasks(nli, {ModelTask::kZeroShot}, "m");
  ASSERT_TRUE(narrowed.ok());
  EXPECT_EQ(narrowed->tasks, std::set<ServedTask>{ServedTask::kZeroShot});
  absl::StatusOr<ModelCapabilities> all = ApplyConfiguredTasks(nli, {ModelTask::kAuto}, "m");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->tasks, nli.tasks);
  absl::StatusOr<ModelCapabilities> impossible =
      ApplyConfiguredTasks(nli, {ModelTask::kRerank}, "m");
  EXPECT_EQ(impossible.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(impossible.status().message().find("rerank"), absl::string_view::npos);
}

TEST(ModelCapabilitiesTest, TokenClassifierServesTokenClassifyOnly) {
  ModelConfig config;
  config.head = HeadKind::kTokenClassification;
  config.id2label = {"O", "B-PER"};
  const ModelCapabilities derived = DeriveCapabilities(config, {});
  EXPECT_EQ(derived.tasks, std::set<ServedTask>{ServedTask::kTokenClassify});
  EXPECT_EQ(ServedTaskName(ServedTask::kTokenClassify), "token_classify");
  EXPECT_TRUE(ApplyConfiguredTasks(derived, {ModelTask::kTokenClassify}, "ner").ok());
  EXPECT_EQ(ApplyConfiguredTasks(derived, {ModelTask::kClassify}, "ner").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A sequence classifier cannot label tokens.
  config.head = HeadKind::kSequenceClassification;
  EXPECT_FALSE(DeriveCapabilities(config, {}).Supports(ServedTask::kTokenClassify));
}

}  // namespace
}  // namespace dflash::serving
