// Embed: each text is one sequence; the engine pools it (CLS or mean, from the model's config)
// and the server truncates to `dimensions`, then L2-normalizes, then encodes.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/model/half_precision.h"
#include "server/service/inference_pipeline.h"

namespace dflash::serving {
namespace {

// Fills `out` from the first `dimensions` values of `pooled`, normalized when asked (a zero
// vector stays zero rather than becoming NaN).
void FillEmbedding(const std::vector<float>& pooled, size_t dimensions, bool normalize,
                   v1::EmbeddingEncoding encoding, v1::Embedding* out) {
  double squares = 0;
  for (size_t d = 0; d < dimensions; ++d) squares += double{pooled[d]} * pooled[d];
  const double scale = normalize && squares > 0 ? 1.0 / std::sqrt(squares) : 1.0;
  out->set_dimensions(static_cast<uint32_t>(dimensions));
  if (encoding == v1::EMBEDDING_ENCODING_FLOAT16) {
    std::string bytes(2 * dimensions, '\0');
    for (size_t d = 0; d < dimensions; ++d) {
      const uint16_t half = FloatToHalf(static_cast<float>(pooled[d] * scale));
      bytes[2 * d] = static_cast<char>(half & 0xff);  // Little-endian, as the API specifies.
      bytes[2 * d + 1] = static_cast<char>(half >> 8);
    }
    out->set_float16_bytes(std::move(bytes));
    return;
  }
  auto* values = out->mutable_float32_values();
  values->Reserve(static_cast<int>(dimensions));
  for (size_t d = 0; d < dimensions; ++d) values->Add(static_cast<float>(pooled[d] * scale));
}

}  // namespace

void InferencePipeline::Embed(const v1::EmbedRequest& request, CallContext call,
                              Responder<v1::EmbedResponse> respond) {
  static const TokenIdInputs kNoTokenIds;
  EmbedWithIds(request, kNoTokenIds, std::move(call), std::move(respond));
}

void InferencePipeline::EmbedWithIds(const v1::EmbedRequest& request,
                                     const TokenIdInputs& token_ids, CallContext call,
                                     Responder<v1::EmbedResponse> respond) {
  ServedModel* model = BeginRequest("Embed", request.model(), ServedTask::kEmbed, call, respond);
  if (model == nullptr) return;
  const size_t hidden = static_cast<size_t>(model->config().hidden_size);
  absl::Status valid = CheckCount(static_cast<size_t>(request.inputs_size()),
                                  model->entry().limits.max_inputs, "inputs", "inputs");
  if (valid.ok() && request.dimensions() > hidden) {
    valid = absl::InvalidArgumentError(absl::StrCat(
        "dimensions: ", request.dimensions(), " is more than the model's embedding size ", hidden));
  }
  if (valid.ok() && request.encoding() != v1::EMBEDDING_ENCODING_UNSPECIFIED &&
      request.encoding() != v1::EMBEDDING_ENCODING_FLOAT32 &&
      request.encoding() != v1::EMBEDDING_ENCODING_FLOAT16) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("encoding: unknown value ", static_cast<int>(request.encoding())));
  }
  if (valid.ok() && !token_ids.empty() &&
      token_ids.size() != static_cast<size_t>(request.inputs_size())) {
    valid = absl::InternalError(absl::StrCat("token-id inputs: ", token_ids.size(), " for ",
                                             request.inputs_size(), " inputs"));
  }
  absl::StatusOr<RequestSettings> settings =
      ResolveSettings(*model, request, TruncationStrategy::kLongestFirst);
  if (valid.ok()) valid = settings.status();
  if (!valid.ok()) {
    respond(std::move(valid));
    return;
  }
  const RequestTruncation truncation = settings->truncation;
  Encoder encode = [&request, &token_ids, model, truncation](int i) -> absl::StatusOr<Sequence> {
    const std::string field = absl::StrCat("inputs[", i, "]");
    absl::StatusOr<Encoding> encoding;
    if (!token_ids.empty() && token_ids[static_cast<size_t>(i)].has_value()) {
      encoding = EncodeIdInput(*model, *token_ids[static_cast<size_t>(i)], truncation, field);
    } else {
      encoding = EncodeSingleText(*model, request.inputs(i), truncation, field);
    }
    if (!encoding.ok()) return encoding.status();
    DFLASH_RETURN_IF_ERROR(CheckLength(truncation, encoding->ids.size(), field));
    const bool truncated = encoding->truncated;
    return Sequence{ToSequenceInput(std::move(*encoding)), truncated};
  };
  const size_t dimensions = request.dimensions() > 0 ? request.dimensions() : hidden;
  RunSequences(model, call, settings->priority, kEmbeddings, request.inputs_size(),
               std::move(encode),
               [this, &request, call, dimensions,
                respond = std::move(respond)](absl::StatusOr<ModelRun> run) mutable {
                 if (!run.ok()) {
                   respond(run.status());
                   return;
                 }
                 const bool normalize = !request.has_normalize() || request.normalize();
                 v1::EmbedResponse response;
                 for (size_t i = 0; i < run->result.outputs.size(); ++i) {
                   v1::Embedding* embedding = response.add_embeddings();
                   FillEmbedding(run->result.outputs[i].embedding, dimensions, normalize,
                                 request.encoding(), embedding);
                   embedding->set_tokens(static_cast<uint32_t>(run->lengths[i]));
                   embedding->set_truncated(run->sequences[i].truncated);
                 }
                 FillMetadata(*run, call, request.request_id(), response.mutable_metadata());
                 respond(std::move(response));
               });
}

}  // namespace dflash::serving
