// tokenizer.json's "decoder": how the tokens of ids become text again (/decode). Implemented: the
// Metaspace decoder that DeBERTa-v2/v3 and mDeBERTa files carry (tests/golden/tokenizer_json).
// Another decoder, or none, still loads (encoding does not use it); Decode then answers
// FAILED_PRECONDITION naming the JSON path.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/tokenizer/tokenizer_json/json_node.h"

namespace dflash::tokenizer_json {

class Decoder {
 public:
  // Reads the "decoder" member at `node`. INVALID_ARGUMENT for a malformed Metaspace decoder; an
  // unsupported or missing decoder is not an error here (see Decode).
  static absl::StatusOr<Decoder> Parse(const JsonNode& node);

  // The text of `tokens` (model pieces and added-token contents, in order), as tokenizers'
  // Metaspace decoder writes it: the replacement character becomes a space, except in the first
  // token, where it is dropped unless prepend_scheme is "never"; the tokens are then joined.
  absl::StatusOr<std::string> Decode(const std::vector<absl::string_view>& tokens) const;

 private:
  absl::Status unsupported_;  // Not OK: why Decode cannot run.
  std::string replacement_;   // One UTF-8 character.
  bool strip_first_ = true;   // prepend_scheme is not "never".
};

}  // namespace dflash::tokenizer_json
