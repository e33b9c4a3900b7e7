#include "server/http/http_front.h"

#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/http/cohere_rerank.h"
#include "server/http/http_errors.h"
#include "server/http/json_body.h"
#include "server/http/openai_embeddings.h"
#include "server/http/tei_requests.h"
#include "server/http/tei_responses.h"
#include "server/service/call_context.h"

namespace dflash::http {
namespace {

using serving::CallContext;
using serving::Protocol;
using serving::Responder;

HttpResponse JsonAnswer(std::string body) {
  HttpResponse response;
  response.body = std::move(body);
  return response;
}

bool HasTask(const v1::ModelInfo& model, v1::Task task) {
  for (const int each : model.tasks()) {
    if (each == task) return true;
  }
  return false;
}

// Where Run writes the served model and the request id: dflash.v1 requests and DecodeRequest.
template <typename Request>
bool NamesModel(const Request& request) {
  return !request.model().empty();
}
bool NamesModel(const serving::DecodeRequest& request) { return !request.model.empty(); }
template <typename Request>
void SetModel(Request& request, const std::string& id) {
  request.set_model(id);
}
void SetModel(serving::DecodeRequest& request, const std::string& id) { request.model = id; }
template <typename Request>
void SetRequestId(Request& request, const std::string& id) {
  request.set_request_id(id);
}
void SetRequestId(serving::DecodeRequest&, const std::string&) {}  // The answer carries no id.

// A parsed /decode body as Run takes it.
struct DecodeCall {
  serving::DecodeRequest request;
};

absl::StatusOr<DecodeCall> ToDecodeCall(absl::StatusOr<TeiDecode> parsed) {
  if (!parsed.ok()) return parsed.status();
  DecodeCall call;
  call.request.model = std::move(parsed->model);
  call.request.ids = std::move(parsed->ids);
  call.request.skip_special_tokens = parsed->skip_special_tokens;
  return call;
}

// The TEI route that / and /invocations stand for, by the model's task (as TEI's model type).
Endpoint TaskEndpoint(const v1::ModelInfo& model) {
  if (HasTask(model, v1::TASK_RERANK)) return Endpoint::kRerank;
  if (HasTask(model, v1::TASK_CLASSIFY)) return Endpoint::kPredict;
  if (HasTask(model, v1::TASK_TOKEN_CLASSIFY)) return Endpoint::kTokenClassify;
  return Endpoint::kEmbed;
}

}  // namespace

HttpFront::HttpFront(serving::InferencePipeline& pipeline, serving::CallAdmission& admission,
                     const serving::ApiKeyAuthenticator* authenticator,
                     serving::ServiceMetrics* metrics, int max_inflight, int tokenization_workers)
    : pipeline_(pipeline),
      admission_(admission),
      authenticator_(authenticator),
      metrics_(metrics),
      max_inflight_(max_inflight),
      tokenization_workers_(tokenization_workers) {
  absl::StatusOr<v1::InfoResponse> info = pipeline_.Info(v1::InfoRequest());
  if (info.ok()) info_ = *std::move(info);
}

const v1::ModelInfo* HttpFront::FindModel(absl::string_view id) const {
  if (info_.models().empty()) return nullptr;
  if (id.empty()) return &info_.models(0);
  for (const v1::ModelInfo& model : info_.models()) {
    if (model.id() == id) return &model;
  }
  return nullptr;
}

absl::Status HttpFront::Authenticate(const HttpRequest& request) const {
  if (authenticator_ == nullptr) return absl::OkStatus();
  return authenticator_->Check(request.Header(authenticator_->header()));
}

void HttpFront::RecordRefusal(absl::string_view rpc, const absl::Status& status) const {
  if (metrics_ != nullptr) {
    metrics_->RecordRequest(serving::ProtocolName(Protocol::kHttp), rpc, "", status.code(),
                            absl::ZeroDuration());
  }
}

void HttpFront::Refuse(ApiFamily family, absl::string_view rpc, const absl::Status& status,
                       HttpResponder& respond) const {
  RecordRefusal(rpc, status);
  respond(ErrorResponse(family, status));
}

void HttpFront::Handle(HttpRequest request, HttpResponder respond) {
  const RouteMatch route = MatchRoute(request.method, request.path);
  if (route.status != 200) {
    HttpResponse error =
        route.status == 405
            ? ErrorResponse(route.family, 405,
                            absl::StrCat(request.method, " is not allowed on ", request.path,
                                         "; use ", route.allow))
            : ErrorResponse(route.family, 404, absl::StrCat("no route ", request.path));
    if (route.status == 405) error.headers.emplace_back("Allow", route.allow);
    respond(std::move(error));
    return;
  }
  const absl::string_view rpc = EndpointRpc(route.endpoint);
  if (route.endpoint == Endpoint::kHealth) {  // Probes carry no key, as gRPC health checks.
    if (admission_.draining()) {
      respond(ErrorResponse(route.family, absl::UnavailableError("the server is shutting down")));
    } else {
      respond(JsonAnswer(""));
    }
    return;
  }
  if (absl::Status authenticated = Authenticate(request); !authenticated.ok()) {
    Refuse(route.family, rpc, authenticated, respond);
    return;
  }
  const v1::ModelInfo* model = FindModel(route.model);
  if (model == nullptr) {
    std::vector<std::string> ids;
    for (const v1::ModelInfo& each : info_.models()) ids.push_back(each.id());
    Refuse(route.family, rpc,
           absl::NotFoundError(absl::StrCat("model '", route.model,
                                            "' is not served; served: ", absl::StrJoin(ids, ", "))),
           respond);
    return;
  }
  if (route.endpoint == Endpoint::kInfo || route.endpoint == Endpoint::kOpenAiModels ||
      route.endpoint == Endpoint::kOpenAiModel) {
    if (admission_.draining()) {  // As gRPC's Info, which admission refuses while draining.
      Refuse(route.family, rpc,
             absl::UnavailableError("the server is shutting down; retry on another replica"),
             respond);
      return;
    }
    AnswerInfo(route, *model, std::move(respond));
    return;
  }
  const Endpoint endpoint =
      route.endpoint == Endpoint::kByTask ? TaskEndpoint(*model) : route.endpoint;
  Infer(route, endpoint, request, *model, std::move(respond));
}

void HttpFront::AnswerInfo(const RouteMatch& route, const v1::ModelInfo& model,
                           HttpResponder respond) {
  if (metrics_ != nullptr) {
    metrics_->RecordRequest(serving::ProtocolName(Protocol::kHttp), "Info", model.id(),
                            absl::StatusCode::kOk, absl::ZeroDuration());
  }
  switch (route.endpoint) {
    case Endpoint::kOpenAiModels:
      respond(JsonAnswer(RenderOpenAiModels(info_)));
      return;
    case Endpoint::kOpenAiModel:
      respond(JsonAnswer(RenderOpenAiModel(model)));
      return;
    default:
      respond(JsonAnswer(RenderTeiInfo(info_, model, max_inflight_, tokenization_workers_)));
      return;
  }
}

template <typename Parsed, typename Response, typename Start, typename Render>
void HttpFront::Run(ApiFamily family, absl::string_view rpc, absl::StatusOr<Parsed> parsed,
                    const v1::ModelInfo& model, bool model_from_path,
                    const HttpRequest& http_request, Start start, Render render,
                    HttpResponder respond) {
  if (!parsed.ok()) {
    Refuse(family, rpc, parsed.status(), respond);
    return;
  }
  // The request must outlive the pipeline's use of it: the responder owns it.
  auto owned = std::make_shared<Parsed>(*std::move(parsed));
  auto& request = owned->request;
  // A model in the path wins over the body's; neither: the first configured model.
  if (model_from_path || !NamesModel(request)) SetModel(request, model.id());
  if (const std::string* id = http_request.Header("x-request-id")) SetRequestId(request, *id);
  CallContext call;
  call.protocol = Protocol::kHttp;
  call.received = absl::Now();
  // The listener's flag: set when the client hangs up while its request waits.
  call.cancelled = http_request.client_gone != nullptr
                       ? http_request.client_gone
                       : std::make_shared<serving::CancellationFlag>(false);
  // The HTTP counterpart of a gRPC deadline: the batcher and the answer honour it the same way.
  if (const std::string* timeout = http_request.Header("x-request-timeout")) {
    double seconds = 0;
    if (!absl::SimpleAtod(*timeout, &seconds) || !(seconds > 0) || seconds > 1e6) {
      Refuse(family, rpc,
             absl::InvalidArgumentError(absl::StrCat(
                 "X-Request-Timeout: must be a positive number of seconds, got '", *timeout, "'")),
             respond);
      return;
    }
    call.deadline = call.received + absl::Seconds(seconds);
  }
  if (absl::Status admitted = admission_.Admit(); !admitted.ok()) {
    Refuse(family, rpc, admitted, respond);
    return;
  }
  Responder<Response> responder =
      [this, family, owned, render = std::move(render),
       respond = std::move(respond)](absl::StatusOr<Response> result) mutable {
        admission_.Release();
        if (!result.ok()) {
          respond(ErrorResponse(family, result.status()));
          return;
        }
        respond(JsonAnswer(render(*result, *owned)));
      };
  start(*owned, std::move(call), std::move(responder));
}

void HttpFront::Infer(const RouteMatch& route, Endpoint endpoint, const HttpRequest& request,
                      const v1::ModelInfo& model, HttpResponder respond) {
  const absl::string_view rpc = EndpointRpc(endpoint);
  absl::StatusOr<nlohmann::json> body = ParseJsonBody(request.body);
  if (!body.ok()) {
    Refuse(route.family, rpc, body.status(), respond);
    return;
  }
  switch (endpoint) {
    case Endpoint::kEmbed:
      Run<TeiEmbed, v1::EmbedResponse>(
          route.family, rpc, ParseTeiEmbed(*body), model, !route.model.empty(), request,
          [this](TeiEmbed& parsed, CallContext call, auto responder) {
            pipeline_.EmbedWithIds(parsed.request, parsed.token_ids, std::move(call),
                                   std::move(responder));
          },
          [](const v1::EmbedResponse& response, const TeiEmbed&) {
            return RenderTeiEmbed(response);
          },
          std::move(respond));
      return;
    case Endpoint::kPredict:
      Run<TeiPredict, v1::ClassifyResponse>(
          route.family, rpc, ParseTeiPredict(*body), model, !route.model.empty(), request,
          [this](TeiPredict& parsed, CallContext call, auto responder) {
            pipeline_.Classify(parsed.request, std::move(call), std::move(responder));
          },
          [](const v1::ClassifyResponse& response, const TeiPredict& parsed) {
            return RenderTeiPredict(response, parsed);
          },
          std::move(respond));
      return;
    case Endpoint::kRerank:
      Run<TeiRerank, v1::RerankResponse>(
          route.family, rpc, ParseTeiRerank(*body), model, !route.model.empty(), request,
          [this](TeiRerank& parsed, CallContext call, auto responder) {
            parsed.request.set_return_documents(parsed.return_text);
            pipeline_.Rerank(parsed.request, std::move(call), std::move(responder));
          },
          [](const v1::RerankResponse& response, const TeiRerank& parsed) {
            return RenderTeiRerank(response, parsed.return_text);
          },
          std::move(respond));
      return;
    case Endpoint::kTokenize:
      Run<TeiTokenize, v1::TokenizeResponse>(
          route.family, rpc, ParseTeiTokenize(*body), model, !route.model.empty(), request,
          [this](TeiTokenize& parsed, CallContext call, auto responder) {
            pipeline_.Tokenize(parsed.request, std::move(call), std::move(responder));
          },
          [](const v1::TokenizeResponse& response, const TeiTokenize& parsed) {
            return RenderTeiTokenize(response, parsed);
          },
          std::move(respond));
      return;
    case Endpoint::kDecode:
      Run<DecodeCall, serving::DecodeResponse>(
          route.family, rpc, ToDecodeCall(ParseTeiDecode(*body)), model, !route.model.empty(),
          request,
          [this](DecodeCall& parsed, CallContext call, auto responder) {
            pipeline_.Decode(parsed.request, std::move(call), std::move(responder));
          },
          [](const serving::DecodeResponse& response, const DecodeCall&) {
            return RenderTeiDecode(response.texts);
          },
          std::move(respond));
      return;
    case Endpoint::kZeroShot:
      Run<TeiZeroShot, v1::ZeroShotResponse>(
          route.family, rpc, ParseTeiZeroShot(*body), model, !route.model.empty(), request,
          [this](TeiZeroShot& parsed, CallContext call, auto responder) {
            pipeline_.ZeroShot(parsed.request, std::move(call), std::move(responder));
          },
          [](const v1::ZeroShotResponse& response, const TeiZeroShot& parsed) {
            return RenderTeiZeroShot(response, parsed.batch);
          },
          std::move(respond));
      return;
    case Endpoint::kTokenClassify:
      Run<TeiTokenClassify, v1::TokenClassifyResponse>(
          route.family, rpc, ParseTeiTokenClassify(*body), model, !route.model.empty(), request,
          [this](TeiTokenClassify& parsed, CallContext call, auto responder) {
            pipeline_.TokenClassify(parsed.request, std::move(call), std::move(responder));
          },
          [](const v1::TokenClassifyResponse& response, const TeiTokenClassify& parsed) {
            return RenderTeiTokenClassify(response, parsed.batch);
          },
          std::move(respond));
      return;
    case Endpoint::kOpenAiEmbeddings:
      Run<OpenAiEmbeddings, v1::EmbedResponse>(
          route.family, rpc, ParseOpenAiEmbeddings(*body), model, !route.model.empty(), request,
          [this](OpenAiEmbeddings& parsed, CallContext call, auto responder) {
            pipeline_.EmbedWithIds(parsed.request, parsed.token_ids, std::move(call),
                                   std::move(responder));
          },
          [](const v1::EmbedResponse& response, const OpenAiEmbeddings& parsed) {
            return RenderOpenAiEmbeddings(response, parsed.base64);
          },
          std::move(respond));
      return;
    case Endpoint::kCohereRerank:
      Run<CohereRerank, v1::RerankResponse>(
          route.family, rpc, ParseCohereRerank(*body), model, !route.model.empty(), request,
          [this](CohereRerank& parsed, CallContext call, auto responder) {
            pipeline_.Rerank(parsed.request, std::move(call), std::move(responder));
          },
          [](const v1::RerankResponse& response, const CohereRerank&) {
            return RenderCohereRerank(response);
          },
          std::move(respond));
      return;
    default:
      respond(ErrorResponse(route.family, 404, absl::StrCat("no route ", request.path)));
      return;
  }
}

}  // namespace dflash::http
