#include "server/service/inference_service.h"

#include <functional>
#include <string>

#include "common/logging.h"
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

void InferenceService::RecordRefusal(absl::string_view rpc, const absl::Status& status) const {
  if (metrics_ != nullptr) {
    metrics_->RecordRequest(ProtocolName(Protocol::kDflashGrpc), rpc, "", status.code(),
                            absl::ZeroDuration());
  }
}

template <typename Request, typename Response, typename Run>
grpc::ServerUnaryReactor* InferenceService::Unary(absl::string_view rpc,
                                                  grpc::CallbackServerContext* context,
                                                  const Bytes& request, Bytes* response, Run run) {
  auto* call = new UnaryCall<Request, Response>(context, response, &admission_);
  // Authentication first: an unauthenticated caller's bytes are not even parsed.
  absl::Status admitted = Authenticate(*context);
  if (admitted.ok()) admitted = call->ParseRequest(request);
  if (admitted.ok()) admitted = admission_.Admit();
  if (!admitted.ok()) {
    RecordRefusal(rpc, admitted);
    call->Refuse(admitted);
    return call;
  }
  LogRequest(call->request());
  run(call->request(), call->Context(), call->MakeResponder());
  return call;
}

template <typename Request, typename Response, typename StreamResponse, typename Method>
InferenceService::BidiStream* InferenceService::Stream(absl::string_view rpc,
                                                       grpc::CallbackServerContext* context,
                                                       Method method) {
  absl::Status refusal = Authenticate(*context);
  if (refusal.ok() && admission_.draining()) {
    refusal = absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  if (!refusal.ok()) RecordRefusal(rpc, refusal);
  return new StreamCall<Request, Response, StreamResponse>(
      context,
      [this, method, rpc](const Request& request, CallContext call, Responder<Response> respond) {
        LogRequest(request);
        // Each message is admitted (and counted in flight) on its own.
        if (absl::Status admitted = admission_.Admit(); !admitted.ok()) {
          RecordRefusal(rpc, admitted);
          respond(admitted);
          return;
        }
        respond = [this, respond = std::move(respond)](absl::StatusOr<Response> result) mutable {
          admission_.Release();
          respond(std::move(result));
        };
        // std::invoke, not (pipeline_.*method)(...): GCC 12 with -fsanitize=address,undefined
        // miscompiles that call here (the vptr check of `this` reads a stale stack slot, and
        // ASan reports a stack-buffer-underflow on every stream message).
        std::invoke(method, pipeline_, request, std::move(call), std::move(respond));
      },
      [](const Request& request) { return request.request_id(); },
      [this, rpc](const absl::Status& malformed) { RecordRefusal(rpc, malformed); }, refusal);
}

grpc::ServerUnaryReactor* InferenceService::Classify(grpc::CallbackServerContext* context,
                                                     const Bytes* request, Bytes* response) {
  return Unary<v1::ClassifyRequest, v1::ClassifyResponse>(
      "Classify", context, *request, response,
      [this](const v1::ClassifyRequest& parsed, CallContext call, auto respond) {
        pipeline_.Classify(parsed, std::move(call), std::move(respond));
      });
}

grpc::ServerUnaryReactor* InferenceService::ZeroShot(grpc::CallbackServerContext* context,
                                                     const Bytes* request, Bytes* response) {
  return Unary<v1::ZeroShotRequest, v1::ZeroShotResponse>(
      "ZeroShot", context, *request, response,
      [this](const v1::ZeroShotRequest& parsed, CallContext call, auto respond) {
        pipeline_.ZeroShot(parsed, std::move(call), std::move(respond));
      });
}

grpc::ServerUnaryReactor* InferenceService::Rerank(grpc::CallbackServerContext* context,
                                                   const Bytes* request, Bytes* response) {
  return Unary<v1::RerankRequest, v1::RerankResponse>(
      "Rerank", context, *request, response,
      [this](const v1::RerankRequest& parsed, CallContext call, auto respond) {
        pipeline_.Rerank(parsed, std::move(call), std::move(respond));
      });
}

grpc::ServerUnaryReactor* InferenceService::Embed(grpc::CallbackServerContext* context,
                                                  const Bytes* request, Bytes* response) {
  return Unary<v1::EmbedRequest, v1::EmbedResponse>(
      "Embed", context, *request, response,
      [this](const v1::EmbedRequest& parsed, CallContext call, auto respond) {
        pipeline_.Embed(parsed, std::move(call), std::move(respond));
      });
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                     const Bytes* request, Bytes* response) {
  return Unary<v1::TokenizeRequest, v1::TokenizeResponse>(
      "Tokenize", context, *request, response,
      [this](const v1::TokenizeRequest& parsed, CallContext call, auto respond) {
        pipeline_.Tokenize(parsed, std::move(call), std::move(respond));
      });
}

grpc::ServerUnaryReactor* InferenceService::TokenClassify(grpc::CallbackServerContext* context,
                                                          const Bytes* request, Bytes* response) {
  return Unary<v1::TokenClassifyRequest, v1::TokenClassifyResponse>(
      "TokenClassify", context, *request, response,
      [this](const v1::TokenClassifyRequest& parsed, CallContext call, auto respond) {
        pipeline_.TokenClassify(parsed, std::move(call), std::move(respond));
      });
}

grpc::ServerUnaryReactor* InferenceService::Info(grpc::CallbackServerContext* context,
                                                 const Bytes* request, Bytes* response) {
  return Unary<v1::InfoRequest, v1::InfoResponse>(
      "Info", context, *request, response,
      [this](const v1::InfoRequest& parsed, CallContext call, auto respond) {
        // Reads loaded state only: cheap enough to answer inline.
        absl::StatusOr<v1::InfoResponse> info = pipeline_.Info(parsed);
        if (metrics_ != nullptr) {
          // The model label only for a served id: a client's arbitrary string must not become a
          // metric label.
          metrics_->RecordRequest(ProtocolName(call.protocol), "Info",
                                  info.ok() ? parsed.model() : "", info.status().code(),
                                  absl::Now() - call.received);
        }
        respond(std::move(info));
      });
}

InferenceService::BidiStream* InferenceService::ClassifyStream(
    grpc::CallbackServerContext* context) {
  return Stream<v1::ClassifyRequest, v1::ClassifyResponse, v1::ClassifyStreamResponse>(
      "ClassifyStream", context, &InferencePipeline::Classify);
}

InferenceService::BidiStream* InferenceService::RerankStream(grpc::CallbackServerContext* context) {
  return Stream<v1::RerankRequest, v1::RerankResponse, v1::RerankStreamResponse>(
      "RerankStream", context, &InferencePipeline::Rerank);
}

InferenceService::BidiStream* InferenceService::EmbedStream(grpc::CallbackServerContext* context) {
  return Stream<v1::EmbedRequest, v1::EmbedResponse, v1::EmbedStreamResponse>(
      "EmbedStream", context, &InferencePipeline::Embed);
}

InferenceService::BidiStream* InferenceService::TokenClassifyStream(
    grpc::CallbackServerContext* context) {
  return Stream<v1::TokenClassifyRequest, v1::TokenClassifyResponse,
                v1::TokenClassifyStreamResponse>("TokenClassifyStream", context,
                                                 &InferencePipeline::TokenClassify);
}

}  // namespace dflash::serving
