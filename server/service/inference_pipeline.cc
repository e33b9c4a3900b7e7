#include "server/service/inference_pipeline.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace dflash::serving {
namespace {

// Inputs per tokenization task: a request with fewer runs on one thread without any hand-off; a
// larger one is spread over the pool (about 20-100 us per input of typical length).
constexpr int kInputsPerTokenizationTask = 8;

}  // namespace

SequenceInput ToSequenceInput(Encoding encoding) {
  SequenceInput input;
  input.ids = std::move(encoding.ids);
  input.type_ids = std::move(encoding.token_type_ids);
  return input;
}

absl::Status WithField(const absl::Status& status, absl::string_view field) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(field, ": ", status.message()));
}

absl::StatusOr<Encoding> AssembleInput(const Tokenizer& tokenizer, const TextTokens& first,
                                       const TextTokens* second,
                                       const TruncationOptions& truncation,
                                       absl::string_view field) {
  absl::StatusOr<Encoding> encoding = tokenizer.Assemble(first, second, truncation);
  if (!encoding.ok()) return WithField(encoding.status(), field);
  return encoding;
}

absl::StatusOr<Encoding> EncodeTextInput(const ServedModel& model, const v1::TextInput& input,
                                         const RequestTruncation& truncation,
                                         absl::string_view field) {
  const Tokenizer& tokenizer = model.tokenizer();
  DFLASH_ASSIGN_OR_RETURN(const TextTokens first,
                          tokenizer.EncodeText(input.text(), absl::StrCat(field, ".text")));
  if (!input.has_text_pair()) {
    return AssembleInput(tokenizer, first, nullptr, truncation.single, field);
  }
  DFLASH_ASSIGN_OR_RETURN(
      const TextTokens second,
      tokenizer.EncodeText(input.text_pair(), absl::StrCat(field, ".text_pair")));
  return AssembleInput(tokenizer, first, &second, truncation.pair, field);
}

absl::StatusOr<Encoding> EncodeSingleText(const ServedModel& model, absl::string_view text,
                                          const RequestTruncation& truncation,
                                          absl::string_view field) {
  DFLASH_ASSIGN_OR_RETURN(const TextTokens tokens, model.tokenizer().EncodeText(text, field));
  return AssembleInput(model.tokenizer(), tokens, nullptr, truncation.single, field);
}

absl::StatusOr<Encoding> EncodeIdInput(const ServedModel& model, absl::Span<const int32_t> ids,
                                       const RequestTruncation& truncation,
                                       absl::string_view field) {
  absl::StatusOr<Encoding> encoding = model.tokenizer().EncodeIds(ids, truncation.single);
  if (!encoding.ok()) return WithField(encoding.status(), field);
  return encoding;
}

namespace {

// Why `model` cannot serve `task`, for FAILED_PRECONDITION.
absl::Status TaskUnsupported(ServedTask task, const ServedModel& model) {
  switch (task) {
    case ServedTask::kClassify:
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", model.id(), "' has no sequence-classification head; Classify needs one"));
    case ServedTask::kZeroShot:
      return absl::FailedPreconditionError(
          absl::StrCat("model '", model.id(),
                       "' cannot do ZeroShot: it needs a sequence classifier whose id2label names "
                       "'entailment' and 'contradiction'"));
    case ServedTask::kRerank:
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", model.id(),
          "' is not a cross-encoder (Rerank needs a sequence classifier with exactly one label; "
          "this one has ",
          model.config().num_labels(), ")"));
    case ServedTask::kTokenClassify:
      return absl::FailedPreconditionError(
          absl::StrCat("model '", model.id(),
                       "' has no token-classification head; TokenClassify needs one "
                       "(DebertaV2ForTokenClassification)"));
    case ServedTask::kEmbed:
      break;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "model '", model.id(),
      "' is not served for embeddings (Embed needs an encoder without a classification head, or "
      "a sentence-transformers pooling config)"));
}

}  // namespace

template <typename Response>
ServedModel* InferencePipeline::BeginRequest(absl::string_view rpc,
                                             absl::string_view requested_model,
                                             std::optional<ServedTask> task,
                                             const CallContext& call,
                                             Responder<Response>& respond) {
  absl::StatusOr<ServedModel*> resolved = catalog_.Resolve(requested_model);
  if (!resolved.ok()) {
    Measured(rpc, "", call, std::move(respond))(resolved.status());
    return nullptr;
  }
  ServedModel* model = *resolved;
  respond = Measured(rpc, model->id(), call, std::move(respond));
  if (task.has_value() && !model->capabilities().Supports(*task)) {
    respond(TaskUnsupported(*task, *model));
    return nullptr;
  }
  return model;
}

absl::Status InferencePipeline::CheckResponseBudget(size_t bytes, absl::string_view what) const {
  if (bytes <= max_response_bytes_) return absl::OkStatus();
  return ResponseTooLarge(absl::StrCat(what, ": the answer would take at least ", bytes,
                                       " bytes, more than the server sends in one message (",
                                       max_response_bytes_,
                                       "; server.max_message_bytes); split the request"));
}

template <typename Response>
Responder<Response> InferencePipeline::Measured(absl::string_view rpc, absl::string_view model,
                                                const CallContext& call,
                                                Responder<Response> respond) {
  return [metrics = metrics_, rpc = std::string(rpc), model = std::string(model),
          protocol = call.protocol, received = call.received, deadline = call.deadline,
          cancelled = call.cancelled, max_bytes = max_response_bytes_,
          respond = std::move(respond)](absl::StatusOr<Response> response) mutable {
    const absl::Time now = absl::Now();
    const absl::Duration total = now - received;
    if (const size_t bytes = response.ok() ? response->ByteSizeLong() : 0; bytes > max_bytes) {
      response = ResponseTooLarge(absl::StrCat(
          "the answer is ", bytes, " bytes, more than the server sends in one message (", max_bytes,
          "; server.max_message_bytes); send fewer or shorter inputs, or set truncate = true"));
    }
    // What the client receives: gRPC has already ended a call whose deadline passed or that was
    // cancelled, whatever the pipeline computed for it.
    if (deadline <= now) {
      response = absl::DeadlineExceededError("the answer was ready after the call's deadline");
    } else if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      response = absl::CancelledError("the call was cancelled before its answer was ready");
    }
    if (metrics != nullptr)
      metrics->RecordRequest(ProtocolName(protocol), rpc, model, response.status().code(), total);
    // The access log names no request content (that is InferenceService's opt-in).
    dflash::Log().debug("{} model={} code={} total_us={}{}{}", rpc, model,
                        StatusCodeName(response.status().code()), DurationMicros(total),
                        response.ok() ? "" : " error=", response.status().message());
    respond(std::move(response));
  };
}

// The RPC files (<rpc>_rpc.cc) use these instantiations.
#define DFLASH_INSTANTIATE_BEGIN_REQUEST(Response)                                            \
  template ServedModel* InferencePipeline::BeginRequest(absl::string_view, absl::string_view, \
                                                        std::optional<ServedTask>,            \
                                                        const CallContext&, Responder<Response>&);
DFLASH_INSTANTIATE_BEGIN_REQUEST(v1::ClassifyResponse)
DFLASH_INSTANTIATE_BEGIN_REQUEST(v1::ZeroShotResponse)
DFLASH_INSTANTIATE_BEGIN_REQUEST(v1::RerankResponse)
DFLASH_INSTANTIATE_BEGIN_REQUEST(v1::EmbedResponse)
DFLASH_INSTANTIATE_BEGIN_REQUEST(v1::TokenizeResponse)
DFLASH_INSTANTIATE_BEGIN_REQUEST(v1::TokenClassifyResponse)
DFLASH_INSTANTIATE_BEGIN_REQUEST(DecodeResponse)
#undef DFLASH_INSTANTIATE_BEGIN_REQUEST

void InferencePipeline::RunSequences(ServedModel* model, const CallContext& call, Priority priority,
                                     uint32_t outputs, int count, Encoder encode,
                                     absl::AnyInvocable<void(absl::StatusOr<ModelRun>)> finish) {
  auto run = std::make_shared<ModelRun>();
  run->model = model;
  run->sequences.resize(static_cast<size_t>(count));
  auto finish_once =
      std::make_shared<absl::AnyInvocable<void(absl::StatusOr<ModelRun>)>>(std::move(finish));
  pool_.Post([this, run, call, priority, outputs, count, encode = std::move(encode),
              finish_once]() mutable {
    const absl::Time start = absl::Now();
    ParallelFor(
        pool_, count, kInputsPerTokenizationTask,
        [run, encode = std::move(encode)](int index) -> absl::Status {
          DFLASH_ASSIGN_OR_RETURN(run->sequences[static_cast<size_t>(index)], encode(index));
          return absl::OkStatus();
        },
        [run, call, priority, outputs, start, finish_once](absl::Status tokenized) {
          if (!tokenized.ok()) {
            (*finish_once)(std::move(tokenized));
            return;
          }
          run->tokenization = absl::Now() - start;
          InferenceRequest request;
          request.outputs = outputs;
          request.priority = priority;
          request.deadline = call.deadline;
          request.cancelled = call.cancelled;
          request.sequences.reserve(run->sequences.size());
          run->lengths.reserve(run->sequences.size());
          int64_t tokens = 0;
          for (Sequence& sequence : run->sequences) {
            run->lengths.push_back(static_cast<int>(sequence.input.ids.size()));
            tokens += static_cast<int64_t>(sequence.input.ids.size());
            if (sequence.truncated) ++run->truncated_count;
            request.sequences.push_back(std::move(sequence.input));
          }
          // Counted in model tokens, known only now: the work one request may ask of the engines.
          if (absl::Status bounded = CheckRequestTokens(*run->model, tokens); !bounded.ok()) {
            (*finish_once)(std::move(bounded));
            return;
          }
          request.done = [run, finish_once](absl::StatusOr<InferenceResult> result) {
            if (!result.ok()) {
              (*finish_once)(result.status());
              return;
            }
            run->result = std::move(*result);
            (*finish_once)(std::move(*run));
          };
          absl::Status submitted = run->model->scheduler().Submit(std::move(request));
          // A refused request is not answered by the batcher (its `done` is dropped unused).
          if (!submitted.ok()) (*finish_once)(std::move(submitted));
        });
  });
}

void InferencePipeline::FillMetadata(const ModelRun& run, const CallContext& call,
                                     absl::string_view request_id,
                                     v1::ResponseMetadata* metadata) const {
  metadata->set_request_id(std::string(request_id));
  metadata->set_model(run.model->id());
  metadata->set_tokens(static_cast<uint64_t>(run.result.tokens));
  metadata->set_tokenization_us(DurationMicros(run.tokenization));
  metadata->set_queue_us(DurationMicros(run.result.queue_time));
  metadata->set_inference_us(DurationMicros(run.result.inference_time));
  metadata->set_total_us(DurationMicros(absl::Now() - call.received));
  if (metrics_ != nullptr) {
    metrics_->RecordStages(run.model->id(), run.tokenization, run.result.queue_time,
                           run.result.inference_time);
    metrics_->RecordTokens(run.model->id(), run.result.tokens, run.truncated_count);
  }
}

}  // namespace dflash::serving
