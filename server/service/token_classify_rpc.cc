// TokenClassify: each text is one sequence; the engine returns logits for every token, which
// become label scores (softmax) and then entities by the request's aggregation strategy
// (server/scoring/token_aggregation.h).
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/scoring/token_aggregation.h"
#include "server/service/inference_pipeline.h"

namespace dflash::serving {
namespace {

absl::StatusOr<AggregationStrategy> ResolveAggregation(v1::AggregationStrategy requested) {
  switch (requested) {
    case v1::AGGREGATION_STRATEGY_UNSPECIFIED:
    case v1::AGGREGATION_STRATEGY_NONE:
      return AggregationStrategy::kNone;
    case v1::AGGREGATION_STRATEGY_SIMPLE:
      return AggregationStrategy::kSimple;
    case v1::AGGREGATION_STRATEGY_FIRST:
      return AggregationStrategy::kFirst;
    case v1::AGGREGATION_STRATEGY_AVERAGE:
      return AggregationStrategy::kAverage;
    case v1::AGGREGATION_STRATEGY_MAX:
      return AggregationStrategy::kMax;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("aggregation: unknown value ", static_cast<int>(requested)));
}

absl::StatusOr<std::vector<std::string>> ResolveIgnoreLabels(
    const v1::TokenClassifyRequest& request) {
  if (request.keep_all_labels()) {
    if (request.ignore_labels_size() > 0) {
      return absl::InvalidArgumentError("ignore_labels: must be empty when keep_all_labels is set");
    }
    return std::vector<std::string>{};
  }
  if (request.ignore_labels_size() == 0) return std::vector<std::string>{"O"};
  return std::vector<std::string>(request.ignore_labels().begin(), request.ignore_labels().end());
}

// Code points before each byte offset of `text` (entry i: those in text[0, i)), for the
// entities' character offsets.
std::vector<uint32_t> CodePointOffsets(absl::string_view text) {
  std::vector<uint32_t> offsets(text.size() + 1, 0);
  uint32_t count = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    offsets[i] = count;
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++count;
  }
  offsets[text.size()] = count;
  return offsets;
}

// The entities of one text from its encoding and the engine's token logits.
void FillTokenClassification(const Tokenizer& tokenizer, absl::string_view text,
                             const Encoding& encoding, std::span<const float> logits,
                             std::span<const std::string> labels, AggregationStrategy strategy,
                             std::span<const std::string> ignore_labels,
                             v1::TokenClassification* out) {
  const size_t width = labels.size();
  std::vector<ScoredToken> tokens;
  tokens.reserve(encoding.ids.size());
  for (size_t t = 0; t < encoding.ids.size(); ++t) {
    if (encoding.sources[t] == TokenSource::kTemplate) continue;
    ScoredToken token;
    token.index = static_cast<int>(t);
    token.piece = std::string(tokenizer.TokenText(encoding.ids[t]));
    token.unknown = encoding.ids[t] == tokenizer.unk_id();
    token.begin = encoding.offsets[t].begin;
    token.end = encoding.offsets[t].end;
    token.probabilities = ScoreLogits(logits.subspan(t * width, width), ScoreFunction::kSoftmax);
    tokens.push_back(std::move(token));
  }
  const std::vector<uint32_t> code_points = CodePointOffsets(text);
  for (TokenEntity& entity : AggregateTokens(text, tokens, labels, strategy, ignore_labels)) {
    v1::TokenEntity* result = out->add_entities();
    result->set_label(std::move(entity.label));
    result->set_score(entity.score);
    result->set_word(std::move(entity.word));
    result->set_start(entity.begin);
    result->set_end(entity.end);
    result->set_char_start(code_points[std::min<size_t>(entity.begin, text.size())]);
    result->set_char_end(code_points[std::min<size_t>(entity.end, text.size())]);
    if (entity.label_id >= 0) result->set_label_id(entity.label_id);
    if (entity.token_index >= 0) result->set_token_index(static_cast<uint32_t>(entity.token_index));
  }
}

}  // namespace

void InferencePipeline::TokenClassify(const v1::TokenClassifyRequest& request, CallContext call,
                                      Responder<v1::TokenClassifyResponse> respond) {
  ServedModel* model =
      BeginRequest("TokenClassify", request.model(), ServedTask::kTokenClassify, call, respond);
  if (model == nullptr) return;
  absl::StatusOr<AggregationStrategy> strategy = ResolveAggregation(request.aggregation());
  absl::StatusOr<std::vector<std::string>> ignore_labels = ResolveIgnoreLabels(request);
  absl::StatusOr<RequestSettings> settings =
      ResolveSettings(*model, request, TruncationStrategy::kLongestFirst);
  for (const absl::Status& valid :
       {CheckCount(static_cast<size_t>(request.inputs_size()), model->entry().limits.max_inputs,
                   "inputs", "inputs"),
        strategy.status(), ignore_labels.status(), settings.status()}) {
    if (!valid.ok()) {
      respond(valid);
      return;
    }
  }
  const RequestTruncation truncation = settings->truncation;
  // The encodings' offsets and sources outlive the run: the entities need them.
  auto encodings = std::make_shared<std::vector<Encoding>>(request.inputs_size());
  Encoder encode = [&request, model, truncation, encodings](int i) -> absl::StatusOr<Sequence> {
    const std::string field = absl::StrCat("inputs[", i, "]");
    absl::StatusOr<Encoding> encoding =
        EncodeSingleText(*model, request.inputs(i), truncation, field);
    if (!encoding.ok()) return encoding.status();
    DFLASH_RETURN_IF_ERROR(CheckLength(truncation, encoding->ids.size(), field));
    Encoding& kept = (*encodings)[static_cast<size_t>(i)];
    kept = *std::move(encoding);
    SequenceInput input{kept.ids, kept.token_type_ids};
    return Sequence{std::move(input), kept.truncated};
  };
  RunSequences(
      model, call, settings->priority, kTokenLogits, request.inputs_size(), std::move(encode),
      [this, &request, call, encodings, strategy = *strategy,
       ignore_labels = *std::move(ignore_labels),
       respond = std::move(respond)](absl::StatusOr<ModelRun> run) mutable {
        if (!run.ok()) {
          respond(run.status());
          return;
        }
        const ServedModel& served = *run->model;
        v1::TokenClassifyResponse response;
        size_t bytes = 0;
        for (size_t i = 0; i < run->result.outputs.size(); ++i) {
          v1::TokenClassification* result = response.add_results();
          FillTokenClassification(served.tokenizer(), request.inputs(static_cast<int>(i)),
                                  (*encodings)[i], run->result.outputs[i].token_logits,
                                  served.config().id2label, strategy, ignore_labels, result);
          result->set_tokens(static_cast<uint32_t>(run->lengths[i]));
          result->set_truncated(run->sequences[i].truncated);
          // Stop building an answer that could not be sent.
          bytes += result->ByteSizeLong() + kResultEntryBytes;
          if (absl::Status budget = CheckResponseBudget(bytes, "inputs"); !budget.ok()) {
            respond(std::move(budget));
            return;
          }
        }
        FillMetadata(*run, call, request.request_id(), response.mutable_metadata());
        respond(std::move(response));
      });
}

}  // namespace dflash::serving
