#include "server/scoring/label_scores.h"

#include <algorithm>
#include <cmath>

namespace dflash {

ScoreFunction DefaultScoreFunction(const ModelConfig& config) {
  // Regression heads (e.g. STS-B similarity) predict values, not classes: shown as they are.
  if (config.problem_type == ProblemType::kRegression) return ScoreFunction::kRawLogits;
  if (config.problem_type == ProblemType::kMultiLabel || config.num_labels() == 1) {
    return ScoreFunction::kSigmoid;
  }
  return ScoreFunction::kSoftmax;
}

absl::string_view ScoreFunctionName(ScoreFunction function) {
  switch (function) {
    case ScoreFunction::kSoftmax:
      return "softmax";
    case ScoreFunction::kSigmoid:
      return "sigmoid";
    case ScoreFunction::kRawLogits:
      return "raw";
  }
  return "unknown";
}

std::vector<float> ScoreLogits(std::span<const float> logits, ScoreFunction function) {
  std::vector<float> scores(logits.begin(), logits.end());
  switch (function) {
    case ScoreFunction::kSoftmax: {
      if (scores.empty()) return scores;
      const float max = *std::max_element(scores.begin(), scores.end());
      double sum = 0.0;
      for (float& score : scores) {
        score = std::exp(score - max);
        sum += score;
      }
      for (float& score : scores) score = static_cast<float>(score / sum);
      break;
    }
    case ScoreFunction::kSigmoid:
      // Written to stay finite and accurate for large |x| of either sign.
      for (float& score : scores) {
        score = score >= 0 ? 1.0f / (1.0f + std::exp(-score))
                           : std::exp(score) / (1.0f + std::exp(score));
      }
      break;
    case ScoreFunction::kRawLogits:
      break;
  }
  return scores;
}

}  // namespace dflash
