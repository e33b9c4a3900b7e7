// What a served model looks like to KServe clients: its input and output tensors, derived from
// the tasks it supports, and the ModelMetadata and ModelConfig answers built from them.
//
// Inputs (all BYTES, shapes without an implied batch dimension):
//   text [-1]              every task: the texts (classify, embed), premises (zero-shot) or
//                          documents (rerank);
//   text_pair [-1]         classify: second texts of pairs, one per text (optional);
//   candidate_labels [-1]  zero-shot: the labels every text is scored against;
//   query [1]              rerank: the query every document is scored against.
// Outputs (all FP32):
//   scores [-1, labels]    classify: per-label scores after the score function;
//   logits [-1, labels]    classify: the raw logits;
//   candidate_scores [-1, -1]  zero-shot: per text, one score per candidate label;
//   score [-1]             rerank: one relevance score per document, in document order;
//   embedding [-1, hidden] embed: one embedding per text.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "server/service/inference_pipeline.h"
#include "server/service/served_model.h"

namespace dflash::kserve {

inline constexpr char kTextInput[] = "text";
inline constexpr char kTextPairInput[] = "text_pair";
inline constexpr char kCandidateLabelsInput[] = "candidate_labels";
inline constexpr char kQueryInput[] = "query";
inline constexpr char kScoresOutput[] = "scores";
inline constexpr char kLogitsOutput[] = "logits";
inline constexpr char kCandidateScoresOutput[] = "candidate_scores";
inline constexpr char kScoreOutput[] = "score";
inline constexpr char kEmbeddingOutput[] = "embedding";

// Every served model has one version.
inline constexpr char kModelVersion[] = "1";
inline constexpr char kPlatform[] = "dflash";

// One tensor of a model's signature.
struct TensorSpec {
  std::string name;
  std::string datatype;  // "BYTES" or "FP32".
  std::vector<int64_t> shape;
  bool optional = false;  // Inputs: a request may leave it out (the task decides).
  serving::ServedTask task = serving::ServedTask::kClassify;  // Outputs: the task producing it.
};

struct ModelSignature {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;

  const TensorSpec* FindInput(absl::string_view name) const;
  const TensorSpec* FindOutput(absl::string_view name) const;
};

// The tensors of `model`, from the tasks it supports.
ModelSignature SignatureOf(const serving::ServedModel& model);

// NOT_FOUND unless `version` is empty or kModelVersion.
absl::Status CheckVersion(const serving::ServedModel& model, absl::string_view version);

inference::ModelMetadataResponse ModelMetadataOf(const serving::ServedModel& model);
// The configuration: the signature, and in `parameters` the facts clients need to read the
// outputs: the tasks, label names (labels: comma-separated, in id order), the default score
// function, pooling and limits.
inference::ModelConfigResponse ModelConfigOf(const serving::ServedModel& model);

}  // namespace dflash::kserve
