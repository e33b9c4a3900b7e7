#include "server/tokenizer/truncation.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dflash {

absl::StatusOr<TruncationStrategy> ParseTruncationStrategy(absl::string_view name) {
  if (name == "longest_first") return TruncationStrategy::kLongestFirst;
  if (name == "only_first") return TruncationStrategy::kOnlyFirst;
  if (name == "only_second") return TruncationStrategy::kOnlySecond;
  if (name == "do_not_truncate") return TruncationStrategy::kDoNotTruncate;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown truncation strategy \"", name,
                   "\" (expected longest_first, only_first, only_second or do_not_truncate)"));
}

absl::string_view TruncationStrategyName(TruncationStrategy strategy) {
  switch (strategy) {
    case TruncationStrategy::kDoNotTruncate:
      return "do_not_truncate";
    case TruncationStrategy::kLongestFirst:
      return "longest_first";
    case TruncationStrategy::kOnlyFirst:
      return "only_first";
    case TruncationStrategy::kOnlySecond:
      return "only_second";
  }
  return "unknown";
}

absl::StatusOr<TruncationSide> ParseTruncationSide(absl::string_view name) {
  if (name == "right") return TruncationSide::kRight;
  if (name == "left") return TruncationSide::kLeft;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown truncation side \"", name, "\" (expected right or left)"));
}

absl::StatusOr<KeptLengths> ComputeTruncation(size_t first, std::optional<size_t> second,
                                              const TruncationOptions& options) {
  return ComputeTruncation(first, second, options, second.has_value() ? 3 : 2);
}

absl::StatusOr<KeptLengths> ComputeTruncation(size_t first, std::optional<size_t> second,
                                              const TruncationOptions& options,
                                              int64_t special_tokens) {
  KeptLengths kept{first, second.value_or(0)};
  if (options.strategy == TruncationStrategy::kDoNotTruncate) return kept;
  const int64_t specials = special_tokens;
  if (options.max_length < specials) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_length ", options.max_length, " is smaller than the ", specials,
                     " special tokens of ", second.has_value() ? "a text pair" : "a single text"));
  }
  const size_t budget = static_cast<size_t>(options.max_length - specials);
  // tokenizers empties both sequences when nothing but the special tokens fits, whatever the
  // strategy.
  if (budget == 0) return KeptLengths{0, 0};
  if (first + kept.second <= budget) return kept;
  if (!second.has_value()) {
    if (options.strategy == TruncationStrategy::kOnlySecond) {
      return absl::InvalidArgumentError(
          "truncation only_second needs a text pair, but only one text was given");
    }
    kept.first = budget;
    return kept;
  }
  switch (options.strategy) {
    case TruncationStrategy::kLongestFirst: {
      const bool first_is_short = first <= *second;
      const size_t short_length = first_is_short ? first : *second;
      size_t short_kept = short_length;
      size_t long_kept = budget - short_length;
      if (short_length > budget / 2) {
        short_kept = budget / 2;
        long_kept = budget - short_kept;
      }
      kept.first = first_is_short ? short_kept : long_kept;
      kept.second = first_is_short ? long_kept : short_kept;
      return kept;
    }
    case TruncationStrategy::kOnlyFirst:
    case TruncationStrategy::kOnlySecond: {
      const bool cut_first = options.strategy == TruncationStrategy::kOnlyFirst;
      const size_t other = cut_first ? *second : first;
      if (other >= budget) {
        return absl::InvalidArgumentError(absl::StrCat(
            "truncation ", TruncationStrategyName(options.strategy), " cannot reach max_length ",
            options.max_length, ": the ", cut_first ? "second" : "first", " text alone has ", other,
            " tokens, which leaves no room for the ", cut_first ? "first" : "second", " (budget ",
            budget, " tokens besides the ", specials,
            " special tokens); use longest_first or a larger max_length"));
      }
      (cut_first ? kept.first : kept.second) = budget - other;
      return kept;
    }
    case TruncationStrategy::kDoNotTruncate:
      break;
  }
  return kept;
}

}  // namespace dflash
