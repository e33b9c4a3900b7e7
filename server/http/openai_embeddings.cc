#include "server/http/openai_embeddings.h"

#include <cstring>

#include "absl/base/internal/endian.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/http/http_errors.h"
#include "server/http/json_body.h"
#include "server/http/json_number.h"

namespace dflash::http {
namespace {

constexpr char kOwner[] = "dflash";

std::string Dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json ModelObject(const v1::ModelInfo& model) {
  return {{"id", model.id()}, {"object", "model"}, {"created", 0}, {"owned_by", kOwner}};
}

}  // namespace

absl::StatusOr<OpenAiEmbeddings> ParseOpenAiEmbeddings(const nlohmann::json& body) {
  OpenAiEmbeddings embeddings;
  v1::EmbedRequest& request = embeddings.request;
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> model, ReadOptionalString(body, "model"));
  if (model.has_value()) request.set_model(*model);
  DFLASH_ASSIGN_OR_RETURN(InputList inputs, ReadInputList(body, "input"));
  for (std::string& text : inputs.texts) request.add_inputs(std::move(text));
  embeddings.token_ids = std::move(inputs.token_ids);
  request.set_normalize(true);
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> format,
                          ReadOptionalString(body, "encoding_format"));
  if (format.has_value() && *format != "float" && *format != "base64") {
    return FieldError("encoding_format",
                      absl::StrCat("must be \"float\" or \"base64\", got \"", *format, "\""));
  }
  embeddings.base64 = format.has_value() && *format == "base64";
  DFLASH_ASSIGN_OR_RETURN(std::optional<uint32_t> dimensions,
                          ReadOptionalCount(body, "dimensions"));
  if (dimensions.has_value()) {
    if (*dimensions == 0) return FieldError("dimensions", "must be at least 1");
    request.set_dimensions(*dimensions);
  }
  DFLASH_RETURN_IF_ERROR(ReadOptionalString(body, "user").status());
  return embeddings;
}

std::string RenderOpenAiEmbeddings(const v1::EmbedResponse& response, bool base64) {
  nlohmann::json data = nlohmann::json::array();
  for (int i = 0; i < response.embeddings_size(); ++i) {
    const v1::Embedding& embedding = response.embeddings(i);
    nlohmann::json values;
    if (base64) {
      std::string bytes(static_cast<size_t>(embedding.float32_values_size()) * 4, '\0');
      for (int k = 0; k < embedding.float32_values_size(); ++k) {
        uint32_t bits = 0;
        const float value = embedding.float32_values(k);
        std::memcpy(&bits, &value, sizeof(bits));
        absl::little_endian::Store32(bytes.data() + static_cast<size_t>(k) * 4, bits);
      }
      values = absl::Base64Escape(bytes);
    } else {
      values = nlohmann::json::array();
      for (const float value : embedding.float32_values()) values.push_back(JsonFloat(value));
    }
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(values)}});
  }
  const uint64_t tokens = response.metadata().tokens();
  return Dump({{"object", "list"},
               {"data", std::move(data)},
               {"model", response.metadata().model()},
               {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

std::string RenderOpenAiModels(const v1::InfoResponse& info) {
  nlohmann::json data = nlohmann::json::array();
  for (const v1::ModelInfo& model : info.models()) data.push_back(ModelObject(model));
  return Dump({{"object", "list"}, {"data", std::move(data)}});
}

std::string RenderOpenAiModel(const v1::ModelInfo& model) { return Dump(ModelObject(model)); }

}  // namespace dflash::http
