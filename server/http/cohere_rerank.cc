#include "server/http/cohere_rerank.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/http/http_errors.h"
#include "server/http/json_body.h"
#include "server/http/json_number.h"

namespace dflash::http {

absl::StatusOr<CohereRerank> ParseCohereRerank(const nlohmann::json& body) {
  CohereRerank rerank;
  v1::RerankRequest& request = rerank.request;
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> model, ReadOptionalString(body, "model"));
  if (model.has_value()) request.set_model(*model);
  DFLASH_ASSIGN_OR_RETURN(std::string query, ReadRequiredString(body, "query"));
  request.set_query(std::move(query));
  const auto documents = body.find("documents");
  if (documents == body.end() || documents->is_null()) {
    return FieldError("documents", "is required");
  }
  if (!documents->is_array()) {
    return FieldError("documents", "must be a list of strings or of objects with a \"text\"");
  }
  if (documents->empty()) return EmptyInput("documents: must not be empty");
  for (size_t i = 0; i < documents->size(); ++i) {
    const nlohmann::json& document = (*documents)[i];
    if (document.is_string()) {
      request.add_documents(document.get<std::string>());
      continue;
    }
    const std::string field = absl::StrCat("documents[", i, "]");
    if (!document.is_object()) {
      return FieldError(field, "must be a string or an object with a \"text\" string");
    }
    DFLASH_ASSIGN_OR_RETURN(std::string text, ReadRequiredString(document, "text"));
    request.add_documents(std::move(text));
  }
  DFLASH_ASSIGN_OR_RETURN(std::optional<uint32_t> top_n, ReadOptionalCount(body, "top_n"));
  if (top_n.has_value()) {
    if (*top_n == 0) return FieldError("top_n", "must be at least 1");
    request.set_top_n(*top_n);
  }
  DFLASH_ASSIGN_OR_RETURN(std::optional<bool> return_documents,
                          ReadOptionalBool(body, "return_documents"));
  request.set_return_documents(return_documents.value_or(false));
  return rerank;
}

std::string RenderCohereRerank(const v1::RerankResponse& response) {
  nlohmann::json results = nlohmann::json::array();
  for (const v1::RerankResult& result : response.results()) {
    nlohmann::json item = {{"index", result.index()},
                           {"relevance_score", JsonFloat(result.score())}};
    if (result.has_document()) item["document"] = {{"text", result.document()}};
    results.push_back(std::move(item));
  }
  const uint64_t tokens = response.metadata().tokens();
  const nlohmann::json body = {
      {"id", response.metadata().request_id()},
      {"results", std::move(results)},
      {"meta", {{"api_version", {{"version", "1"}}}, {"billed_units", {{"search_units", 1}}}}},
      {"model", response.metadata().model()},
      {"usage", {{"total_tokens", tokens}, {"prompt_tokens", tokens}}},
  };
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace dflash::http
