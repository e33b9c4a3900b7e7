// What a loaded checkpoint can be asked to do: the RPCs it accepts and the label ids they need.
// Derived from config.json (architecture, id2label, problem_type) and the pooling files, then
// narrowed by the `task:` of server.yaml.
#pragma once

#include <optional>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "server/config/server_config.h"

namespace dflash::serving {

enum class ServedTask { kClassify, kZeroShot, kRerank, kEmbed, kTokenClassify };
absl::string_view ServedTaskName(ServedTask task);  // "classify", "zero_shot", ...

struct ModelCapabilities {
  std::set<ServedTask> tasks;
  // Ids of the labels named entailment / contradiction (case-insensitive prefixes "entail" and
  // "contra", as the transformers zero-shot pipeline matches them).
  std::optional<int> entailment_id;
  std::optional<int> contradiction_id;

  bool Supports(ServedTask task) const { return tasks.count(task) > 0; }
};

// The tasks the checkpoint supports by itself:
// - classify: a sequence-classification head;
// - zero_shot: a sequence classifier with entailment and contradiction labels;
// - rerank: a sequence classifier with exactly one label (a cross-encoder's relevance logit);
// - embed: an encoder without a classification head, or any model shipped with a
//   sentence-transformers pooling config;
// - token_classify: a token-classification head.
ModelCapabilities DeriveCapabilities(const ModelConfig& config, const EmbeddingConfig& embedding);

// Restricts `derived` to the configured tasks (empty or kAuto: keep all). FAILED_PRECONDITION,
// naming the model, when a configured task is not supported or nothing is left to serve.
absl::StatusOr<ModelCapabilities> ApplyConfiguredTasks(const ModelCapabilities& derived,
                                                       const std::vector<ModelTask>& configured,
                                                       absl::string_view model_name);

}  // namespace dflash::serving
