#include "server/kserve/kserve_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/kserve/infer_request_mapping.h"
#include "server/kserve/infer_response_mapping.h"
#include "server/kserve/model_signature.h"
#include "server/service/unary_call.h"

namespace dflash::kserve {
namespace {

using serving::CallContext;
using serving::Protocol;
using serving::Responder;
using serving::ServedModel;

constexpr char kServerName[] = "dflash-server";

}  // namespace

absl::Status KserveService::Authenticate(const Context& context) const {
  if (authenticator_ == nullptr) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto entry = metadata.find(authenticator_->header());
  if (entry == metadata.end()) return authenticator_->Check(nullptr);
  const std::string presented(entry->second.data(), entry->second.size());
  return authenticator_->Check(&presented);
}

void KserveService::Record(absl::string_view rpc, absl::string_view model, absl::StatusCode code,
                           absl::Duration total) const {
  if (metrics_ != nullptr) {
    metrics_->RecordRequest(serving::ProtocolName(Protocol::kKserveGrpc), rpc, model, code, total);
  }
}

template <typename Request, typename Response, typename Run>
KserveService::Reactor* KserveService::Unary(absl::string_view rpc, bool guarded, Context* context,
                                             const Bytes& request, Bytes* response, Run run) {
  auto* call =
      new serving::UnaryCall<Request, Response>(context, response, guarded ? &admission_ : nullptr);
  // Authentication first: an unauthenticated caller's bytes are not even parsed.
  absl::Status admitted = guarded ? Authenticate(*context) : absl::OkStatus();
  if (admitted.ok()) admitted = call->ParseRequest(request);
  if (admitted.ok() && guarded) admitted = admission_.Admit();
  if (!admitted.ok()) {
    Record(rpc, "", admitted.code(), absl::ZeroDuration());
    call->Refuse(admitted);
    return call;
  }
  CallContext call_context = call->Context();
  call_context.protocol = Protocol::kKserveGrpc;
  run(call->request(), std::move(call_context), call->MakeResponder());
  return call;
}

KserveService::Reactor* KserveService::ServerLive(Context* context, const Bytes* request,
                                                  Bytes* response) {
  return Unary<inference::ServerLiveRequest, inference::ServerLiveResponse>(
      "ServerLive", /*guarded=*/false, context, *request, response,
      [](const inference::ServerLiveRequest&, CallContext, auto respond) {
        inference::ServerLiveResponse live;
        live.set_live(true);
        respond(std::move(live));
      });
}

KserveService::Reactor* KserveService::ServerReady(Context* context, const Bytes* request,
                                                   Bytes* response) {
  return Unary<inference::ServerReadyRequest, inference::ServerReadyResponse>(
      "ServerReady", /*guarded=*/false, context, *request, response,
      [this](const inference::ServerReadyRequest&, CallContext, auto respond) {
        inference::ServerReadyResponse ready;
        ready.set_ready(!admission_.draining());
        respond(std::move(ready));
      });
}

KserveService::Reactor* KserveService::ModelReady(Context* context, const Bytes* request,
                                                  Bytes* response) {
  return Unary<inference::ModelReadyRequest, inference::ModelReadyResponse>(
      "ModelReady", /*guarded=*/false, context, *request, response,
      [this](const inference::ModelReadyRequest& parsed, CallContext, auto respond) {
        // An unknown model or version is not ready (a probe's answer, not an error). Models are
        // loaded before the server listens, so a served one is ready until the drain.
        absl::StatusOr<ServedModel*> model = pipeline_.catalog().Resolve(parsed.name());
        inference::ModelReadyResponse ready;
        ready.set_ready(!parsed.name().empty() && model.ok() &&
                        CheckVersion(**model, parsed.version()).ok() && !admission_.draining());
        respond(std::move(ready));
      });
}

KserveService::Reactor* KserveService::ServerMetadata(Context* context, const Bytes* request,
                                                      Bytes* response) {
  return Unary<inference::ServerMetadataRequest, inference::ServerMetadataResponse>(
      "ServerMetadata", /*guarded=*/true, context, *request, response,
      [this](const inference::ServerMetadataRequest&, CallContext call, auto respond) {
        inference::ServerMetadataResponse metadata;
        metadata.set_name(kServerName);
        metadata.set_version(identity_.version);
        Record("ServerMetadata", "", absl::StatusCode::kOk, absl::Now() - call.received);
        respond(std::move(metadata));
      });
}

KserveService::Reactor* KserveService::ModelMetadata(Context* context, const Bytes* request,
                                                     Bytes* response) {
  return Unary<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
      "ModelMetadata", /*guarded=*/true, context, *request, response,
      [this](const inference::ModelMetadataRequest& parsed, CallContext call, auto respond) {
        absl::StatusOr<ServedModel*> model = pipeline_.catalog().Resolve(parsed.name());
        absl::Status status = model.status();
        if (status.ok()) status = CheckVersion(**model, parsed.version());
        // The model label only for a served id: a client's string must not become a label.
        Record("ModelMetadata", status.ok() ? (*model)->id() : "", status.code(),
               absl::Now() - call.received);
        if (!status.ok()) {
          respond(status);
          return;
        }
        respond(ModelMetadataOf(**model));
      });
}

KserveService::Reactor* KserveService::ModelConfig(Context* context, const Bytes* request,
                                                   Bytes* response) {
  return Unary<inference::ModelConfigRequest, inference::ModelConfigResponse>(
      "ModelConfig", /*guarded=*/true, context, *request, response,
      [this](const inference::ModelConfigRequest& parsed, CallContext call, auto respond) {
        absl::StatusOr<ServedModel*> model = pipeline_.catalog().Resolve(parsed.name());
        absl::Status status = model.status();
        if (status.ok()) status = CheckVersion(**model, parsed.version());
        Record("ModelConfig", status.ok() ? (*model)->id() : "", status.code(),
               absl::Now() - call.received);
        if (!status.ok()) {
          respond(status);
          return;
        }
        respond(ModelConfigOf(**model));
      });
}

KserveService::Reactor* KserveService::ModelInfer(Context* context, const Bytes* request,
                                                  Bytes* response) {
  return Unary<inference::ModelInferRequest, inference::ModelInferResponse>(
      "ModelInfer", /*guarded=*/true, context, *request, response,
      [this](const inference::ModelInferRequest& parsed, CallContext call,
             Responder<inference::ModelInferResponse> respond) {
        absl::StatusOr<ServedModel*> model = pipeline_.catalog().Resolve(parsed.model_name());
        absl::StatusOr<InferPlan> planned =
            model.ok() ? PlanInference(**model, parsed) : absl::StatusOr<InferPlan>(model.status());
        if (!planned.ok()) {
          // Refused before the pipeline, which counts every request it receives.
          Record("ModelInfer", model.ok() ? (*model)->id() : "", planned.status().code(),
                 absl::Now() - call.received);
          respond(planned.status());
          return;
        }
        if (planned->timeout.has_value()) {
          call.deadline = std::min(call.deadline, call.received + *planned->timeout);
        }
        // The plan holds the dflash.v1 request, which the pipeline reads until it answers.
        auto plan = std::make_shared<const InferPlan>(std::move(*planned));
        auto answer = [plan, respond = std::move(respond)](auto result, auto to_response) mutable {
          if (!result.ok()) {
            respond(WithTensorNames(*plan, result.status()));
            return;
          }
          respond(to_response(*plan, *result));
        };
        switch (plan->task) {
          case serving::ServedTask::kClassify:
            pipeline_.Classify(
                std::get<v1::ClassifyRequest>(plan->request), std::move(call),
                [answer = std::move(answer), labels = (*model)->config().num_labels()](
                    absl::StatusOr<v1::ClassifyResponse> result) mutable {
                  answer(std::move(result), [labels](const InferPlan& p, const auto& r) {
                    return ClassifyAnswer(p, labels, r);
                  });
                });
            return;
          case serving::ServedTask::kZeroShot:
            pipeline_.ZeroShot(
                std::get<v1::ZeroShotRequest>(plan->request), std::move(call),
                [answer = std::move(answer)](absl::StatusOr<v1::ZeroShotResponse> result) mutable {
                  answer(std::move(result),
                         [](const InferPlan& p, const auto& r) { return ZeroShotAnswer(p, r); });
                });
            return;
          case serving::ServedTask::kRerank:
            pipeline_.Rerank(
                std::get<v1::RerankRequest>(plan->request), std::move(call),
                [answer = std::move(answer)](absl::StatusOr<v1::RerankResponse> result) mutable {
                  answer(std::move(result),
                         [](const InferPlan& p, const auto& r) { return RerankAnswer(p, r); });
                });
            return;
          case serving::ServedTask::kEmbed:
            pipeline_.Embed(
                std::get<v1::EmbedRequest>(plan->request), std::move(call),
                [answer = std::move(answer)](absl::StatusOr<v1::EmbedResponse> result) mutable {
                  answer(std::move(result),
                         [](const InferPlan& p, const auto& r) { return EmbedAnswer(p, r); });
                });
            return;
          case serving::ServedTask::kTokenClassify:  // PlanInference refuses it already.
            answer(absl::StatusOr<v1::EmbedResponse>(absl::FailedPreconditionError(
                       "token classification is not carried over KServe v2")),
                   [](const InferPlan& p, const auto& r) { return EmbedAnswer(p, r); });
            return;
        }
      });
}

}  // namespace dflash::kserve
