// The pattern of a Replace normalizer: {"String": "..."} or {"Regex": "..."}. `tokenizers` runs
// regexes with Oniguruma; this server implements the subset that DeBERTa files use, exactly:
// alternatives separated by '|', each either one atom with a greedy quantifier ({n,} {n} {n,m} +
// with n >= 1) or a sequence of unquantified atoms; an atom is a literal character, an escape
// (\s \S \d \w \n \r \t \f \v or an escaped symbol), '.' or a bracket class of those ([\n\r\t],
// [a-z], [^...]). At one position the first alternative that matches wins, as in Oniguruma.
// Anything else is refused at load with the pattern's JSON path.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/tokenizer/tokenizer_json/json_node.h"

namespace dflash::tokenizer_json {

class ReplacePattern {
 public:
  // Reads the {"String": ...} / {"Regex": ...} object at `node`.
  static absl::StatusOr<std::unique_ptr<ReplacePattern>> Parse(const JsonNode& node);
  ~ReplacePattern();

  // Leftmost, non-overlapping, non-empty matches in valid UTF-8 `text`, in order.
  std::vector<std::pair<size_t, size_t>> FindAll(absl::string_view text) const;

 private:
  struct CharClass;
  struct Atom;
  struct Branch;
  ReplacePattern() = default;
  // The end of the match of `branch` at `offset`, or npos.
  size_t MatchBranch(const Branch& branch, absl::string_view text, size_t offset) const;

  std::string literal_;  // A String pattern (non-empty); empty for a regex.
  std::vector<Branch> branches_;
};

}  // namespace dflash::tokenizer_json
