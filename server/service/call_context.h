// What the transport (gRPC unary or stream) tells the pipeline about one request, and how the
// pipeline answers it.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/batching/batch_scheduler.h"

namespace dflash::serving {

struct CallContext {
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

}  // namespace dflash::serving
