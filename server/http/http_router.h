// Maps a request's method and path to an endpoint. The TEI routes also answer under a model
// prefix, /models/<id>/<route>, which selects a served model the way OpenAI's and Cohere's
// `model` field does; without one, the first configured model serves.
//   TEI:    GET /health, GET /info, POST /embed, /predict, /rerank, /tokenize, /decode,
//           /zero_shot, /token_classify, and POST / and /invocations (the model's task: embed,
//           predict, rerank or token_classify).
//   OpenAI: POST /v1/embeddings, GET /v1/models, GET /v1/models/<id>.
//   Cohere: POST /v1/rerank (Jina's too), POST /v2/rerank.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "server/http/api_family.h"

namespace dflash::http {

enum class Endpoint {
  kHealth,
  kInfo,
  kEmbed,
  kPredict,
  kRerank,
  kTokenize,
  kDecode,
  kZeroShot,
  kTokenClassify,
  kByTask,  // POST / and /invocations.
  kOpenAiEmbeddings,
  kOpenAiModels,
  kOpenAiModel,
  kCohereRerank,
};

// The name of the endpoint's pipeline call, as the request metrics label it ("Embed", ...).
absl::string_view EndpointRpc(Endpoint endpoint);

struct RouteMatch {
  // 200: `endpoint` is set; 404: no such path; 405: the path exists for `allow` only.
  int status = 404;
  Endpoint endpoint = Endpoint::kHealth;
  ApiFamily family = ApiFamily::kTei;
  std::string model;  // From the path (/models/<id>/..., /v1/models/<id>); "" when none.
  const char* allow = "";
};

RouteMatch MatchRoute(absl::string_view method, absl::string_view path);

// The family whose error format answers a request for `path` (also for unknown paths).
ApiFamily FamilyOfPath(absl::string_view path);

}  // namespace dflash::http
