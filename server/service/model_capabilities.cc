#include "server/service/model_capabilities.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflash::serving {

absl::string_view ServedTaskName(ServedTask task) {
  switch (task) {
    case ServedTask::kClassify:
      return "classify";
    case ServedTask::kZeroShot:
      return "zero_shot";
    case ServedTask::kRerank:
      return "rerank";
    case ServedTask::kEmbed:
      return "embed";
    case ServedTask::kTokenClassify:
      return "token_classify";
  }
  return "unknown";
}

ModelCapabilities DeriveCapabilities(const ModelConfig& config, const EmbeddingConfig& embedding) {
  ModelCapabilities capabilities;
  if (config.head == HeadKind::kSequenceClassification) {
    capabilities.tasks.insert(ServedTask::kClassify);
    for (int id = 0; id < config.num_labels(); ++id) {
      const std::string name = absl::AsciiStrToLower(config.id2label[id]);
      if (!capabilities.entailment_id && absl::StartsWith(name, "entail")) {
        capabilities.entailment_id = id;
      }
      if (!capabilities.contradiction_id && absl::StartsWith(name, "contra")) {
        capabilities.contradiction_id = id;
      }
    }
    if (capabilities.entailment_id && capabilities.contradiction_id) {
      capabilities.tasks.insert(ServedTask::kZeroShot);
    }
    if (config.num_labels() == 1) capabilities.tasks.insert(ServedTask::kRerank);
  }
  if (config.head == HeadKind::kTokenClassification) {
    capabilities.tasks.insert(ServedTask::kTokenClassify);
  }
  if (config.head == HeadKind::kEncoderOnly || embedding.from_sentence_transformers) {
    capabilities.tasks.insert(ServedTask::kEmbed);
  }
  return capabilities;
}

namespace {

std::optional<ServedTask> ToServedTask(ModelTask task) {
  switch (task) {
    case ModelTask::kAuto:
      return std::nullopt;
    case ModelTask::kClassify:
      return ServedTask::kClassify;
    case ModelTask::kZeroShot:
      return ServedTask::kZeroShot;
    case ModelTask::kRerank:
      return ServedTask::kRerank;
    case ModelTask::kEmbed:
      return ServedTask::kEmbed;
    case ModelTask::kTokenClassify:
      return ServedTask::kTokenClassify;
  }
  return std::nullopt;
}

std::string TaskList(const std::set<ServedTask>& tasks) {
  if (tasks.empty()) return "none";
  return absl::StrJoin(tasks, ", ", [](std::string* out, ServedTask task) {
    absl::StrAppend(out, ServedTaskName(task));
  });
}

}  // namespace

absl::StatusOr<ModelCapabilities> ApplyConfiguredTasks(const ModelCapabilities& derived,
                                                       const std::vector<ModelTask>& configured,
                                                       absl::string_view model_name) {
  ModelCapabilities result = derived;
  std::set<ServedTask> wanted;
  for (ModelTask task : configured) {
    if (std::optional<ServedTask> served = ToServedTask(task)) wanted.insert(*served);
  }
  if (!wanted.empty()) {
    for (ServedTask task : wanted) {
      if (!derived.Supports(task)) {
        return absl::FailedPreconditionError(
            absl::StrCat("model '", model_name, "': task ", ServedTaskName(task),
                         " is configured but the checkpoint cannot do it (it supports: ",
                         TaskList(derived.tasks), "); fix `task:` in the config"));
      }
    }
    result.tasks = wanted;
  }
  if (result.tasks.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", model_name,
                     "': the checkpoint supports none of classify, zero_shot, rerank, embed, "
                     "token_classify"));
  }
  return result;
}

}  // namespace dflash::serving
