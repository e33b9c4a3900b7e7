// Text Embeddings Inference request bodies into dflash.v1 requests. The fields and input shapes
// follow TEI 1.9: `inputs` as a string, a pair [string, string] (/predict) or a batch, token-id
// lists where TEI takes them (/embed); /decode's ids;
// truncate, truncation_direction ("Left" / "Right"), normalize, dimensions, raw_scores,
// return_text, add_special_tokens. Unset `truncate` means the model's configured default (TEI's
// --auto-truncate). Extensions, in the same style: an optional `model` field (as the path prefix),
// /zero_shot, /token_classify, and the Hugging Face Inference API form of / and /invocations for
// classifiers (`parameters`: top_k, function_to_apply) and token classifiers (`parameters`:
// aggregation_strategy, ignore_labels). Unknown fields are ignored, as TEI does.
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

// /embed: `inputs` items may be token-id lists (ReadInputList); such an input is the model
// sequence as given, as TEI passes ids on without adding special tokens.
struct TeiEmbed {
  v1::EmbedRequest request;
  std::vector<std::optional<std::vector<int32_t>>> token_ids;  // InputList::token_ids.
};
struct TeiPredict {
  v1::ClassifyRequest request;
  bool batch = false;  // A batch answers a list per input; a single input its list alone.
  // The Hugging Face Inference API form (a `parameters` object): always a list per input.
  bool inference_api = false;
};
struct TeiRerank {
  v1::RerankRequest request;
  bool return_text = false;
};
struct TeiTokenize {
  v1::TokenizeRequest request;
  std::vector<std::string> texts;  // The inputs, to cut each token's text from.
};
// /decode: `ids` a token-id list or a list of them; skip_special_tokens (default true). The
// answer is a list of strings, one per id list, as TEI's.
struct TeiDecode {
  std::string model;
  std::vector<std::vector<int32_t>> ids;
  bool skip_special_tokens = true;
};
struct TeiZeroShot {
  v1::ZeroShotRequest request;
  bool batch = false;
};
// /token_classify: aggregation_strategy ("none", "simple", "first", "average", "max"; unset: the
// dflash.v1 default, none) and ignore_labels (unset: ["O"]; [] keeps every label), at the top
// level or in a `parameters` object as the Hugging Face Inference API sends them.
struct TeiTokenClassify {
  v1::TokenClassifyRequest request;
  bool batch = false;
};

absl::StatusOr<TeiEmbed> ParseTeiEmbed(const nlohmann::json& body);
absl::StatusOr<TeiPredict> ParseTeiPredict(const nlohmann::json& body);
absl::StatusOr<TeiRerank> ParseTeiRerank(const nlohmann::json& body);
absl::StatusOr<TeiTokenize> ParseTeiTokenize(const nlohmann::json& body);
absl::StatusOr<TeiZeroShot> ParseTeiZeroShot(const nlohmann::json& body);
absl::StatusOr<TeiDecode> ParseTeiDecode(const nlohmann::json& body);
absl::StatusOr<TeiTokenClassify> ParseTeiTokenClassify(const nlohmann::json& body);

}  // namespace dflash::http
