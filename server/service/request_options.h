// The per-request choices shared by the inference RPCs, resolved against a served model: which
// model, truncation, priority, and the configured request limits. Every error is INVALID_ARGUMENT
// (NOT_FOUND for an unknown model) and names the request field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "dflash/v1/dflash.pb.h"
#include "server/scoring/label_scores.h"
#include "server/service/served_model.h"
#include "server/tokenizer/truncation.h"

namespace dflash::serving {

// How a request's sequences are truncated, and whether over-long ones are an error.
struct RequestTruncation {
  TruncationOptions pair;    // For text pairs.
  TruncationOptions single;  // For single texts (always truncated as a whole).
  bool reject_over_length = false;
  int max_length = 0;  // The model's maximum input length.
};

// `truncate` unset: the model's configured default. Strategy unset: `rpc_default`. INVALID_ARGUMENT
// for a direction or strategy value this server does not know.
absl::StatusOr<RequestTruncation> ResolveTruncation(const ServedModel& model,
                                                    std::optional<bool> truncate,
                                                    v1::TruncationDirection direction,
                                                    v1::TruncationStrategy strategy,
                                                    TruncationStrategy rpc_default);

// What a request asks for beyond its inputs, resolved against the model.
struct RequestSettings {
  RequestTruncation truncation;
  Priority priority = Priority::kNormal;
};

// The truncation and priority of any request message (those without a strategy or a priority
// field get the defaults); INVALID_ARGUMENT as ResolveTruncation and ResolvePriority.
template <typename Request>
absl::StatusOr<RequestSettings> ResolveSettings(const ServedModel& model, const Request& request,
                                                TruncationStrategy rpc_default) {
  v1::TruncationStrategy strategy = v1::TRUNCATION_STRATEGY_UNSPECIFIED;
  if constexpr (requires { request.truncation_strategy(); }) {
    strategy = request.truncation_strategy();
  }
  RequestSettings settings;
  DFLASH_ASSIGN_OR_RETURN(
      settings.truncation,
      ResolveTruncation(model,
                        request.has_truncate() ? std::optional(request.truncate()) : std::nullopt,
                        request.truncation_direction(), strategy, rpc_default));
  if constexpr (requires { request.priority(); }) {
    DFLASH_ASSIGN_OR_RETURN(settings.priority, ResolvePriority(model, request.priority()));
  }
  return settings;
}

// INVALID_ARGUMENT naming `field` when truncation is off and the encoding is too long.
absl::Status CheckLength(const RequestTruncation& truncation, size_t tokens,
                         absl::string_view field);

// The request's priority, capped at the model's priority_cap; INVALID_ARGUMENT for an unknown
// value.
absl::StatusOr<Priority> ResolvePriority(const ServedModel& model, v1::Priority priority);

// INVALID_ARGUMENT "<field>: <count> <what>, more than the limit of <limit> ..." when limit > 0
// and count > limit; also for count == 0 ("<field>: at least one <what> is required").
absl::Status CheckCount(size_t count, int limit, absl::string_view field, absl::string_view what);

// INVALID_ARGUMENT when a request expands to `tokens` model tokens after tokenization, more than
// the model's max_request_tokens (0: no limit); the message names the limit and says to split the
// request.
absl::Status CheckRequestTokens(const ServedModel& model, int64_t tokens);

// The score function of the request, or the model's default for SCORE_FUNCTION_UNSPECIFIED.
absl::StatusOr<ScoreFunction> ResolveScoreFunction(const ServedModel& model,
                                                   v1::ScoreFunction requested);

}  // namespace dflash::serving
