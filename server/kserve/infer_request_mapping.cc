#include "server/kserve/infer_request_mapping.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/kserve/model_signature.h"
#include "server/kserve/tensor_codec.h"
#include "server/service/request_options.h"

namespace dflash::kserve {
namespace {

using serving::ServedModel;
using serving::ServedTask;
using Parameter = inference::InferParameter;

// The inputs each task reads; the first ones listed are required.
struct TaskInputs {
  std::vector<absl::string_view> required;
  std::vector<absl::string_view> optional;
};
TaskInputs InputsOf(ServedTask task) {
  switch (task) {
    case ServedTask::kClassify:
      return {{kTextInput}, {kTextPairInput}};
    case ServedTask::kZeroShot:
      return {{kTextInput, kCandidateLabelsInput}, {}};
    case ServedTask::kRerank:
      return {{kQueryInput, kTextInput}, {}};
    case ServedTask::kEmbed:
      return {{kTextInput}, {}};
    case ServedTask::kTokenClassify:  // Not carried over KServe v2 (SelectTask never picks it).
      return {};
  }
  return {};
}

absl::string_view DefaultOutput(ServedTask task) {
  switch (task) {
    case ServedTask::kClassify:
      return kScoresOutput;
    case ServedTask::kZeroShot:
      return kCandidateScoresOutput;
    case ServedTask::kRerank:
      return kScoreOutput;
    case ServedTask::kEmbed:
      return kEmbeddingOutput;
    case ServedTask::kTokenClassify:
      return "";
  }
  return "";
}

std::string Names(const std::vector<TensorSpec>& specs) {
  return absl::StrJoin(specs, ", ",
                       [](std::string* out, const TensorSpec& spec) { out->append(spec.name); });
}

// The request options the parameters carry, before they are put into the task's request.
struct Options {
  std::optional<bool> truncate;
  v1::TruncationDirection direction = v1::TRUNCATION_DIRECTION_UNSPECIFIED;
  v1::TruncationStrategy strategy = v1::TRUNCATION_STRATEGY_UNSPECIFIED;
  v1::Priority priority = v1::PRIORITY_UNSPECIFIED;
  v1::ScoreFunction score_function = v1::SCORE_FUNCTION_UNSPECIFIED;
  std::string hypothesis_template;
  bool multi_label = false;
  std::optional<bool> normalize;
  std::optional<absl::Duration> timeout;
};

absl::Status WrongType(absl::string_view key, absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("parameters.", key, ": expected a ", expected, " parameter"));
}

absl::StatusOr<bool> BoolParameter(absl::string_view key, const Parameter& value) {
  if (value.parameter_choice_case() != Parameter::kBoolParam) return WrongType(key, "bool");
  return value.bool_param();
}

// The enum value named by a string parameter, from `names` (lower-case names).
template <typename Enum>
absl::StatusOr<Enum> EnumParameter(absl::string_view key, const Parameter& value,
                                   const std::vector<std::pair<absl::string_view, Enum>>& names) {
  if (value.parameter_choice_case() != Parameter::kStringParam) return WrongType(key, "string");
  std::vector<absl::string_view> known;
  for (const auto& [name, choice] : names) {
    if (value.string_param() == name) return choice;
    known.push_back(name);
  }
  return absl::InvalidArgumentError(absl::StrCat("parameters.", key, ": unknown value '",
                                                 value.string_param(), "'; one of ",
                                                 absl::StrJoin(known, ", ")));
}

// The tasks a parameter applies to (empty: every task).
std::set<ServedTask> ParameterTasks(absl::string_view key) {
  if (key == "truncation_strategy") {
    return {ServedTask::kClassify, ServedTask::kZeroShot, ServedTask::kRerank};
  }
  if (key == "score_function") return {ServedTask::kClassify, ServedTask::kRerank};
  if (key == "hypothesis_template" || key == "multi_label") return {ServedTask::kZeroShot};
  if (key == "normalize") return {ServedTask::kEmbed};
  return {};
}

absl::Status ParseParameter(absl::string_view key, const Parameter& value, ServedTask task,
                            Options& options) {
  const std::set<ServedTask> tasks = ParameterTasks(key);
  if (!tasks.empty() && tasks.count(task) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("parameters.", key, ": not an option of the ",
                                                   serving::ServedTaskName(task), " task"));
  }
  if (key == "truncate") {
    DFLASH_ASSIGN_OR_RETURN(options.truncate, BoolParameter(key, value));
  } else if (key == "truncation_direction") {
    DFLASH_ASSIGN_OR_RETURN(options.direction, EnumParameter<v1::TruncationDirection>(
                                                   key, value,
                                                   {{"right", v1::TRUNCATION_DIRECTION_RIGHT},
                                                    {"left", v1::TRUNCATION_DIRECTION_LEFT}}));
  } else if (key == "truncation_strategy") {
    DFLASH_ASSIGN_OR_RETURN(options.strategy,
                            EnumParameter<v1::TruncationStrategy>(
                                key, value,
                                {{"longest_first", v1::TRUNCATION_STRATEGY_LONGEST_FIRST},
                                 {"only_first", v1::TRUNCATION_STRATEGY_ONLY_FIRST},
                                 {"only_second", v1::TRUNCATION_STRATEGY_ONLY_SECOND}}));
  } else if (key == "priority") {
    DFLASH_ASSIGN_OR_RETURN(options.priority,
                            EnumParameter<v1::Priority>(key, value,
                                                        {{"low", v1::PRIORITY_LOW},
                                                         {"normal", v1::PRIORITY_NORMAL},
                                                         {"high", v1::PRIORITY_HIGH}}));
  } else if (key == "timeout") {
    if (value.parameter_choice_case() != Parameter::kInt64Param &&
        value.parameter_choice_case() != Parameter::kUint64Param) {
      return WrongType(key, "int64");
    }
    const bool negative =
        value.parameter_choice_case() == Parameter::kInt64Param && value.int64_param() < 0;
    if (negative) {
      return absl::InvalidArgumentError("parameters.timeout: must not be negative");
    }
    const uint64_t micros = value.parameter_choice_case() == Parameter::kInt64Param
                                ? static_cast<uint64_t>(value.int64_param())
                                : value.uint64_param();
    // 0 is Triton's "no timeout".
    if (micros > 0) {
      options.timeout = absl::Microseconds(
          static_cast<int64_t>(std::min<uint64_t>(micros, static_cast<uint64_t>(INT64_MAX))));
    }
  } else if (key == "score_function") {
    DFLASH_ASSIGN_OR_RETURN(options.score_function, EnumParameter<v1::ScoreFunction>(
                                                        key, value,
                                                        {{"softmax", v1::SCORE_FUNCTION_SOFTMAX},
                                                         {"sigmoid", v1::SCORE_FUNCTION_SIGMOID},
                                                         {"raw", v1::SCORE_FUNCTION_RAW}}));
  } else if (key == "hypothesis_template") {
    if (value.parameter_choice_case() != Parameter::kStringParam) return WrongType(key, "string");
    options.hypothesis_template = value.string_param();
  } else if (key == "multi_label") {
    DFLASH_ASSIGN_OR_RETURN(options.multi_label, BoolParameter(key, value));
  } else if (key == "normalize") {
    DFLASH_ASSIGN_OR_RETURN(options.normalize, BoolParameter(key, value));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameters.", key,
        ": unknown parameter; known: truncate, truncation_direction, truncation_strategy, "
        "priority, timeout, score_function, hypothesis_template, multi_label, normalize"));
  }
  return absl::OkStatus();
}

// The options every dflash.v1 inference request has.
template <typename Request>
void SetCommon(const inference::ModelInferRequest& infer, const Options& options,
               Request& request) {
  request.set_model(infer.model_name());
  request.set_request_id(infer.id());
  request.set_priority(options.priority);
  if (options.truncate.has_value()) request.set_truncate(*options.truncate);
  request.set_truncation_direction(options.direction);
  if constexpr (requires { request.set_truncation_strategy(options.strategy); }) {
    request.set_truncation_strategy(options.strategy);
  }
}

template <typename Field>
void CopyElements(const std::vector<absl::string_view>& elements, Field& field) {
  field.Reserve(static_cast<int>(elements.size()));
  for (const absl::string_view element : elements) field.Add(std::string(element));
}

// The task the request asks for (see the header), and its outputs in response order.
absl::StatusOr<ServedTask> SelectTask(const ServedModel& model, const ModelSignature& signature,
                                      const inference::ModelInferRequest& request,
                                      const std::map<absl::string_view, int>& inputs) {
  std::optional<ServedTask> by_outputs;
  std::string first_output;
  for (const auto& output : request.outputs()) {
    const TensorSpec* spec = signature.FindOutput(output.name());
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("output '", output.name(), "': model '", model.id(),
                       "' has no such output; its outputs are ", Names(signature.outputs)));
    }
    if (by_outputs.has_value() && *by_outputs != spec->task) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", output.name(), "': computed by the ", serving::ServedTaskName(spec->task),
          " task, output '", first_output, "' by the ", serving::ServedTaskName(*by_outputs),
          " task; ask for the outputs of one task per request"));
    }
    by_outputs = spec->task;
    first_output = output.name();
  }
  if (by_outputs.has_value()) return *by_outputs;
  const serving::ModelCapabilities& caps = model.capabilities();
  if (inputs.count(kQueryInput) > 0) return ServedTask::kRerank;
  if (inputs.count(kCandidateLabelsInput) > 0) return ServedTask::kZeroShot;
  for (const ServedTask task :
       {ServedTask::kClassify, ServedTask::kEmbed, ServedTask::kRerank, ServedTask::kZeroShot}) {
    if (caps.Supports(task)) return task;
  }
  if (caps.Supports(ServedTask::kTokenClassify)) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", model.id(),
                     "' serves token classification, which the KServe v2 front does not carry; "
                     "call dflash.v1 TokenClassify"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("model '", model.id(), "' serves no inference task"));
}

absl::Status CheckShape(const inference::ModelInferRequest& request, int index,
                        const TensorSpec& spec) {
  const auto& shape = request.inputs(index).shape();
  bool matches = shape.size() == static_cast<int>(spec.shape.size());
  for (int i = 0; matches && i < shape.size(); ++i) {
    const int64_t wanted = spec.shape[static_cast<size_t>(i)];
    matches = wanted < 0 ? shape[i] >= 0 : shape[i] == wanted;
  }
  if (matches) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': shape [",
                                                 absl::StrJoin(shape, ","), "], expected [",
                                                 absl::StrJoin(spec.shape, ","), "]"));
}

}  // namespace

absl::StatusOr<InferPlan> PlanInference(const ServedModel& model,
                                        const inference::ModelInferRequest& request) {
  DFLASH_RETURN_IF_ERROR(CheckVersion(model, request.model_version()));
  DFLASH_RETURN_IF_ERROR(CheckInputLayout(request));
  const ModelSignature signature = SignatureOf(model);
  std::map<absl::string_view, int> inputs;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    if (signature.FindInput(input.name()) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", input.name(), "': model '", model.id(),
                       "' has no such input; its inputs are ", Names(signature.inputs)));
    }
    if (!inputs.emplace(input.name(), i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", input.name(), "': sent more than once"));
    }
    if (!input.parameters().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", input.name(), "': parameter '", input.parameters().begin()->first,
                       "' is not supported (inputs take no parameters)"));
    }
  }

  InferPlan plan;
  DFLASH_ASSIGN_OR_RETURN(plan.task, SelectTask(model, signature, request, inputs));
  const absl::string_view task_name = serving::ServedTaskName(plan.task);
  const TaskInputs task_inputs = InputsOf(plan.task);
  std::map<absl::string_view, std::vector<absl::string_view>> elements;
  for (const auto& [name, index] : inputs) {
    const bool required =
        std::count(task_inputs.required.begin(), task_inputs.required.end(), name) > 0;
    const bool optional =
        std::count(task_inputs.optional.begin(), task_inputs.optional.end(), name) > 0;
    if (!required && !optional) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "': not read by the ",
                                                     task_name, " task, which this request is"));
    }
    DFLASH_RETURN_IF_ERROR(CheckShape(request, index, *signature.FindInput(name)));
    DFLASH_ASSIGN_OR_RETURN(elements[name], DecodeBytesInput(request, index));
  }
  for (const absl::string_view name : task_inputs.required) {
    if (elements.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", name, "': missing; the ", task_name, " task needs it"));
    }
  }

  for (const auto& output : request.outputs()) {
    plan.outputs.push_back(output.name());
    for (const auto& [key, value] : output.parameters()) {
      if (key != "binary_data") {
        return absl::InvalidArgumentError(
            absl::StrCat("output '", output.name(), "': parameter '", key, "' is not supported"));
      }
      if (value.parameter_choice_case() != Parameter::kBoolParam) {
        return absl::InvalidArgumentError(
            absl::StrCat("output '", output.name(), "': parameter 'binary_data' must be a bool"));
      }
      plan.raw_outputs = plan.raw_outputs || value.bool_param();
    }
  }
  if (plan.outputs.empty()) plan.outputs.emplace_back(DefaultOutput(plan.task));
  plan.raw_outputs = plan.raw_outputs || request.raw_input_contents_size() > 0;

  Options options;
  for (const auto& [key, value] : request.parameters()) {
    DFLASH_RETURN_IF_ERROR(ParseParameter(key, value, plan.task, options));
  }
  plan.timeout = options.timeout;

  const std::vector<absl::string_view>& texts = elements[kTextInput];
  switch (plan.task) {
    case ServedTask::kClassify: {
      v1::ClassifyRequest classify;
      SetCommon(request, options, classify);
      const auto pairs = elements.find(kTextPairInput);
      if (pairs != elements.end() && pairs->second.size() != texts.size()) {
        return absl::InvalidArgumentError(absl::StrCat("input 'text_pair': ", pairs->second.size(),
                                                       " elements for ", texts.size(),
                                                       " texts; send one second text per text"));
      }
      classify.mutable_inputs()->Reserve(static_cast<int>(texts.size()));
      for (size_t i = 0; i < texts.size(); ++i) {
        v1::TextInput* input = classify.add_inputs();
        input->set_text(std::string(texts[i]));
        if (pairs != elements.end()) input->set_text_pair(std::string(pairs->second[i]));
      }
      // Raw logits from the pipeline; the scores are made here from them (both may be asked for).
      classify.set_score_function(v1::SCORE_FUNCTION_RAW);
      DFLASH_ASSIGN_OR_RETURN(plan.score_function,
                              serving::ResolveScoreFunction(model, options.score_function));
      plan.request = std::move(classify);
      break;
    }
    case ServedTask::kZeroShot: {
      v1::ZeroShotRequest zero_shot;
      SetCommon(request, options, zero_shot);
      CopyElements(texts, *zero_shot.mutable_texts());
      CopyElements(elements[kCandidateLabelsInput], *zero_shot.mutable_candidate_labels());
      zero_shot.set_hypothesis_template(options.hypothesis_template);
      zero_shot.set_multi_label(options.multi_label);
      plan.request = std::move(zero_shot);
      break;
    }
    case ServedTask::kRerank: {
      v1::RerankRequest rerank;
      SetCommon(request, options, rerank);
      rerank.set_query(std::string(elements[kQueryInput].front()));
      CopyElements(texts, *rerank.mutable_documents());
      rerank.set_score_function(options.score_function);
      plan.request = std::move(rerank);
      break;
    }
    case ServedTask::kEmbed: {
      v1::EmbedRequest embed;
      SetCommon(request, options, embed);
      CopyElements(texts, *embed.mutable_inputs());
      if (options.normalize.has_value()) embed.set_normalize(*options.normalize);
      embed.set_encoding(v1::EMBEDDING_ENCODING_FLOAT32);
      plan.request = std::move(embed);
      break;
    }
    case ServedTask::kTokenClassify:
      return absl::FailedPreconditionError("token classification is not carried over KServe v2");
  }
  return plan;
}

}  // namespace dflash::kserve
