// dflash.v1.InferenceService over gRPC's callback API: authentication, admission and draining at
// the door, then the InferencePipeline. Handlers return at once; no gRPC thread ever waits for
// tokenization or the engine.
#pragma once

#include "dflash/v1/dflash.grpc.pb.h"
#include "server/service/api_key_authenticator.h"
#include "server/service/call_admission.h"
#include "server/service/inference_pipeline.h"

namespace dflash::serving {

// Every method raw (bytes in, bytes out): requests are parsed by the service itself, so that a
// malformed message gets INVALID_ARGUMENT with the reason, counted (wire_message.h).
using RawInferenceService = v1::InferenceService::WithRawCallbackMethod_Classify<
    v1::InferenceService::WithRawCallbackMethod_ClassifyStream<
        v1::InferenceService::WithRawCallbackMethod_ZeroShot<
            v1::InferenceService::WithRawCallbackMethod_Rerank<
                v1::InferenceService::WithRawCallbackMethod_RerankStream<
                    v1::InferenceService::WithRawCallbackMethod_Embed<
                        v1::InferenceService::WithRawCallbackMethod_EmbedStream<
                            v1::InferenceService::WithRawCallbackMethod_Tokenize<
                                v1::InferenceService::WithRawCallbackMethod_TokenClassify<
                                    v1::InferenceService::WithRawCallbackMethod_TokenClassifyStream<
                                        v1::InferenceService::WithRawCallbackMethod_Info<
                                            v1::InferenceService::Service>>>>>>>>>>>;

class InferenceService final : public RawInferenceService {
 public:
  // `authenticator` may be null (no API keys). Nothing is owned. With `log_request_content`,
  // every request is written to the debug log in full (off by default: texts may be personal
  // data).
  // `metrics` may be null; it counts the calls refused at the door (and Info), which never reach
  // the pipeline.
  InferenceService(InferencePipeline& pipeline, CallAdmission& admission,
                   const ApiKeyAuthenticator* authenticator, ServiceMetrics* metrics,
                   bool log_request_content = false)
      : pipeline_(pipeline),
        admission_(admission),
        authenticator_(authenticator),
        metrics_(metrics),
        log_request_content_(log_request_content) {}

  using Bytes = grpc::ByteBuffer;
  using BidiStream = grpc::ServerBidiReactor<Bytes, Bytes>;

  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* context, const Bytes* request,
                                     Bytes* response) override;
  grpc::ServerUnaryReactor* ZeroShot(grpc::CallbackServerContext* context, const Bytes* request,
                                     Bytes* response) override;
  grpc::ServerUnaryReactor* Rerank(grpc::CallbackServerContext* context, const Bytes* request,
                                   Bytes* response) override;
  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context, const Bytes* request,
                                  Bytes* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const Bytes* request,
                                     Bytes* response) override;
  grpc::ServerUnaryReactor* TokenClassify(grpc::CallbackServerContext* context,
                                          const Bytes* request, Bytes* response) override;
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context, const Bytes* request,
                                 Bytes* response) override;
  BidiStream* ClassifyStream(grpc::CallbackServerContext* context) override;
  BidiStream* RerankStream(grpc::CallbackServerContext* context) override;
  BidiStream* EmbedStream(grpc::CallbackServerContext* context) override;
  BidiStream* TokenClassifyStream(grpc::CallbackServerContext* context) override;

 private:
  // UNAUTHENTICATED when API keys are configured and the call's key does not match.
  absl::Status Authenticate(const grpc::CallbackServerContext& context) const;

  // Authenticates, parses and admits a unary call, then runs `run(request, call_context,
  // responder)`; or answers the refusal.
  template <typename Request, typename Response, typename Run>
  grpc::ServerUnaryReactor* Unary(absl::string_view rpc, grpc::CallbackServerContext* context,
                                  const Bytes& request, Bytes* response, Run run);
  // Counts a call (or stream message) answered without reaching the pipeline.
  void RecordRefusal(absl::string_view rpc, const absl::Status& status) const;
  // The opt-in request log (LoggingConfig::log_request_content).
  void LogRequest(const google::protobuf::Message& request) const;
  template <typename Request, typename Response, typename StreamResponse, typename Method>
  BidiStream* Stream(absl::string_view rpc, grpc::CallbackServerContext* context, Method method);

  InferencePipeline& pipeline_;
  CallAdmission& admission_;
  const ApiKeyAuthenticator* const authenticator_;
  ServiceMetrics* const metrics_;
  const bool log_request_content_;
};

}  // namespace dflash::serving
