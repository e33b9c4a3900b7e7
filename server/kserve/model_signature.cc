#include "server/kserve/model_signature.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflash::kserve {
namespace {

using serving::ServedModel;
using serving::ServedTask;

constexpr char kBytes[] = "BYTES";
constexpr char kFp32[] = "FP32";

TensorSpec Input(std::string name, std::vector<int64_t> shape, bool optional) {
  return TensorSpec{std::move(name), kBytes, std::move(shape), optional, ServedTask::kClassify};
}
TensorSpec Output(std::string name, std::vector<int64_t> shape, ServedTask task) {
  return TensorSpec{std::move(name), kFp32, std::move(shape), false, task};
}

inference::DataType ConfigDataType(absl::string_view datatype) {
  return datatype == kBytes ? inference::TYPE_STRING : inference::TYPE_FP32;
}

}  // namespace

const TensorSpec* ModelSignature::FindInput(absl::string_view name) const {
  for (const TensorSpec& input : inputs) {
    if (input.name == name) return &input;
  }
  return nullptr;
}

const TensorSpec* ModelSignature::FindOutput(absl::string_view name) const {
  for (const TensorSpec& output : outputs) {
    if (output.name == name) return &output;
  }
  return nullptr;
}

ModelSignature SignatureOf(const ServedModel& model) {
  const serving::ModelCapabilities& caps = model.capabilities();
  const int64_t labels = model.config().num_labels();
  const bool classify = caps.Supports(ServedTask::kClassify);
  // `text` is read by every task. The inputs of one task alone are optional when the model serves
  // others too: the inputs a request sends choose the task.
  const bool several = caps.tasks.size() > 1;
  ModelSignature signature;
  signature.inputs.push_back(Input(kTextInput, {-1}, false));
  if (classify) signature.inputs.push_back(Input(kTextPairInput, {-1}, true));
  if (caps.Supports(ServedTask::kZeroShot)) {
    signature.inputs.push_back(Input(kCandidateLabelsInput, {-1}, several));
  }
  if (caps.Supports(ServedTask::kRerank)) {
    signature.inputs.push_back(Input(kQueryInput, {1}, several));
  }
  if (classify) {
    signature.outputs.push_back(Output(kScoresOutput, {-1, labels}, ServedTask::kClassify));
    signature.outputs.push_back(Output(kLogitsOutput, {-1, labels}, ServedTask::kClassify));
  }
  if (caps.Supports(ServedTask::kZeroShot)) {
    signature.outputs.push_back(Output(kCandidateScoresOutput, {-1, -1}, ServedTask::kZeroShot));
  }
  if (caps.Supports(ServedTask::kRerank)) {
    signature.outputs.push_back(Output(kScoreOutput, {-1}, ServedTask::kRerank));
  }
  if (caps.Supports(ServedTask::kEmbed)) {
    signature.outputs.push_back(
        Output(kEmbeddingOutput, {-1, model.config().hidden_size}, ServedTask::kEmbed));
  }
  return signature;
}

absl::Status CheckVersion(const ServedModel& model, absl::string_view version) {
  if (version.empty() || version == kModelVersion) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("model '", model.id(), "' has no version '", version,
                                          "'; its only version is ", kModelVersion));
}

inference::ModelMetadataResponse ModelMetadataOf(const ServedModel& model) {
  const ModelSignature signature = SignatureOf(model);
  inference::ModelMetadataResponse metadata;
  metadata.set_name(model.id());
  metadata.add_versions(std::string(kModelVersion));
  metadata.set_platform(kPlatform);
  for (const auto& [specs, tensors] : {std::pair{&signature.inputs, metadata.mutable_inputs()},
                                       std::pair{&signature.outputs, metadata.mutable_outputs()}}) {
    for (const TensorSpec& spec : *specs) {
      auto* tensor = tensors->Add();
      tensor->set_name(spec.name);
      tensor->set_datatype(spec.datatype);
      tensor->mutable_shape()->Add(spec.shape.begin(), spec.shape.end());
    }
  }
  return metadata;
}

inference::ModelConfigResponse ModelConfigOf(const ServedModel& model) {
  const ModelSignature signature = SignatureOf(model);
  inference::ModelConfigResponse response;
  inference::ModelConfig& config = *response.mutable_config();
  config.set_name(model.id());
  config.set_platform(kPlatform);
  config.set_backend(model.engine_info().backend);
  // The tensors' shapes are complete: requests are batched by the server's own batcher, on
  // tokens, not along a tensor dimension.
  config.set_max_batch_size(0);
  for (const TensorSpec& spec : signature.inputs) {
    inference::ModelInput* input = config.add_input();
    input->set_name(spec.name);
    input->set_data_type(ConfigDataType(spec.datatype));
    input->mutable_dims()->Add(spec.shape.begin(), spec.shape.end());
    input->set_optional(spec.optional);
  }
  for (const TensorSpec& spec : signature.outputs) {
    inference::ModelOutput* output = config.add_output();
    output->set_name(spec.name);
    output->set_data_type(ConfigDataType(spec.datatype));
    output->mutable_dims()->Add(spec.shape.begin(), spec.shape.end());
  }
  auto set = [&config](const std::string& key, std::string value) {
    (*config.mutable_parameters())[key].set_string_value(std::move(value));
  };
  std::vector<std::string> tasks;
  for (const ServedTask task : model.capabilities().tasks) {
    tasks.emplace_back(serving::ServedTaskName(task));
  }
  set("tasks", absl::StrJoin(tasks, ","));
  set("max_input_length", absl::StrCat(model.max_input_length()));
  const ModelConfig& model_config = model.config();
  if (model.capabilities().Supports(ServedTask::kClassify) ||
      model.capabilities().Supports(ServedTask::kRerank)) {
    // A JSON array, so that label names may hold any character.
    set("labels", nlohmann::json(model_config.id2label).dump());
    set("score_function", std::string(ScoreFunctionName(model.default_score_function())));
  }
  if (model.capabilities().Supports(ServedTask::kEmbed)) {
    set("pooling", model.embedding().pooling == PoolingMode::kCls ? "cls" : "mean");
  }
  return response;
}

}  // namespace dflash::kserve
