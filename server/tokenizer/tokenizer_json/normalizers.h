// The "normalizer" of tokenizer.json: Sequence, Replace, NFC, NFD, NFKC, NFKD, Lowercase, Strip
// and Precompiled, with the semantics of the `tokenizers` library (offsets kept through every
// change, aligned_text.h). Any other type is refused at load with its JSON path.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/tokenizer_json/aligned_text.h"
#include "server/tokenizer/tokenizer_json/json_node.h"
#include "server/tokenizer/tokenizer_json/precompiled_charsmap.h"
#include "server/tokenizer/tokenizer_json/replace_pattern.h"
#include "server/tokenizer/tokenizer_json/unicode_normalization.h"

namespace dflash::tokenizer_json {

class Normalizer {
 public:
  // Reads the normalizer object at `node` (not null). `depth` counts enclosing Sequences.
  static absl::StatusOr<std::unique_ptr<Normalizer>> Parse(const JsonNode& node, int depth = 0);
  ~Normalizer();

  void Normalize(AlignedText* text) const;

 private:
  enum class Kind { kSequence, kReplace, kUnicode, kLowercase, kStrip, kPrecompiled };
  Normalizer() = default;

  Kind kind_ = Kind::kSequence;
  std::vector<std::unique_ptr<Normalizer>> children_;  // kSequence.
  std::unique_ptr<ReplacePattern> pattern_;            // kReplace.
  std::string content_;                                // kReplace.
  NormalizationForm form_ = NormalizationForm::kNfc;   // kUnicode.
  bool strip_left_ = false;                            // kStrip.
  bool strip_right_ = false;
  std::optional<PrecompiledCharsmap> charsmap_;  // kPrecompiled.
};

}  // namespace dflash::tokenizer_json
