// Truncation of one or two token sequences to a length budget, with the rules of the Rust
// `tokenizers` library (transformers-4 "fast" tokenizers and all of transformers 5);
// docs/deberta.md#truncation 4.3. The numbers exclude [CLS]/[SEP]: the budget is max_length minus
// the special tokens of the template (2 for one text, 3 for a pair).
//
// Deviation: a max_length below that count of special tokens is INVALID_ARGUMENT here.
// transformers 5.17 silently skips truncation altogether in that case (tokenizers subtracts the
// special tokens from max_length in unsigned arithmetic, which wraps around), so a request for
// max_length=2 on a pair would come back untruncated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash {

enum class TruncationStrategy {
  kDoNotTruncate,
  kLongestFirst,  // transformers' truncation=True.
  kOnlyFirst,
  kOnlySecond,
};

// Which end loses tokens: kRight keeps the beginning of each text, kLeft its end.
enum class TruncationSide { kRight, kLeft };

struct TruncationOptions {
  TruncationStrategy strategy = TruncationStrategy::kDoNotTruncate;
  TruncationSide side = TruncationSide::kRight;
  // Maximum total tokens, [CLS] and [SEP] included. Ignored by kDoNotTruncate; otherwise at least
  // the number of special tokens (2 for one text, 3 for a pair; equal keeps only those).
  int64_t max_length = 0;
};

// Parses the names transformers uses: "longest_first", "only_first", "only_second",
// "do_not_truncate".
absl::StatusOr<TruncationStrategy> ParseTruncationStrategy(absl::string_view name);
absl::string_view TruncationStrategyName(TruncationStrategy strategy);
// "right" or "left".
absl::StatusOr<TruncationSide> ParseTruncationSide(absl::string_view name);

// How many content tokens of each sequence survive.
struct KeptLengths {
  size_t first = 0;
  size_t second = 0;
};

// Applies `options` to content lengths `first` and (for a pair) `second`:
// - longest_first: nothing when both fit the budget b; else when the shorter one has at most
//   floor(b/2) tokens it stays whole and the longer gets the rest; else the shorter gets floor(b/2)
//   and the longer ceil(b/2) (on a tie, the first text counts as the shorter one).
// - only_first / only_second: cut that sequence by the excess; INVALID_ARGUMENT when the other
//   sequence alone fills the budget (tokenizers' "Sequence to truncate too short" error), and when
//   only_second is asked for a single text.
// - a single text keeps b tokens.
// - b = 0 empties both sequences whatever the strategy, as tokenizers does.
absl::StatusOr<KeptLengths> ComputeTruncation(size_t first, std::optional<size_t> second,
                                              const TruncationOptions& options);
// The same for a template that adds `special_tokens` ids (the budget is max_length minus them).
absl::StatusOr<KeptLengths> ComputeTruncation(size_t first, std::optional<size_t> second,
                                              const TruncationOptions& options,
                                              int64_t special_tokens);

}  // namespace dflash
