// KServe ModelInfer <-> dflash.v1: which task a request is, the dflash.v1 request it becomes
// (inputs, parameters), the errors that name the input, output or parameter, and the output tensors
// built from dflash.v1 answers (in input order, whatever the answer's ranking).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "server/kserve/infer_request_mapping.h"
#include "server/kserve/infer_response_mapping.h"
#include "server/kserve/tensor_codec.h"
#include "server/service/served_model.h"

namespace dflash::kserve {
namespace {

using serving::ServedTask;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The bundled demo model (a 3-label NLI classifier: classify and zero-shot) on the null engine.
const serving::ServedModel& DemoModel() {
  static const serving::ServedModel* model = [] {
    serving::ModelEntry entry;
    entry.name = "demo";
    entry.path = DFLASH_DEMO_MODEL_DIR;
    entry.backend = EngineBackend::kNull;
    entry.max_input_length = 64;
    entry.batching.max_batch_tokens = 256;
    absl::StatusOr<std::unique_ptr<serving::ServedModel>> loaded =
        serving::ServedModel::Load(entry, nullptr);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? loaded->release() : nullptr;
  }();
  return *model;
}

void AddInput(inference::ModelInferRequest& request, const std::string& name,
              const std::vector<std::string>& values) {
  auto* input = request.add_inputs();
  input->set_name(name);
  input->set_datatype("BYTES");
  input->add_shape(static_cast<int64_t>(values.size()));
  request.add_raw_input_contents(EncodeRawBytes(values));
}

inference::ModelInferRequest TextRequest(const std::vector<std::string>& texts) {
  inference::ModelInferRequest request;
  request.set_model_name("demo");
  request.set_id("id-1");
  AddInput(request, "text", texts);
  return request;
}

TEST(KserveInferMappingTest, TextAloneIsAClassification) {
  inference::ModelInferRequest request = TextRequest({"a", "b"});
  AddInput(request, "text_pair", {"c", ""});
  auto& parameters = *request.mutable_parameters();
  parameters["truncate"].set_bool_param(false);
  parameters["truncation_direction"].set_string_param("left");
  parameters["truncation_strategy"].set_string_param("only_second");
  parameters["priority"].set_string_param("high");
  parameters["timeout"].set_int64_param(2500);
  absl::StatusOr<InferPlan> plan = PlanInference(DemoModel(), request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->task, ServedTask::kClassify);
  EXPECT_THAT(plan->outputs, ElementsAre("scores"));
  EXPECT_TRUE(plan->raw_outputs);
  EXPECT_EQ(plan->score_function, ScoreFunction::kSoftmax);
  EXPECT_EQ(plan->timeout, absl::Microseconds(2500));
  const auto& classify = std::get<v1::ClassifyRequest>(plan->request);
  EXPECT_EQ(classify.model(), "demo");
  EXPECT_EQ(classify.request_id(), "id-1");
  ASSERT_EQ(classify.inputs_size(), 2);
  EXPECT_EQ(classify.inputs(0).text(), "a");
  EXPECT_EQ(classify.inputs(0).text_pair(), "c");
  EXPECT_TRUE(classify.inputs(1).has_text_pair());
  EXPECT_EQ(classify.score_function(), v1::SCORE_FUNCTION_RAW);
  EXPECT_FALSE(classify.truncate());
  EXPECT_TRUE(classify.has_truncate());
  EXPECT_EQ(classify.truncation_direction(), v1::TRUNCATION_DIRECTION_LEFT);
  EXPECT_EQ(classify.truncation_strategy(), v1::TRUNCATION_STRATEGY_ONLY_SECOND);
  EXPECT_EQ(classify.priority(), v1::PRIORITY_HIGH);
}

TEST(KserveInferMappingTest, TypedInputsGetTypedOutputsUnlessBinaryDataIsAsked) {
  inference::ModelInferRequest request;
  request.set_model_name("demo");
  auto* input = request.add_inputs();
  input->set_name("text");
  input->set_datatype("BYTES");
  input->add_shape(1);
  input->mutable_contents()->add_bytes_contents("x");
  request.add_outputs()->set_name("logits");
  EXPECT_FALSE(PlanInference(DemoModel(), request)->raw_outputs);
  (*request.mutable_outputs(0)->mutable_parameters())["binary_data"].set_bool_param(true);
  EXPECT_TRUE(PlanInference(DemoModel(), request)->raw_outputs);
  (*request.mutable_outputs(0)->mutable_parameters())["classification"].set_int64_param(2);
  EXPECT_THAT(PlanInference(DemoModel(), request).status().message(),
              HasSubstr("output 'logits': parameter 'classification' is not supported"));
}

TEST(KserveInferMappingTest, CandidateLabelsMakeAZeroShotClassification) {
  inference::ModelInferRequest request = TextRequest({"the match"});
  AddInput(request, "candidate_labels", {"sports", "cooking"});
  (*request.mutable_parameters())["hypothesis_template"].set_string_param("About {}.");
  (*request.mutable_parameters())["multi_label"].set_bool_param(true);
  absl::StatusOr<InferPlan> plan = PlanInference(DemoModel(), request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->task, ServedTask::kZeroShot);
  EXPECT_THAT(plan->outputs, ElementsAre("candidate_scores"));
  const auto& zero_shot = std::get<v1::ZeroShotRequest>(plan->request);
  EXPECT_THAT(zero_shot.texts(), ElementsAre("the match"));
  EXPECT_THAT(zero_shot.candidate_labels(), ElementsAre("sports", "cooking"));
  EXPECT_EQ(zero_shot.hypothesis_template(), "About {}.");
  EXPECT_TRUE(zero_shot.multi_label());
}

TEST(KserveInferMappingTest, ErrorsNameTheInputOutputOrParameter) {
  auto message = [](const inference::ModelInferRequest& request) {
    absl::StatusOr<InferPlan> plan = PlanInference(DemoModel(), request);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
    return std::string(plan.status().message());
  };
  inference::ModelInferRequest request = TextRequest({"a"});
  request.add_outputs()->set_name("embedding");
  EXPECT_THAT(message(request), HasSubstr("output 'embedding': model 'demo' has no such output"));

  request = TextRequest({"a"});
  AddInput(request, "text", {"b"});
  EXPECT_THAT(message(request), HasSubstr("input 'text': sent more than once"));

  request = TextRequest({"a"});
  AddInput(request, "candidate_labels", {"x"});
  AddInput(request, "text_pair", {"b"});
  EXPECT_THAT(message(request), HasSubstr("input 'text_pair': not read by the zero_shot task"));

  request = TextRequest({"a"});
  (*request.mutable_parameters())["priority"].set_int64_param(1);
  EXPECT_THAT(message(request), HasSubstr("parameters.priority: expected a string parameter"));
  request = TextRequest({"a"});
  (*request.mutable_parameters())["priority"].set_string_param("urgent");
  EXPECT_THAT(message(request),
              HasSubstr("parameters.priority: unknown value 'urgent'; one of low, normal, high"));
  request = TextRequest({"a"});
  (*request.mutable_parameters())["sequence_id"].set_int64_param(4);
  EXPECT_THAT(message(request), HasSubstr("parameters.sequence_id: unknown parameter"));
  request = TextRequest({"a"});
  (*request.mutable_parameters())["timeout"].set_int64_param(-1);
  EXPECT_THAT(message(request), HasSubstr("parameters.timeout: must not be negative"));

  request = TextRequest({"a"});
  request.set_model_version("3");
  EXPECT_EQ(PlanInference(DemoModel(), request).status().code(), absl::StatusCode::kNotFound);
}

TEST(KserveInferMappingTest, ClassifyAnswerIsInLabelOrderWithScoresFromLogits) {
  InferPlan plan;
  plan.outputs = {"logits", "scores"};
  plan.score_function = ScoreFunction::kSoftmax;
  v1::ClassifyResponse answer;
  answer.mutable_metadata()->set_model("demo");
  answer.mutable_metadata()->set_request_id("r");
  answer.mutable_metadata()->set_tokens(12);
  // Ranked highest first, as the pipeline answers.
  v1::Classification* result = answer.add_results();
  for (const auto& [id, logit] :
       std::vector<std::pair<int, float>>{{2, 3.0f}, {0, 1.0f}, {1, -1.0f}}) {
    v1::LabelScore* label = result->add_scores();
    label->set_id(id);
    label->set_score(logit);
  }
  const inference::ModelInferResponse response = ClassifyAnswer(plan, 3, answer);
  EXPECT_EQ(response.model_name(), "demo");
  EXPECT_EQ(response.id(), "r");
  EXPECT_EQ(response.parameters().at("tokens").int64_param(), 12);
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "logits");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(1, 3));
  EXPECT_THAT(*DecodeFp32Output(response, 0), ElementsAre(1.0f, -1.0f, 3.0f));
  const std::vector<float> scores = *DecodeFp32Output(response, 1);
  const double sum = std::exp(1.0) + std::exp(-1.0) + std::exp(3.0);
  ASSERT_EQ(scores.size(), 3u);
  EXPECT_NEAR(scores[0], std::exp(1.0) / sum, 1e-6);
  EXPECT_NEAR(scores[2], std::exp(3.0) / sum, 1e-6);
}

TEST(KserveInferMappingTest, RerankAndZeroShotAnswersAreInRequestOrder) {
  InferPlan rerank_plan;
  rerank_plan.task = ServedTask::kRerank;
  rerank_plan.outputs = {"score"};
  v1::RerankRequest rerank;
  for (int i = 0; i < 3; ++i) rerank.add_documents("d");
  rerank_plan.request = rerank;
  v1::RerankResponse ranked;
  for (const auto& [index, score] :
       std::vector<std::pair<uint32_t, float>>{{1, 0.9f}, {2, 0.5f}, {0, 0.1f}}) {
    v1::RerankResult* result = ranked.add_results();
    result->set_index(index);
    result->set_score(score);
  }
  const inference::ModelInferResponse reranked = RerankAnswer(rerank_plan, ranked);
  EXPECT_THAT(reranked.outputs(0).shape(), ElementsAre(3));
  EXPECT_THAT(*DecodeFp32Output(reranked, 0), ElementsAre(0.1f, 0.9f, 0.5f));

  InferPlan zero_shot_plan;
  zero_shot_plan.task = ServedTask::kZeroShot;
  zero_shot_plan.outputs = {"candidate_scores"};
  v1::ZeroShotRequest zero_shot;
  zero_shot.add_candidate_labels("a");
  zero_shot.add_candidate_labels("b");
  zero_shot_plan.request = zero_shot;
  v1::ZeroShotResponse answer;
  v1::ZeroShotResult* result = answer.add_results();
  for (const auto& [id, score] : std::vector<std::pair<int, float>>{{1, 0.75f}, {0, 0.25f}}) {
    v1::LabelScore* label = result->add_scores();
    label->set_id(id);
    label->set_score(score);
  }
  const inference::ModelInferResponse scored = ZeroShotAnswer(zero_shot_plan, answer);
  EXPECT_THAT(scored.outputs(0).shape(), ElementsAre(1, 2));
  EXPECT_THAT(*DecodeFp32Output(scored, 0), ElementsAre(0.25f, 0.75f));
}

TEST(KserveInferMappingTest, PipelineErrorsAreRenamedToTensorElements) {
  InferPlan plan;
  plan.task = ServedTask::kClassify;
  const absl::Status renamed = WithTensorNames(
      plan, absl::InvalidArgumentError("inputs[3].text_pair: too long; inputs[12].text: bad; "
                                       "inputs[0]: 99 tokens"));
  EXPECT_EQ(renamed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(renamed.message(), "text_pair[3]: too long; text[12]: bad; text[0]: 99 tokens");
  plan.task = ServedTask::kRerank;
  EXPECT_EQ(WithTensorNames(plan, absl::InvalidArgumentError("documents[2]: empty")).message(),
            "text[2]: empty");
  EXPECT_TRUE(WithTensorNames(plan, absl::OkStatus()).ok());
}

}  // namespace
}  // namespace dflash::kserve
