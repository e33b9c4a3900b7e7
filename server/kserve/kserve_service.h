// inference.GRPCInferenceService (KServe v2, the Open Inference Protocol) over gRPC's callback
// API, next to dflash.v1 on the same server: the same API keys, admission (max_inflight_requests,
// draining) and metrics (protocol "kserve_grpc") at the door, then the same InferencePipeline.
// ModelInfer maps the request to the dflash.v1 request of its task (infer_request_mapping.h) and
// the answer back (infer_response_mapping.h). Handlers return at once.
#pragma once

#include "inference/grpc_service.grpc.pb.h"
#include "server/service/api_key_authenticator.h"
#include "server/service/call_admission.h"
#include "server/service/inference_pipeline.h"
#include "server/service/service_metrics.h"

namespace dflash::kserve {

inline constexpr char kKserveServiceName[] = "inference.GRPCInferenceService";

// Every method raw, parsed by the service (server/service/wire_message.h says why).
using RawKserveService = inference::GRPCInferenceService::WithRawCallbackMethod_ServerLive<
    inference::GRPCInferenceService::WithRawCallbackMethod_ServerReady<
        inference::GRPCInferenceService::WithRawCallbackMethod_ModelReady<
            inference::GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                inference::GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                    inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                        inference::GRPCInferenceService::WithRawCallbackMethod_ModelConfig<
                            inference::GRPCInferenceService::Service>>>>>>>;

class KserveService final : public RawKserveService {
 public:
  // `authenticator` and `metrics` may be null. Nothing is owned.
  KserveService(serving::InferencePipeline& pipeline, serving::CallAdmission& admission,
                const serving::ApiKeyAuthenticator* authenticator, serving::ServiceMetrics* metrics,
                serving::ServerIdentity identity)
      : pipeline_(pipeline),
        admission_(admission),
        authenticator_(authenticator),
        metrics_(metrics),
        identity_(std::move(identity)) {}

  using Bytes = grpc::ByteBuffer;
  using Reactor = grpc::ServerUnaryReactor;
  using Context = grpc::CallbackServerContext;

  // Liveness and readiness are probes, like grpc.health.v1: answered without an API key and
  // without admission, so that they tell the truth while the server is full or draining.
  Reactor* ServerLive(Context* context, const Bytes* request, Bytes* response) override;
  Reactor* ServerReady(Context* context, const Bytes* request, Bytes* response) override;
  Reactor* ModelReady(Context* context, const Bytes* request, Bytes* response) override;
  Reactor* ServerMetadata(Context* context, const Bytes* request, Bytes* response) override;
  Reactor* ModelMetadata(Context* context, const Bytes* request, Bytes* response) override;
  Reactor* ModelConfig(Context* context, const Bytes* request, Bytes* response) override;
  Reactor* ModelInfer(Context* context, const Bytes* request, Bytes* response) override;

 private:
  absl::Status Authenticate(const Context& context) const;
  void Record(absl::string_view rpc, absl::string_view model, absl::StatusCode code,
              absl::Duration total) const;

  // Parses a unary call (after authentication and admission when `guarded`), then runs
  // `run(request, call_context, responder)`; or answers the refusal.
  template <typename Request, typename Response, typename Run>
  Reactor* Unary(absl::string_view rpc, bool guarded, Context* context, const Bytes& request,
                 Bytes* response, Run run);

  serving::InferencePipeline& pipeline_;
  serving::CallAdmission& admission_;
  const serving::ApiKeyAuthenticator* const authenticator_;
  serving::ServiceMetrics* const metrics_;
  const serving::ServerIdentity identity_;
};

}  // namespace dflash::kserve
