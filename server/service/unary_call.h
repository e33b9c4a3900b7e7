// The gRPC side of one unary call: a callback-API reactor that the pipeline answers through a
// Responder, from any thread. It carries the call's deadline and a cancellation flag (set by
// OnCancel) into the pipeline, adds a retry hint to RESOURCE_EXHAUSTED answers that a retry can
// cure, and deletes itself when gRPC is done with the call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <utility>

#include "absl/time/time.h"
#include "server/service/call_admission.h"
#include "server/service/call_context.h"
#include "server/service/grpc_status.h"
#include "server/service/wire_message.h"

namespace dflash::serving {

// The hint sent with RESOURCE_EXHAUSTED: gRPC's retry pushback trailer, honoured by clients with a
// retry policy, and readable by any client.
inline constexpr char kRetryPushbackKey[] = "grpc-retry-pushback-ms";
inline constexpr char kRetryPushbackMillis[] = "100";

inline CallContext MakeCallContext(const grpc::CallbackServerContext& context,
                                   std::shared_ptr<const CancellationFlag> cancelled) {
  CallContext call;
  call.received = absl::Now();
  const auto deadline = context.deadline();
  // gRPC reports "no deadline" as the far future; absl::FromChrono would overflow on it.
  call.deadline = deadline >= std::chrono::system_clock::time_point::max() - std::chrono::hours(1)
                      ? absl::InfiniteFuture()
                      : absl::FromChrono(deadline);
  call.cancelled = std::move(cancelled);
  return call;
}

// One unary call on raw bytes: the request is parsed into the call's own message (which outlives
// the pipeline's use of it) and the answer is serialized here.
template <typename Request, typename Response>
class UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  // `admission` (may be null) is released when the call is answered.
  UnaryCall(grpc::CallbackServerContext* context, grpc::ByteBuffer* response_bytes,
            CallAdmission* admission)
      : context_(context), response_bytes_(response_bytes), admission_(admission) {}

  CallContext Context() const { return MakeCallContext(*context_, cancelled_); }

  // Parses the call's request from `bytes`; INVALID_ARGUMENT with the reason when it does not.
  absl::Status ParseRequest(const grpc::ByteBuffer& bytes) {
    return ParseWireMessage(bytes, request_);
  }
  const Request& request() const { return request_; }

  // The Responder that finishes this call; call it exactly once.
  Responder<Response> MakeResponder() {
    return [this](absl::StatusOr<Response> result) { Answer(std::move(result)); };
  }

  void Answer(absl::StatusOr<Response> result) {
    absl::Status status = result.status();
    if (result.ok()) status = SerializeWireMessage(*result, *response_bytes_);
    if (status.code() == absl::StatusCode::kResourceExhausted && IsRetryable(status)) {
      context_->AddTrailingMetadata(kRetryPushbackKey, kRetryPushbackMillis);
    }
    if (admission_ != nullptr) admission_->Release();
    Finish(ToGrpcStatus(status));
  }

  // Answers without having been admitted (refused before admission).
  void Refuse(const absl::Status& status) {
    admission_ = nullptr;
    Answer(status);
  }

  void OnCancel() override { cancelled_->store(true, std::memory_order_relaxed); }
  void OnDone() override { delete this; }

 private:
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_bytes_;
  CallAdmission* admission_;
  Request request_;
  const std::shared_ptr<CancellationFlag> cancelled_ = std::make_shared<CancellationFlag>(false);
};

}  // namespace dflash::serving
