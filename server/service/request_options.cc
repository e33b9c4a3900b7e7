#include "server/service/request_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dflash::serving {

namespace {

// INVALID_ARGUMENT for an enum value this server does not know: a newer client's value must not
// silently mean the default.
template <typename Enum>
absl::Status CheckEnum(Enum value, bool (*is_valid)(int), absl::string_view field) {
  if (is_valid(static_cast<int>(value))) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown value ", static_cast<int>(value)));
}

}  // namespace

absl::StatusOr<RequestTruncation> ResolveTruncation(const ServedModel& model,
                                                    std::optional<bool> truncate,
                                                    v1::TruncationDirection direction,
                                                    v1::TruncationStrategy strategy,
                                                    TruncationStrategy rpc_default) {
  DFLASH_RETURN_IF_ERROR(
      CheckEnum(direction, &v1::TruncationDirection_IsValid, "truncation_direction"));
  DFLASH_RETURN_IF_ERROR(
      CheckEnum(strategy, &v1::TruncationStrategy_IsValid, "truncation_strategy"));
  RequestTruncation result;
  result.max_length = model.max_input_length();
  const bool enabled = truncate.value_or(model.entry().truncate);
  if (!enabled) {
    result.reject_over_length = true;
    return result;  // Both options stay kDoNotTruncate.
  }
  TruncationOptions options;
  options.max_length = model.max_input_length();
  options.side = model.tokenizer().config().truncation_side;
  if (direction == v1::TRUNCATION_DIRECTION_RIGHT) options.side = TruncationSide::kRight;
  if (direction == v1::TRUNCATION_DIRECTION_LEFT) options.side = TruncationSide::kLeft;
  result.single = options;
  result.single.strategy = TruncationStrategy::kLongestFirst;
  result.pair = options;
  switch (strategy) {
    case v1::TRUNCATION_STRATEGY_LONGEST_FIRST:
      result.pair.strategy = TruncationStrategy::kLongestFirst;
      break;
    case v1::TRUNCATION_STRATEGY_ONLY_FIRST:
      result.pair.strategy = TruncationStrategy::kOnlyFirst;
      break;
    case v1::TRUNCATION_STRATEGY_ONLY_SECOND:
      result.pair.strategy = TruncationStrategy::kOnlySecond;
      break;
    default:
      result.pair.strategy = rpc_default;
      break;
  }
  return result;
}

absl::Status CheckLength(const RequestTruncation& truncation, size_t tokens,
                         absl::string_view field) {
  if (!truncation.reject_over_length || tokens <= static_cast<size_t>(truncation.max_length)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", tokens, " tokens, more than the model's maximum of ",
                   truncation.max_length, "; shorten it or set truncate = true"));
}

absl::StatusOr<Priority> ResolvePriority(const ServedModel& model, v1::Priority priority) {
  DFLASH_RETURN_IF_ERROR(CheckEnum(priority, &v1::Priority_IsValid, "priority"));
  Priority level = Priority::kNormal;
  if (priority == v1::PRIORITY_LOW) level = Priority::kLow;
  if (priority == v1::PRIORITY_HIGH) level = Priority::kHigh;
  return std::min(level, model.priority_cap());
}

absl::Status CheckCount(size_t count, int limit, absl::string_view field, absl::string_view what) {
  if (count == 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": at least one ", what, " is required"));
  }
  if (limit > 0 && count > static_cast<size_t>(limit)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", count, " ", what,
                                                   ", more than the server's limit of ", limit,
                                                   "; split the request"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequestTokens(const ServedModel& model, int64_t tokens) {
  const int64_t limit = model.entry().limits.max_request_tokens;
  if (limit == 0 || tokens <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "request: ", tokens, " tokens after tokenization, more than the server's limit of ", limit,
      " tokens per request (limits.max_request_tokens); split the request"));
}

absl::StatusOr<ScoreFunction> ResolveScoreFunction(const ServedModel& model,
                                                   v1::ScoreFunction requested) {
  switch (requested) {
    case v1::SCORE_FUNCTION_UNSPECIFIED:
      return model.default_score_function();
    case v1::SCORE_FUNCTION_SOFTMAX:
      return ScoreFunction::kSoftmax;
    case v1::SCORE_FUNCTION_SIGMOID:
      return ScoreFunction::kSigmoid;
    case v1::SCORE_FUNCTION_RAW:
      return ScoreFunction::kRawLogits;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("score_function: unknown value ", static_cast<int>(requested)));
  }
}

}  // namespace dflash::serving
