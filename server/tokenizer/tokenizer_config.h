// The tokenizer settings of a checkpoint directory: tokenizer_config.json, special_tokens_map.json
// and added_tokens.json, every file and field optional (docs/deberta.md#checkpoint-files and
// #vocabulary-and-special-ids). Reads what transformers 4.x and 5.x write: special tokens as
// strings or AddedToken objects
// ({"content": ...}), added_tokens_decoder ({"128000": {"content": "[MASK]", ...}}), the list of
// extra special tokens under either "additional_special_tokens" (4.x) or "extra_special_tokens"
// (5.x), and added_tokens.json ({"[MASK]": 128000}).
//
// Precedence follows transformers 5.17's from_pretrained: when tokenizer_config.json has
// added_tokens_decoder, the two legacy files are not read; otherwise special_tokens_map.json
// overrides the special tokens of tokenizer_config.json and extends its extra special tokens, and
// added_tokens.json supplies ids.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/truncation.h"

namespace dflash {

struct TokenizerConfig {
  bool do_lower_case = false;
  bool split_by_punct = false;
  // nullopt when absent or huge (transformers writes int(1e30) for "no limit").
  std::optional<int64_t> model_max_length;
  TruncationSide truncation_side = TruncationSide::kRight;

  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string unk_token = "[UNK]";
  std::string mask_token = "[MASK]";
  // Further special tokens, in file order (duplicates of the five above are dropped).
  std::vector<std::string> additional_special_tokens;
  // Tokens whose id the files state: added_tokens_decoder, then added_tokens.json. Sorted by id.
  std::vector<std::pair<std::string, int64_t>> explicit_token_ids;
};

// Reads the three files from `model_dir`. A missing file is not an error; malformed JSON, a field
// of the wrong type, a bad id or conflicting ids are INVALID_ARGUMENT naming the file and field.
absl::StatusOr<TokenizerConfig> LoadTokenizerConfig(const std::filesystem::path& model_dir);

}  // namespace dflash
