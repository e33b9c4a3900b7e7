// Which tokenizer serves a checkpoint directory. Under "auto" the rule of transformers 5.17's
// AutoTokenizer: tokenizer.json when the directory has one, else spm.model. An operator can name
// the source instead (the per-model `tokenizer` key of the server configuration).
#pragma once

#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/tokenizer/tokenizer.h"

namespace dflash {

enum class TokenizerChoice { kAuto, kTokenizerJson, kSentencePiece };

// Parses "auto", "tokenizer_json" or "sentencepiece".
absl::StatusOr<TokenizerChoice> ParseTokenizerChoice(absl::string_view name);

// Loads the tokenizer of `model_dir` by `choice`. NOT_FOUND naming the files looked for when the
// directory has neither (or not the one asked for).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::filesystem::path& model_dir,
                                                         TokenizerChoice choice = {},
                                                         const TokenizerOptions& options = {});

}  // namespace dflash
