// The "pre_tokenizer" of tokenizer.json: Sequence, WhitespaceSplit, Metaspace (replacement,
// prepend_scheme always/first/never or the older add_prefix_space, split) and Punctuation, with
// the semantics of the `tokenizers` library. Any other type is refused at load with its JSON path.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/tokenizer_json/aligned_text.h"
#include "server/tokenizer/tokenizer_json/json_node.h"

namespace dflash::tokenizer_json {

class PreTokenizer {
 public:
  // Reads the pre-tokenizer object at `node` (not null). `depth` counts enclosing Sequences.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Parse(const JsonNode& node, int depth = 0);
  ~PreTokenizer();

  // Splits each piece further; pieces that end up empty are dropped.
  void Split(std::vector<AlignedText>* pieces) const;

 private:
  enum class Kind { kSequence, kWhitespaceSplit, kMetaspace, kPunctuation };
  enum class PrependScheme { kAlways, kFirst, kNever };
  PreTokenizer() = default;
  std::vector<AlignedText> SplitOne(const AlignedText& piece) const;

  Kind kind_ = Kind::kSequence;
  std::vector<std::unique_ptr<PreTokenizer>> children_;  // kSequence.
  std::string replacement_;                              // kMetaspace: one character.
  char32_t replacement_char_ = 0;
  PrependScheme prepend_scheme_ = PrependScheme::kAlways;
  bool split_ = true;
  SplitBehavior behavior_ = SplitBehavior::kIsolated;  // kPunctuation.
};

}  // namespace dflash::tokenizer_json
