#include "server/http/http_router.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace dflash::http {
namespace {

struct RouteEntry {
  absl::string_view path;
  absl::string_view method;
  Endpoint endpoint;
  ApiFamily family;
};

// The routes a model prefix may stand in front of.
constexpr RouteEntry kTeiRoutes[] = {
    {"/health", "GET", Endpoint::kHealth, ApiFamily::kTei},
    {"/info", "GET", Endpoint::kInfo, ApiFamily::kTei},
    {"/embed", "POST", Endpoint::kEmbed, ApiFamily::kTei},
    {"/predict", "POST", Endpoint::kPredict, ApiFamily::kTei},
    {"/rerank", "POST", Endpoint::kRerank, ApiFamily::kTei},
    {"/tokenize", "POST", Endpoint::kTokenize, ApiFamily::kTei},
    {"/decode", "POST", Endpoint::kDecode, ApiFamily::kTei},
    {"/zero_shot", "POST", Endpoint::kZeroShot, ApiFamily::kTei},
    {"/token_classify", "POST", Endpoint::kTokenClassify, ApiFamily::kTei},
    {"/invocations", "POST", Endpoint::kByTask, ApiFamily::kTei},
    {"/", "POST", Endpoint::kByTask, ApiFamily::kTei},
};
constexpr RouteEntry kOtherRoutes[] = {
    {"/v1/embeddings", "POST", Endpoint::kOpenAiEmbeddings, ApiFamily::kOpenAi},
    {"/v1/models", "GET", Endpoint::kOpenAiModels, ApiFamily::kOpenAi},
    {"/v1/rerank", "POST", Endpoint::kCohereRerank, ApiFamily::kCohere},
    {"/v2/rerank", "POST", Endpoint::kCohereRerank, ApiFamily::kCohere},
};

bool Matches(const RouteEntry& entry, absl::string_view method, absl::string_view path,
             RouteMatch& match) {
  if (entry.path != path) return false;
  match.family = entry.family;
  if (entry.method == method || (entry.method == "GET" && method == "HEAD")) {
    match.status = 200;
    match.endpoint = entry.endpoint;
  } else {
    match.status = 405;
    match.allow = entry.method == "GET" ? "GET, HEAD" : "POST";
  }
  return true;
}

// A served model id: [A-Za-z0-9._-]+ (server.yaml's rule).
bool IsModelId(absl::string_view id) {
  if (id.empty()) return false;
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::string_view EndpointRpc(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kHealth:
      return "Health";
    case Endpoint::kInfo:
    case Endpoint::kOpenAiModels:
    case Endpoint::kOpenAiModel:
      return "Info";
    case Endpoint::kEmbed:
    case Endpoint::kOpenAiEmbeddings:
      return "Embed";
    case Endpoint::kPredict:
    case Endpoint::kByTask:
      return "Classify";
    case Endpoint::kRerank:
    case Endpoint::kCohereRerank:
      return "Rerank";
    case Endpoint::kTokenize:
      return "Tokenize";
    case Endpoint::kDecode:
      return "Decode";
    case Endpoint::kZeroShot:
      return "ZeroShot";
    case Endpoint::kTokenClassify:
      return "TokenClassify";
  }
  return "Unknown";
}

ApiFamily FamilyOfPath(absl::string_view path) {
  if (absl::StartsWith(path, "/v1/rerank") || absl::StartsWith(path, "/v2/")) {
    return ApiFamily::kCohere;
  }
  if (absl::StartsWith(path, "/v1/")) return ApiFamily::kOpenAi;
  return ApiFamily::kTei;
}

RouteMatch MatchRoute(absl::string_view method, absl::string_view path) {
  RouteMatch match;
  match.family = FamilyOfPath(path);
  for (const RouteEntry& entry : kOtherRoutes) {
    if (Matches(entry, method, path, match)) return match;
  }
  absl::string_view model_path = path;
  if (absl::ConsumePrefix(&model_path, "/v1/models/")) {
    if (!IsModelId(model_path)) return match;
    match.model = std::string(model_path);
    Matches({path, "GET", Endpoint::kOpenAiModel, ApiFamily::kOpenAi}, method, path, match);
    return match;
  }
  absl::string_view route = path;
  std::string model;
  if (absl::ConsumePrefix(&route, "/models/")) {
    const size_t slash = route.find('/');
    const absl::string_view id = route.substr(0, slash);
    if (!IsModelId(id)) return match;
    model = std::string(id);
    route = slash == absl::string_view::npos ? absl::string_view("/") : route.substr(slash);
  }
  for (const RouteEntry& entry : kTeiRoutes) {
    if (Matches(entry, method, route, match)) {
      match.model = std::move(model);
      return match;
    }
  }
  return match;
}

}  // namespace dflash::http
