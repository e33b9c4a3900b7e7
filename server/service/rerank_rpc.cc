// Rerank: each (query, document) pair is one cross-encoder sequence. The query is tokenized once
// and its tokens are reused in every pair.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/service/inference_pipeline.h"
#include "server/service/label_ranking.h"

namespace dflash::serving {

void InferencePipeline::Rerank(const v1::RerankRequest& request, CallContext call,
                               Responder<v1::RerankResponse> respond) {
  ServedModel* model = BeginRequest("Rerank", request.model(), ServedTask::kRerank, call, respond);
  if (model == nullptr) return;
  absl::Status valid = CheckCount(static_cast<size_t>(request.documents_size()),
                                  model->entry().limits.max_inputs, "documents", "documents");
  absl::StatusOr<ScoreFunction> score_function =
      ResolveScoreFunction(*model, request.score_function());
  if (valid.ok()) valid = score_function.status();
  const size_t documents = static_cast<size_t>(request.documents_size());
  if (valid.ok() && request.return_documents() &&
      (request.top_n() == 0 || request.top_n() >= documents)) {
    // Every document comes back: refuse an answer that could not be sent before computing it.
    size_t bytes = 0;
    for (const std::string& document : request.documents()) {
      bytes += document.size() + kResultEntryBytes;
    }
    valid = CheckResponseBudget(bytes, "documents with return_documents");
  }
  absl::StatusOr<RequestSettings> settings =
      ResolveSettings(*model, request, TruncationStrategy::kOnlySecond);
  if (valid.ok()) valid = settings.status();
  if (!valid.ok()) {
    respond(std::move(valid));
    return;
  }
  const RequestTruncation truncation = settings->truncation;
  const Priority priority = settings->priority;
  auto respond_once = std::make_shared<Responder<v1::RerankResponse>>(std::move(respond));
  pool_.Post([this, &request, call, model, truncation, priority, function = *score_function,
              respond_once]() {
    // The query is checked here, once, with its tokenization.
    absl::StatusOr<TextTokens> query = model->tokenizer().EncodeText(request.query(), "query");
    if (!query.ok()) {
      (*respond_once)(query.status());
      return;
    }
    auto query_tokens = std::make_shared<const TextTokens>(std::move(*query));
    Encoder encode = [&request, model, truncation,
                      query_tokens](int i) -> absl::StatusOr<Sequence> {
      const std::string field = absl::StrCat("documents[", i, "]");
      DFLASH_ASSIGN_OR_RETURN(const TextTokens document,
                              model->tokenizer().EncodeText(request.documents(i), field));
      DFLASH_ASSIGN_OR_RETURN(Encoding encoding, AssembleInput(model->tokenizer(), *query_tokens,
                                                               &document, truncation.pair, field));
      DFLASH_RETURN_IF_ERROR(CheckLength(truncation, encoding.ids.size(), field));
      const bool truncated = encoding.truncated;
      return Sequence{ToSequenceInput(std::move(encoding)), truncated};
    };
    RunSequences(
        model, call, priority, kSequenceLogits, request.documents_size(), std::move(encode),
        [this, &request, call, function, respond_once](absl::StatusOr<ModelRun> run) {
          if (!run.ok()) {
            (*respond_once)(run.status());
            return;
          }
          std::vector<float> scores(run->result.outputs.size());
          for (size_t i = 0; i < scores.size(); ++i) {
            scores[i] = ScoreLogits(run->result.outputs[i].logits, function)[0];
          }
          v1::RerankResponse response;
          for (int i : RankByScore(scores, request.top_n())) {
            v1::RerankResult* result = response.add_results();
            result->set_index(static_cast<uint32_t>(i));
            result->set_score(scores[static_cast<size_t>(i)]);
            if (request.return_documents()) result->set_document(request.documents(i));
            result->set_tokens(static_cast<uint32_t>(run->lengths[static_cast<size_t>(i)]));
            result->set_truncated(run->sequences[static_cast<size_t>(i)].truncated);
          }
          FillMetadata(*run, call, request.request_id(), response.mutable_metadata());
          (*respond_once)(std::move(response));
        });
  });
}

}  // namespace dflash::serving
