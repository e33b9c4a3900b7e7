// Classify: each input (a text or a text pair) is one model sequence; its logits become label
// scores.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/service/inference_pipeline.h"
#include "server/service/label_ranking.h"

namespace dflash::serving {

void InferencePipeline::Classify(const v1::ClassifyRequest& request, CallContext call,
                                 Responder<v1::ClassifyResponse> respond) {
  ServedModel* model =
      BeginRequest("Classify", request.model(), ServedTask::kClassify, call, respond);
  if (model == nullptr) return;
  if (absl::Status count = CheckCount(static_cast<size_t>(request.inputs_size()),
                                      model->entry().limits.max_inputs, "inputs", "inputs");
      !count.ok()) {
    respond(std::move(count));
    return;
  }
  absl::StatusOr<ScoreFunction> score_function =
      ResolveScoreFunction(*model, request.score_function());
  absl::StatusOr<RequestSettings> settings =
      ResolveSettings(*model, request, TruncationStrategy::kLongestFirst);
  for (const absl::Status& valid : {score_function.status(), settings.status()}) {
    if (!valid.ok()) {
      respond(valid);
      return;
    }
  }
  const RequestTruncation truncation = settings->truncation;

  Encoder encode = [&request, model, truncation](int i) -> absl::StatusOr<Sequence> {
    const std::string field = absl::StrCat("inputs[", i, "]");
    DFLASH_ASSIGN_OR_RETURN(Encoding encoding,
                            EncodeTextInput(*model, request.inputs(i), truncation, field));
    DFLASH_RETURN_IF_ERROR(CheckLength(truncation, encoding.ids.size(), field));
    const bool truncated = encoding.truncated;
    return Sequence{ToSequenceInput(std::move(encoding)), truncated};
  };
  RunSequences(
      model, call, settings->priority, kSequenceLogits, request.inputs_size(), std::move(encode),
      [this, &request, call, function = *score_function,
       respond = std::move(respond)](absl::StatusOr<ModelRun> run) mutable {
        if (!run.ok()) {
          respond(run.status());
          return;
        }
        const ModelConfig& config = run->model->config();
        v1::ClassifyResponse response;
        for (size_t i = 0; i < run->result.outputs.size(); ++i) {
          const std::vector<float> scores = ScoreLogits(run->result.outputs[i].logits, function);
          v1::Classification* result = response.add_results();
          for (int label : RankByScore(scores, request.top_k())) {
            v1::LabelScore* score = result->add_scores();
            score->set_id(label);
            score->set_label(config.id2label[static_cast<size_t>(label)]);
            score->set_score(scores[static_cast<size_t>(label)]);
          }
          result->set_tokens(static_cast<uint32_t>(run->lengths[i]));
          result->set_truncated(run->sequences[i].truncated);
        }
        FillMetadata(*run, call, request.request_id(), response.mutable_metadata());
        respond(std::move(response));
      });
}

}  // namespace dflash::serving
