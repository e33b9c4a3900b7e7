// A KServe ModelInferRequest as the dflash.v1 request of the task it asks for. The task follows
// from the outputs the request names (each output belongs to one task), or else from its inputs:
// `query` makes it a rerank, `candidate_labels` a zero-shot classification, and `text` alone a
// classification (an embedding on a model that only embeds). Request parameters carry the
// dflash.v1 request options:
//   truncate (bool), truncation_direction ("left", "right"), truncation_strategy
//   ("longest_first", "only_first", "only_second"; not embed), priority ("low", "normal",
//   "high"), timeout (int64 microseconds, Triton's: tightens the call's deadline),
//   score_function ("softmax", "sigmoid", "raw"; classify, rerank), hypothesis_template (string)
//   and multi_label (bool) for zero-shot, normalize (bool) for embed.
// Every error is INVALID_ARGUMENT naming the input, output or parameter.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dflash/v1/dflash.pb.h"
#include "inference/grpc_service.pb.h"
#include "server/scoring/label_scores.h"
#include "server/service/served_model.h"

namespace dflash::kserve {

struct InferPlan {
  serving::ServedTask task = serving::ServedTask::kClassify;
  // The dflash.v1 request; its alternative matches `task`. A classification always asks for raw
  // logits: `logits` is them and `scores` follows from them through `score_function`.
  std::variant<v1::ClassifyRequest, v1::ZeroShotRequest, v1::RerankRequest, v1::EmbedRequest>
      request;
  // The outputs to return, in response order.
  std::vector<std::string> outputs;
  // Outputs in raw_output_contents (the request sent its inputs raw, or asked for binary_data)
  // rather than typed contents.
  bool raw_outputs = false;
  ScoreFunction score_function = ScoreFunction::kSoftmax;  // Classify: how scores are made.
  // The request's own timeout, when it set one.
  std::optional<absl::Duration> timeout;
};

absl::StatusOr<InferPlan> PlanInference(const serving::ServedModel& model,
                                        const inference::ModelInferRequest& request);

}  // namespace dflash::kserve
