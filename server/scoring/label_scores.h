// How a classifier's logits are shown to users: softmax over the labels of a single-label model,
// an independent sigmoid per label for multi-label models and for one-label models without a
// problem type (cross-encoder rerankers, as sentence-transformers' CrossEncoder does), or raw
// logits (regression heads, or on request).
#pragma once

#include <span>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/model/model_config.h"

namespace dflash {

enum class ScoreFunction { kSoftmax, kSigmoid, kRawLogits };

// The model's default: kRawLogits for problem_type regression; kSigmoid for
// multi_label_classification or num_labels == 1 (cross-encoder rerankers); kSoftmax otherwise.
ScoreFunction DefaultScoreFunction(const ModelConfig& config);
absl::string_view ScoreFunctionName(ScoreFunction function);

// Scores of one sequence from its logits [num_labels].
std::vector<float> ScoreLogits(std::span<const float> logits, ScoreFunction function);

}  // namespace dflash
