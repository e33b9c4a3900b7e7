#include "server/kserve/infer_response_mapping.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/kserve/model_signature.h"
#include "server/kserve/tensor_codec.h"

namespace dflash::kserve {
namespace {

inference::ModelInferResponse Start(const v1::ResponseMetadata& metadata) {
  inference::ModelInferResponse response;
  response.set_model_name(metadata.model());
  response.set_model_version(kModelVersion);
  response.set_id(metadata.request_id());
  auto& parameters = *response.mutable_parameters();
  parameters["tokens"].set_int64_param(static_cast<int64_t>(metadata.tokens()));
  parameters["tokenization_us"].set_int64_param(static_cast<int64_t>(metadata.tokenization_us()));
  parameters["queue_us"].set_int64_param(static_cast<int64_t>(metadata.queue_us()));
  parameters["inference_us"].set_int64_param(static_cast<int64_t>(metadata.inference_us()));
  parameters["total_us"].set_int64_param(static_cast<int64_t>(metadata.total_us()));
  return response;
}

// A [rows, columns] matrix, row-major.
struct Matrix {
  int64_t rows = 0;
  int64_t columns = 0;
  std::vector<float> values;

  Matrix(int64_t rows_in, int64_t columns_in)
      : rows(rows_in), columns(columns_in), values(static_cast<size_t>(rows * columns), 0.0f) {}
  float& at(int64_t row, int64_t column) {
    return values[static_cast<size_t>(row * columns + column)];
  }
};

void AddMatrix(absl::string_view name, const Matrix& matrix, bool raw,
               inference::ModelInferResponse& response) {
  const int64_t shape[] = {matrix.rows, matrix.columns};
  AddFp32Output(name, shape, matrix.values, raw, response);
}

}  // namespace

inference::ModelInferResponse ClassifyAnswer(const InferPlan& plan, int num_labels,
                                             const v1::ClassifyResponse& answer) {
  inference::ModelInferResponse response = Start(answer.metadata());
  const int64_t rows = answer.results_size();
  Matrix logits(rows, num_labels);
  for (int64_t i = 0; i < rows; ++i) {
    for (const v1::LabelScore& label : answer.results(static_cast<int>(i)).scores()) {
      if (label.id() >= 0 && label.id() < num_labels) logits.at(i, label.id()) = label.score();
    }
  }
  for (const std::string& name : plan.outputs) {
    if (name == kLogitsOutput) {
      AddMatrix(name, logits, plan.raw_outputs, response);
      continue;
    }
    Matrix scores(rows, num_labels);
    for (int64_t i = 0; i < rows; ++i) {
      const std::span<const float> row(logits.values.data() + i * num_labels,
                                       static_cast<size_t>(num_labels));
      const std::vector<float> scored = ScoreLogits(row, plan.score_function);
      std::copy(scored.begin(), scored.end(), &scores.at(i, 0));
    }
    AddMatrix(name, scores, plan.raw_outputs, response);
  }
  return response;
}

inference::ModelInferResponse ZeroShotAnswer(const InferPlan& plan,
                                             const v1::ZeroShotResponse& answer) {
  inference::ModelInferResponse response = Start(answer.metadata());
  const auto& request = std::get<v1::ZeroShotRequest>(plan.request);
  const int64_t candidates = request.candidate_labels_size();
  Matrix scores(answer.results_size(), candidates);
  for (int64_t i = 0; i < scores.rows; ++i) {
    for (const v1::LabelScore& label : answer.results(static_cast<int>(i)).scores()) {
      if (label.id() >= 0 && label.id() < candidates) scores.at(i, label.id()) = label.score();
    }
  }
  for (const std::string& name : plan.outputs) AddMatrix(name, scores, plan.raw_outputs, response);
  return response;
}

inference::ModelInferResponse RerankAnswer(const InferPlan& plan,
                                           const v1::RerankResponse& answer) {
  inference::ModelInferResponse response = Start(answer.metadata());
  const auto& request = std::get<v1::RerankRequest>(plan.request);
  std::vector<float> scores(static_cast<size_t>(request.documents_size()), 0.0f);
  for (const v1::RerankResult& result : answer.results()) {
    if (result.index() < scores.size()) scores[result.index()] = result.score();
  }
  const int64_t shape[] = {static_cast<int64_t>(scores.size())};
  for (const std::string& name : plan.outputs) {
    AddFp32Output(name, shape, scores, plan.raw_outputs, response);
  }
  return response;
}

inference::ModelInferResponse EmbedAnswer(const InferPlan& plan, const v1::EmbedResponse& answer) {
  inference::ModelInferResponse response = Start(answer.metadata());
  const int64_t dimensions =
      answer.embeddings().empty() ? 0 : answer.embeddings(0).float32_values_size();
  Matrix embeddings(answer.embeddings_size(), dimensions);
  for (int64_t i = 0; i < embeddings.rows; ++i) {
    const auto& values = answer.embeddings(static_cast<int>(i)).float32_values();
    std::copy_n(values.begin(), std::min<int64_t>(values.size(), dimensions), &embeddings.at(i, 0));
  }
  for (const std::string& name : plan.outputs) {
    AddMatrix(name, embeddings, plan.raw_outputs, response);
  }
  return response;
}

absl::Status WithTensorNames(const InferPlan& plan, const absl::Status& status) {
  if (status.ok()) return status;
  std::string message;
  switch (plan.task) {
    case serving::ServedTask::kClassify:
      // "inputs[3].text_pair" -> "text_pair[3]"; "inputs[3].text" and "inputs[3]" -> "text[3]".
      message = std::string(status.message());
      for (size_t at = message.find("inputs["); at != std::string::npos;
           at = message.find("inputs[", at + 1)) {
        const size_t close = message.find(']', at);
        if (close == std::string::npos) break;
        const std::string index = message.substr(at + 6, close - at - 5);  // "[3]"
        size_t end = close + 1;
        std::string name = "text";
        if (message.compare(end, 10, ".text_pair") == 0) {
          name = "text_pair";
          end += 10;
        } else if (message.compare(end, 5, ".text") == 0) {
          end += 5;
        }
        message.replace(at, end - at, name + index);
      }
      break;
    case serving::ServedTask::kZeroShot:
      message = absl::StrReplaceAll(status.message(), {{"texts[", "text["}});
      break;
    case serving::ServedTask::kRerank:
      message = absl::StrReplaceAll(status.message(), {{"documents[", "text["}});
      break;
    case serving::ServedTask::kEmbed:
      message = absl::StrReplaceAll(status.message(), {{"inputs[", "text["}});
      break;
    case serving::ServedTask::kTokenClassify:
      message = std::string(status.message());
      break;
  }
  absl::Status renamed(status.code(), message);
  status.ForEachPayload([&renamed](absl::string_view url, const absl::Cord& payload) {
    renamed.SetPayload(url, payload);
  });
  return renamed;
}

}  // namespace dflash::kserve
