#include "server/service/inference_service.h"

#include <functional>
#include <string>

#include "engine/common/logging.h"
#include "server/service/stream_call.h"
#include "server/service/unary_call.h"

namespace dflash::serving {

absl::Status InferenceService::Authenticate(const grpc::CallbackServerContext& context) const {
  if (authenticator_ == nullptr) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto entry = metadata.find(authenticator_->header());
  if (entry == metadata.end()) return authenticator_->Check(nullptr);
  const std::string presented(entry->second.data(), entry->second.size());
  return authenticator_->Check(&presented);
}

void InferenceService::LogRequest(const google::protobuf::Message& request) const {
  if (log_request_content_) {
    dflash::Log().debug("request {}: {}", request.GetTypeName(), request.ShortDebugString());
  }
}

template <typename Request, typename Response, typename Run>
grpc::ServerUnaryReactor* InferenceService::Unary(grpc::CallbackServerContext* context,
                                                  const Request& request, Response* response,
                                                  Run run) {
  LogRequest(request);
  auto* call = new UnaryCall<Response>(context, response, &admission_);
  absl::Status admitted = Authenticate(*context);
  if (admitted.ok()) admitted = admission_.Admit();
  if (!admitted.ok()) {
    call->Refuse(admitted);
    return call;
  }
  run(call->Context(), call->MakeResponder());
  return call;
}

template <typename Request, typename Response, typename StreamResponse, typename Method>
grpc::ServerBidiReactor<Request, StreamResponse>* InferenceService::Stream(
    grpc::CallbackServerContext* context, Method method) {
  absl::Status refusal = Authenticate(*context);
  if (refusal.ok() && admission_.draining()) {
    refusal = absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  return new StreamCall<Request, Response, StreamResponse>(
      context, &admission_,
      [this, method](const Request& request, CallContext call, Responder<Response> respond) {
        LogRequest(request);
        // std::invoke, not (pipeline_.*method)(...): GCC 12 with -fsanitize=address,undefined
        // miscompiles that call here (the vptr check of `this` reads a stale stack slot, and
        // ASan reports a stack-buffer-underflow on every stream message).
        std::invoke(method, pipeline_, request, std::move(call), std::move(respond));
      },
      [](const Request& request) { return request.request_id(); }, refusal);
}

grpc::ServerUnaryReactor* InferenceService::Classify(grpc::CallbackServerContext* context,
                                                     const v1::ClassifyRequest* request,
                                                     v1::ClassifyResponse* response) {
  return Unary(context, *request, response, [&](CallContext call, auto respond) {
    pipeline_.Classify(*request, std::move(call), std::move(respond));
  });
}

grpc::ServerUnaryReactor* InferenceService::ZeroShot(grpc::CallbackServerContext* context,
                                                     const v1::ZeroShotRequest* request,
                                                     v1::ZeroShotResponse* response) {
  return Unary(context, *request, response, [&](CallContext call, auto respond) {
    pipeline_.ZeroShot(*request, std::move(call), std::move(respond));
  });
}

grpc::ServerUnaryReactor* InferenceService::Rerank(grpc::CallbackServerContext* context,
                                                   const v1::RerankRequest* request,
                                                   v1::RerankResponse* response) {
  return Unary(context, *request, response, [&](CallContext call, auto respond) {
    pipeline_.Rerank(*request, std::move(call), std::move(respond));
  });
}

grpc::ServerUnaryReactor* InferenceService::Embed(grpc::CallbackServerContext* context,
                                                  const v1::EmbedRequest* request,
                                                  v1::EmbedResponse* response) {
  return Unary(context, *request, response, [&](CallContext call, auto respond) {
    pipeline_.Embed(*request, std::move(call), std::move(respond));
  });
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                     const v1::TokenizeRequest* request,
                                                     v1::TokenizeResponse* response) {
  return Unary(context, *request, response, [&](CallContext call, auto respond) {
    pipeline_.Tokenize(*request, std::move(call), std::move(respond));
  });
}

grpc::ServerUnaryReactor* InferenceService::Info(grpc::CallbackServerContext* context,
                                                 const v1::InfoRequest* request,
                                                 v1::InfoResponse* response) {
  return Unary(context, *request, response, [&](CallContext, auto respond) {
    respond(pipeline_.Info(*request));  // Reads loaded state only: cheap enough to answer inline.
  });
}

grpc::ServerBidiReactor<v1::ClassifyRequest, v1::ClassifyStreamResponse>*
InferenceService::ClassifyStream(grpc::CallbackServerContext* context) {
  return Stream<v1::ClassifyRequest, v1::ClassifyResponse, v1::ClassifyStreamResponse>(
      context, &InferencePipeline::Classify);
}

grpc::ServerBidiReactor<v1::RerankRequest, v1::RerankStreamResponse>*
InferenceService::RerankStream(grpc::CallbackServerContext* context) {
  return Stream<v1::RerankRequest, v1::RerankResponse, v1::RerankStreamResponse>(
      context, &InferencePipeline::Rerank);
}

grpc::ServerBidiReactor<v1::EmbedRequest, v1::EmbedStreamResponse>* InferenceService::EmbedStream(
    grpc::CallbackServerContext* context) {
  return Stream<v1::EmbedRequest, v1::EmbedResponse, v1::EmbedStreamResponse>(
      context, &InferencePipeline::Embed);
}

}  // namespace dflash::serving
