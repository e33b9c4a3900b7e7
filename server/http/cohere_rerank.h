// Cohere's and Jina's rerank API: POST /v1/rerank (and Cohere's /v2/rerank). `query`;
// `documents` as strings or objects with a "text" field; `top_n`; `return_documents` (default
// false, as Cohere's); `model`. The answer carries both vendors' fields: "id", "results" (each
// {"index", "relevance_score", "document": {"text"}?}, best first), Cohere's "meta" and Jina's
// "model" and "usage".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "dflash/v1/dflash.pb.h"

namespace dflash::http {

namespace v1 = ::dflash::v1;

struct CohereRerank {
  v1::RerankRequest request;
};

absl::StatusOr<CohereRerank> ParseCohereRerank(const nlohmann::json& body);
std::string RenderCohereRerank(const v1::RerankResponse& response);

}  // namespace dflash::http
