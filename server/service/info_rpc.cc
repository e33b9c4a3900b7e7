// Info: the description of the server and its models, from the loaded state.
#include "absl/strings/str_cat.h"
#include "server/service/inference_pipeline.h"

namespace dflash::serving {
namespace {

v1::Task ToProtoTask(ServedTask task) {
  switch (task) {
    case ServedTask::kClassify:
      return v1::TASK_CLASSIFY;
    case ServedTask::kZeroShot:
      return v1::TASK_ZERO_SHOT;
    case ServedTask::kRerank:
      return v1::TASK_RERANK;
    case ServedTask::kEmbed:
      return v1::TASK_EMBED;
    case ServedTask::kTokenClassify:
      return v1::TASK_TOKEN_CLASSIFY;
  }
  return v1::TASK_UNSPECIFIED;
}

v1::ScoreFunction ToProtoScoreFunction(ScoreFunction function) {
  switch (function) {
    case ScoreFunction::kSoftmax:
      return v1::SCORE_FUNCTION_SOFTMAX;
    case ScoreFunction::kSigmoid:
      return v1::SCORE_FUNCTION_SIGMOID;
    case ScoreFunction::kRawLogits:
      return v1::SCORE_FUNCTION_RAW;
  }
  return v1::SCORE_FUNCTION_UNSPECIFIED;
}

v1::DataType ToProtoDataType(absl::string_view dtype) {
  if (dtype == "float16") return v1::DATA_TYPE_FLOAT16;
  if (dtype == "bfloat16") return v1::DATA_TYPE_BFLOAT16;
  return v1::DATA_TYPE_FLOAT32;
}

void FillModelInfo(ServedModel& model, v1::ModelInfo* info) {
  const ModelConfig& config = model.config();
  const ModelCapabilities& caps = model.capabilities();
  info->set_id(model.id());
  info->set_source(model.entry().path.string());
  info->set_architecture(config.architectures.empty() ? "DebertaV2Model"
                                                      : config.architectures.front());
  for (ServedTask task : caps.tasks) info->add_tasks(ToProtoTask(task));
  if (config.head == HeadKind::kSequenceClassification ||
      config.head == HeadKind::kTokenClassification) {
    for (int id = 0; id < config.num_labels(); ++id) {
      v1::Label* label = info->add_labels();
      label->set_id(id);
      label->set_name(config.id2label[static_cast<size_t>(id)]);
    }
  }
  if (config.head == HeadKind::kSequenceClassification) {
    info->set_default_score_function(ToProtoScoreFunction(model.default_score_function()));
  }
  if (caps.Supports(ServedTask::kZeroShot)) {
    info->set_entailment_id(*caps.entailment_id);
    info->set_contradiction_id(*caps.contradiction_id);
  }
  if (caps.Supports(ServedTask::kEmbed)) {
    info->set_pooling(model.embedding().pooling == PoolingMode::kCls ? v1::POOLING_CLS
                                                                     : v1::POOLING_MEAN);
    info->set_embedding_dimensions(static_cast<uint32_t>(config.hidden_size));
  }
  info->set_max_input_length(static_cast<uint32_t>(model.max_input_length()));
  info->set_default_truncate(model.entry().truncate);
  const EngineInfo engine = model.engine_info();
  info->set_dtype(ToProtoDataType(engine.dtype));
  info->set_backend(engine.backend == "cuda" ? v1::BACKEND_CUDA : v1::BACKEND_CPU);
  info->set_device(engine.device);
  info->set_tuning_profile(engine.tuning);
  info->set_tokenizer(std::string(TokenizerSourceName(model.tokenizer().source())));
  const BatchingConfig& batching = model.entry().batching;
  v1::BatchingInfo* batching_info = info->mutable_batching();
  batching_info->set_max_batch_tokens(static_cast<uint32_t>(batching.max_batch_tokens));
  batching_info->set_max_batch_sequences(static_cast<uint32_t>(batching.max_batch_sequences));
  batching_info->set_max_queue_delay_us(
      static_cast<uint64_t>(absl::ToInt64Microseconds(batching.max_queue_delay)));
  batching_info->set_max_queued_requests(static_cast<uint32_t>(batching.max_queued_requests));
  const RequestLimitsConfig& limits = model.entry().limits;
  v1::RequestLimits* limits_info = info->mutable_limits();
  limits_info->set_max_inputs(static_cast<uint32_t>(limits.max_inputs));
  limits_info->set_max_candidate_labels(static_cast<uint32_t>(limits.max_candidate_labels));
  limits_info->set_max_sequences(static_cast<uint32_t>(limits.max_sequences));
  limits_info->set_max_text_bytes(static_cast<uint32_t>(limits.max_text_bytes));
  limits_info->set_max_request_tokens(static_cast<uint64_t>(limits.max_request_tokens));
}

}  // namespace

absl::StatusOr<v1::InfoResponse> InferencePipeline::Info(const v1::InfoRequest& request) const {
  v1::InfoResponse response;
  response.set_version(identity_.version);
  response.set_revision(identity_.revision);
  if (!request.model().empty()) {
    absl::StatusOr<ServedModel*> model = catalog_.Resolve(request.model());
    if (!model.ok()) return model.status();
    FillModelInfo(**model, response.add_models());
    return response;
  }
  for (const auto& model : catalog_.models()) FillModelInfo(*model, response.add_models());
  return response;
}

}  // namespace dflash::serving
