// dflash.v1 answers as Text Embeddings Inference response bodies (TEI 1.9 shapes):
//   /embed     [[float, ...], ...]
//   /predict   [{"score", "label"}, ...] for one input, [[...], ...] for a batch (and always for
//              the Hugging Face Inference API form), labels highest score first
//   /rerank    [{"index", "score", "text"?}, ...], highest score first
//   /tokenize  [[{"id", "text", "special", "start", "stop"}, ...], ...]; start/stop are UTF-8
//              byte offsets into the input, null for special tokens
//   /decode    ["text", ...], one per id list (a single list too, as TEI answers it)
//   /zero_shot [{"label", "score"}, ...] for one text, [[...], ...] for a list
//   /token_classify  [entity, ...] for one text, [[...], ...] for a list, in text order, as
//              Hugging Face's token-classification pipeline: {"entity", "score", "index",
//              "word", "start", "end"} per token (aggregation none) or {"entity_group", "score",
//              "word", "start", "end"} per group; start/end are code-point offsets (Python
//              string indices) into the input
//   /info      TEI's Info object for one served model.
#pragma once

#include <string>
#include <vector>

#include "dflash/v1/dflash.pb.h"
#include "server/http/tei_requests.h"

namespace dflash::http {

std::string RenderTeiEmbed(const v1::EmbedResponse& response);
std::string RenderTeiPredict(const v1::ClassifyResponse& response, const TeiPredict& request);
std::string RenderTeiRerank(const v1::RerankResponse& response, bool return_text);
std::string RenderTeiTokenize(const v1::TokenizeResponse& response, const TeiTokenize& request);
std::string RenderTeiDecode(const std::vector<std::string>& texts);
std::string RenderTeiZeroShot(const v1::ZeroShotResponse& response, bool batch);
std::string RenderTeiTokenClassify(const v1::TokenClassifyResponse& response, bool batch);
// `model` is one of `info`'s models; `max_inflight` the server's max_inflight_requests.
std::string RenderTeiInfo(const v1::InfoResponse& info, const v1::ModelInfo& model,
                          int max_inflight, int tokenization_workers);

}  // namespace dflash::http
