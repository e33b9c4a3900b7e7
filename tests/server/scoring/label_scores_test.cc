// Label scores as users see them: the default score function per model kind and its values.
#include "server/scoring/label_scores.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash {
namespace {

using testing::ElementsAre;
using testing::FloatNear;

ModelConfig WithLabels(int labels, ProblemType problem) {
  ModelConfig config;
  config.id2label.resize(static_cast<size_t>(labels), "label");
  config.problem_type = problem;
  return config;
}

TEST(LabelScoresTest, DefaultFunctionFollowsTheModelKind) {
  EXPECT_EQ(DefaultScoreFunction(WithLabels(3, ProblemType::kUnspecified)),
            ScoreFunction::kSoftmax);
  EXPECT_EQ(DefaultScoreFunction(WithLabels(3, ProblemType::kSingleLabel)),
            ScoreFunction::kSoftmax);
  EXPECT_EQ(DefaultScoreFunction(WithLabels(3, ProblemType::kMultiLabel)), ScoreFunction::kSigmoid);
  // A one-label cross-encoder (reranker) without a problem type: sigmoid, as CrossEncoder does.
  EXPECT_EQ(DefaultScoreFunction(WithLabels(1, ProblemType::kUnspecified)),
            ScoreFunction::kSigmoid);
  // Regression predicts values (STS-B similarity 0..5): never squashed.
  EXPECT_EQ(DefaultScoreFunction(WithLabels(1, ProblemType::kRegression)),
            ScoreFunction::kRawLogits);
  EXPECT_EQ(DefaultScoreFunction(WithLabels(3, ProblemType::kRegression)),
            ScoreFunction::kRawLogits);
}

TEST(LabelScoresTest, SoftmaxSigmoidAndRawValues) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const float denominator = std::exp(1.0f) + std::exp(2.0f) + std::exp(3.0f);
  EXPECT_THAT(ScoreLogits(logits, ScoreFunction::kSoftmax),
              ElementsAre(FloatNear(std::exp(1.0f) / denominator, 1e-6f),
                          FloatNear(std::exp(2.0f) / denominator, 1e-6f),
                          FloatNear(std::exp(3.0f) / denominator, 1e-6f)));
  EXPECT_THAT(ScoreLogits(logits, ScoreFunction::kSigmoid),
              ElementsAre(FloatNear(1.0f / (1.0f + std::exp(-1.0f)), 1e-6f),
                          FloatNear(1.0f / (1.0f + std::exp(-2.0f)), 1e-6f),
                          FloatNear(1.0f / (1.0f + std::exp(-3.0f)), 1e-6f)));
  EXPECT_THAT(ScoreLogits(logits, ScoreFunction::kRawLogits), ElementsAre(1.0f, 2.0f, 3.0f));
}

TEST(LabelScoresTest, ExtremeLogitsStayFinite) {
  const std::vector<float> logits = {-1000.0f, 1000.0f};
  for (float score : ScoreLogits(logits, ScoreFunction::kSigmoid))
    EXPECT_TRUE(std::isfinite(score));
  EXPECT_THAT(ScoreLogits(logits, ScoreFunction::kSigmoid), ElementsAre(0.0f, 1.0f));
  EXPECT_THAT(ScoreLogits(logits, ScoreFunction::kSoftmax), ElementsAre(0.0f, 1.0f));
}

}  // namespace
}  // namespace dflash
