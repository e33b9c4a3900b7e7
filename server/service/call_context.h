// What the transport (gRPC unary or stream) tells the pipeline about one request, and how the
// pipeline answers it.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/batching/batch_scheduler.h"

namespace dflash::serving {

// The front a request came in through: the `protocol` label of the request metrics.
enum class Protocol : uint8_t {
  kDflashGrpc,  // dflash.v1 over gRPC.
  kHttp,        // The HTTP/JSON routes.
  kKserveGrpc,  // KServe v2 (Open Inference Protocol) over gRPC.
};

inline absl::string_view ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kDflashGrpc:
      return "dflash_grpc";
    case Protocol::kHttp:
      return "http";
    case Protocol::kKserveGrpc:
      return "kserve_grpc";
  }
  return "unknown";
}

struct CallContext {
  Protocol protocol = Protocol::kDflashGrpc;
  absl::Time received = absl::Now();
  absl::Time deadline = absl::InfiniteFuture();
  // Set when the client cancels; shared with the batcher so a cancelled request is never computed.
  std::shared_ptr<const CancellationFlag> cancelled;
};

// Called exactly once per request, from any thread.
// Whole microseconds of a duration, as the API's *_us fields carry them (negative: 0).
inline uint64_t DurationMicros(absl::Duration duration) {
  const int64_t micros = absl::ToInt64Microseconds(duration);
  return micros > 0 ? static_cast<uint64_t>(micros) : 0;
}

template <typename Response>
using Responder = absl::AnyInvocable<void(absl::StatusOr<Response>)>;

// RESOURCE_EXHAUSTED for an answer larger than the transport can send. Unlike an overload
// refusal, a retry cannot succeed, so the status carries a payload that tells the transport not
// to add a retry hint.
inline constexpr char kNotRetryablePayload[] = "dflash.dev/not-retryable";
inline absl::Status ResponseTooLarge(absl::string_view message) {
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(kNotRetryablePayload, absl::Cord());
  return status;
}
inline bool IsRetryable(const absl::Status& status) {
  return !status.GetPayload(kNotRetryablePayload).has_value();
}

}  // namespace dflash::serving
