// OpenAI's embeddings API: POST /v1/embeddings bodies into EmbedRequests and EmbedResponses
// into its answer, and GET /v1/models. `input` is a string, a list of strings, a list of token
// ids or a list of token-id lists (ReadInputList; ids of the served model's vocabulary, each list
// the model sequence as given: no [CLS]/[SEP] added; usage counts them); `encoding_format`
// "float" (the default) or "base64" (little-endian float32, as the openai client asks for by
// default); `dimensions`; `user` is accepted and ignored. Embeddings are unit-normalized, as
// OpenAI's are.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dflash/v1/dflash.pb.h"

namespace dflash::http {

namespace v1 = ::dflash::v1;

struct OpenAiEmbeddings {
  v1::EmbedRequest request;
  std::vector<std::optional<std::vector<int32_t>>> token_ids;  // InputList::token_ids.
  bool base64 = false;
};

absl::StatusOr<OpenAiEmbeddings> ParseOpenAiEmbeddings(const nlohmann::json& body);
std::string RenderOpenAiEmbeddings(const v1::EmbedResponse& response, bool base64);
// {"object": "list", "data": [model, ...]} of every served model.
std::string RenderOpenAiModels(const v1::InfoResponse& info);
// One model object: {"id", "object": "model", "created", "owned_by"}.
std::string RenderOpenAiModel(const v1::ModelInfo& model);

}  // namespace dflash::http
