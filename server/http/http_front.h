// The HTTP/JSON front of the service: routes each request (http_router.h), checks its API key,
// parses its body into a dflash.v1 request (tei_requests.h, openai_embeddings.h,
// cohere_rerank.h), admits it as gRPC calls are admitted (server.max_inflight_requests, 503 while
// draining), runs it on the shared InferencePipeline and renders the answer or the error in the
// route's format. Requests are counted in the request metrics with protocol="http". A request's
// deadline, which gRPC clients set on the call, comes from an optional X-Request-Timeout header
// (seconds).
#pragma once

#include <string>

#include "dflash/v1/dflash.pb.h"
#include "server/http/api_family.h"
#include "server/http/http_listener.h"
#include "server/http/http_router.h"
#include "server/service/api_key_authenticator.h"
#include "server/service/call_admission.h"
#include "server/service/inference_pipeline.h"
#include "server/service/service_metrics.h"

namespace dflash::http {

class HttpFront {
 public:
  // Nothing is owned; `authenticator` and `metrics` may be null. `max_inflight` and
  // `tokenization_workers` are reported by /info.
  HttpFront(serving::InferencePipeline& pipeline, serving::CallAdmission& admission,
            const serving::ApiKeyAuthenticator* authenticator, serving::ServiceMetrics* metrics,
            int max_inflight, int tokenization_workers);

  // The listener's handler: answers through `respond`, exactly once, from any thread.
  void Handle(HttpRequest request, HttpResponder respond);

 private:
  // The served model a request names ("": the first configured), or null.
  const v1::ModelInfo* FindModel(absl::string_view id) const;
  absl::Status Authenticate(const HttpRequest& request) const;
  void RecordRefusal(absl::string_view rpc, const absl::Status& status) const;
  void Refuse(ApiFamily family, absl::string_view rpc, const absl::Status& status,
              HttpResponder& respond) const;
  void AnswerInfo(const RouteMatch& route, const v1::ModelInfo& model, HttpResponder respond);
  // POST routes: parse, admit, run, render.
  void Infer(const RouteMatch& route, Endpoint endpoint, const HttpRequest& request,
             const v1::ModelInfo& model, HttpResponder respond);
  template <typename Parsed, typename Response, typename Start, typename Render>
  void Run(ApiFamily family, absl::string_view rpc, absl::StatusOr<Parsed> parsed,
           const v1::ModelInfo& model, bool model_from_path, const HttpRequest& http_request,
           Start start, Render render, HttpResponder respond);

  serving::InferencePipeline& pipeline_;
  serving::CallAdmission& admission_;
  const serving::ApiKeyAuthenticator* const authenticator_;
  serving::ServiceMetrics* const metrics_;
  const int max_inflight_;
  const int tokenization_workers_;
  v1::InfoResponse info_;  // Of every served model; loaded state, fixed while serving.
};

}  // namespace dflash::http
