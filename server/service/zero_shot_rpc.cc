// ZeroShot: every (text, hypothesis(label)) pair is one NLI sequence. Scores follow the
// transformers zero-shot pipeline: single-label, softmax of the entailment logits over the
// candidate labels; multi-label, per label softmax over (contradiction, entailment) taken at
// entailment.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "server/service/inference_pipeline.h"
#include "server/service/label_ranking.h"

namespace dflash::serving {
namespace {

constexpr absl::string_view kDefaultHypothesisTemplate = "This example is {}.";

absl::StatusOr<std::string> HypothesisTemplate(absl::string_view requested) {
  if (requested.empty()) return std::string(kDefaultHypothesisTemplate);
  size_t count = 0;
  for (size_t at = requested.find("{}"); at != absl::string_view::npos;
       at = requested.find("{}", at + 2)) {
    ++count;
  }
  if (count != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hypothesis_template: must contain \"{}\" exactly once (found ", count, " times)"));
  }
  return std::string(requested);
}

// Scores of one text's candidates from the logits of its pairs.
std::vector<float> ZeroShotScores(const std::vector<const std::vector<float>*>& logits,
                                  int entailment, int contradiction, bool multi_label) {
  std::vector<float> scores(logits.size());
  if (multi_label) {
    for (size_t l = 0; l < logits.size(); ++l) {
      const double e = (*logits[l])[static_cast<size_t>(entailment)];
      const double c = (*logits[l])[static_cast<size_t>(contradiction)];
      scores[l] = static_cast<float>(1.0 / (1.0 + std::exp(c - e)));
    }
    return scores;
  }
  double max_logit = -INFINITY;
  for (const auto* pair : logits) {
    max_logit = std::max(max_logit, static_cast<double>((*pair)[static_cast<size_t>(entailment)]));
  }
  double sum = 0;
  std::vector<double> exps(logits.size());
  for (size_t l = 0; l < logits.size(); ++l) {
    exps[l] = std::exp((*logits[l])[static_cast<size_t>(entailment)] - max_logit);
    sum += exps[l];
  }
  for (size_t l = 0; l < logits.size(); ++l) scores[l] = static_cast<float>(exps[l] / sum);
  return scores;
}

}  // namespace

void InferencePipeline::ZeroShot(const v1::ZeroShotRequest& request, CallContext call,
                                 Responder<v1::ZeroShotResponse> respond) {
  ServedModel* model =
      BeginRequest("ZeroShot", request.model(), ServedTask::kZeroShot, call, respond);
  if (model == nullptr) return;
  const ModelCapabilities& caps = model->capabilities();
  const RequestLimitsConfig& limits = model->entry().limits;
  const size_t texts = static_cast<size_t>(request.texts_size());
  const size_t labels = static_cast<size_t>(request.candidate_labels_size());
  absl::Status valid = CheckCount(texts, limits.max_inputs, "texts", "texts");
  if (valid.ok()) {
    valid = CheckCount(labels, limits.max_candidate_labels, "candidate_labels", "labels");
  }
  if (valid.ok() && limits.max_sequences > 0 &&
      texts * labels > static_cast<size_t>(limits.max_sequences)) {
    valid = absl::InvalidArgumentError(absl::StrCat(
        "texts x candidate_labels: ", texts * labels, " pairs, more than the server's limit of ",
        limits.max_sequences, " sequences per request; split the request"));
  }
  if (valid.ok() && !request.hypothesis_template().empty()) {
    valid = model->tokenizer().CheckText(request.hypothesis_template(), "hypothesis_template");
  }
  absl::StatusOr<std::string> hypothesis_template =
      valid.ok() ? HypothesisTemplate(request.hypothesis_template()) : std::string();
  if (valid.ok()) valid = hypothesis_template.status();
  if (valid.ok()) {
    // Every text's result names every label again: refuse an answer that could not be sent
    // before computing it.
    size_t label_bytes = 0;
    for (const std::string& label : request.candidate_labels()) {
      label_bytes += label.size() + kResultEntryBytes;
    }
    valid = CheckResponseBudget(texts * label_bytes, "texts x candidate_labels");
  }
  absl::StatusOr<RequestSettings> settings =
      ResolveSettings(*model, request, TruncationStrategy::kOnlyFirst);
  if (valid.ok()) valid = settings.status();
  if (!valid.ok()) {
    respond(std::move(valid));
    return;
  }
  const RequestTruncation truncation = settings->truncation;
  const Priority priority = settings->priority;

  // Each text and each hypothesis is tokenized once, on the pool (never on the transport's
  // thread: a request may carry megabytes of text); the texts x labels pairs are then assembled
  // from those tokens.
  struct Tokenized {
    std::vector<TextTokens> texts;
    std::vector<TextTokens> hypotheses;
  };
  auto tokenized = std::make_shared<Tokenized>();
  tokenized->texts.resize(texts);
  tokenized->hypotheses.resize(labels);
  const int entailment = *caps.entailment_id;
  const int contradiction = *caps.contradiction_id;
  auto respond_once = std::make_shared<Responder<v1::ZeroShotResponse>>(std::move(respond));
  pool_.Post([this, &request, call, model, truncation, priority, tokenized, texts, labels,
              entailment, contradiction, respond_once,
              hypothesis_template =
                  std::make_shared<const std::string>(std::move(*hypothesis_template))]() {
    // Tasks [0, texts) tokenize the texts, [texts, texts + labels) the hypotheses.
    ParallelFor(
        pool_, static_cast<int>(texts + labels), 8,
        [&request, model, tokenized, texts, hypothesis_template](int task) -> absl::Status {
          const size_t index = static_cast<size_t>(task);
          if (index < texts) {
            const std::string field = absl::StrCat("texts[", task, "]");
            DFLASH_ASSIGN_OR_RETURN(tokenized->texts[index],
                                    model->tokenizer().EncodeText(request.texts(task), field));
            return absl::OkStatus();
          }
          const int l = static_cast<int>(index - texts);
          const std::string field = absl::StrCat("candidate_labels[", l, "]");
          const std::string& label = request.candidate_labels(l);
          if (label.empty()) return absl::InvalidArgumentError(field + ": must not be empty");
          DFLASH_RETURN_IF_ERROR(model->tokenizer().CheckText(label, field));
          // The hypothesis is the template with the label in it: a size error names both.
          DFLASH_ASSIGN_OR_RETURN(tokenized->hypotheses[static_cast<size_t>(l)],
                                  model->tokenizer().EncodeText(
                                      absl::StrReplaceAll(*hypothesis_template, {{"{}", label}}),
                                      absl::StrCat("hypothesis_template with ", field)));
          return absl::OkStatus();
        },
        [this, &request, call, model, truncation, priority, tokenized, texts, labels, entailment,
         contradiction, respond_once](absl::Status status) {
          if (!status.ok()) {
            (*respond_once)(std::move(status));
            return;
          }
          Encoder assemble = [model, truncation, tokenized,
                              labels](int index) -> absl::StatusOr<Sequence> {
            const size_t t = static_cast<size_t>(index) / labels;
            const size_t l = static_cast<size_t>(index) % labels;
            const std::string field = absl::StrCat("texts[", t, "] with candidate_labels[", l, "]");
            DFLASH_ASSIGN_OR_RETURN(
                Encoding encoding,
                AssembleInput(model->tokenizer(), tokenized->texts[t], &tokenized->hypotheses[l],
                              truncation.pair, field));
            DFLASH_RETURN_IF_ERROR(CheckLength(truncation, encoding.ids.size(), field));
            const bool truncated = encoding.truncated;
            return Sequence{ToSequenceInput(std::move(encoding)), truncated};
          };
          RunSequences(
              model, call, priority, kSequenceLogits, static_cast<int>(texts * labels),
              std::move(assemble),
              [this, &request, call, texts, labels, entailment, contradiction,
               respond_once](absl::StatusOr<ModelRun> run) {
                if (!run.ok()) {
                  (*respond_once)(run.status());
                  return;
                }
                v1::ZeroShotResponse response;
                for (size_t t = 0; t < texts; ++t) {
                  std::vector<const std::vector<float>*> logits(labels);
                  uint32_t tokens = 0;
                  bool truncated = false;
                  for (size_t l = 0; l < labels; ++l) {
                    const size_t s = t * labels + l;
                    logits[l] = &run->result.outputs[s].logits;
                    tokens += static_cast<uint32_t>(run->lengths[s]);
                    truncated = truncated || run->sequences[s].truncated;
                  }
                  const std::vector<float> scores =
                      ZeroShotScores(logits, entailment, contradiction, request.multi_label());
                  v1::ZeroShotResult* result = response.add_results();
                  for (int l : RankByScore(scores, request.top_k())) {
                    v1::LabelScore* score = result->add_scores();
                    score->set_id(l);
                    score->set_label(request.candidate_labels(l));
                    score->set_score(scores[static_cast<size_t>(l)]);
                  }
                  result->set_tokens(tokens);
                  result->set_truncated(truncated);
                }
                FillMetadata(*run, call, request.request_id(), response.mutable_metadata());
                (*respond_once)(std::move(response));
              });
        });
  });
}

}  // namespace dflash::serving
