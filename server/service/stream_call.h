// The gRPC side of one bidirectional stream (ClassifyStream, RerankStream, EmbedStream): every
// request message is processed independently and concurrently (so they batch together), and
// exactly one response message is written per request message, in the order they were read.
//
// Messages travel as raw bytes: one that does not parse is answered in place with a StreamError
// (INVALID_ARGUMENT, the reason, no request_id) and the stream goes on.
//
// Flow control: at most kMaxOutstanding requests of one stream are in the pipeline at once; the
// next read starts only when an answer has been written, so a client that sends faster than the
// model computes is slowed by HTTP/2 flow control instead of growing the server's memory.
// The stream ends with OK once the client has half-closed and every answer is written; if a write
// fails (client gone), the remaining answers are dropped and the stream ends CANCELLED.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "server/service/call_context.h"
#include "server/service/unary_call.h"
#include "server/service/wire_message.h"

namespace dflash::serving {

template <typename Request, typename Response, typename StreamResponse>
class StreamCall final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  static constexpr int kMaxOutstanding = 64;
  // Runs one request (admission included); must call `respond` exactly once. The request
  // outlives that call.
  using Process = std::function<void(const Request&, CallContext, Responder<Response>)>;
  // The request_id echoed in a StreamError.
  using RequestId = std::function<std::string(const Request&)>;
  // Told about each message that does not parse (it is answered with a StreamError).
  using Malformed = std::function<void(const absl::Status&)>;

  // Starts reading unless `refusal` is an error, in which case the stream ends with it at once.
  StreamCall(grpc::CallbackServerContext* context, Process process, RequestId request_id,
             Malformed malformed, const absl::Status& refusal)
      : context_(context),
        process_(std::move(process)),
        request_id_(std::move(request_id)),
        malformed_(std::move(malformed)) {
    if (!refusal.ok()) {
      finished_ = true;
      this->Finish(ToGrpcStatus(refusal));
      return;
    }
    read_in_flight_ = true;
    this->StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The client half-closed (or the call broke).
      Ops ops;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        read_in_flight_ = false;
        reads_done_ = true;
        ops = NextOpsLocked();
      }
      Run(ops);
      return;
    }
    auto request = std::make_shared<Request>();
    const absl::Status parsed = ParseWireMessage(incoming_, *request);
    incoming_.Clear();
    uint64_t index = 0;
    Ops ops;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      index = next_index_++;
      slots_.emplace(index, std::nullopt);
      read_in_flight_ = false;
      ops = NextOpsLocked();
    }
    Run(ops);
    if (!parsed.ok()) {
      malformed_(parsed);
      Complete(index, ErrorMessage(*request, parsed));
      return;
    }
    CallContext call = MakeCallContext(*context_, cancelled_);
    process_(*request, std::move(call), [this, index, request](absl::StatusOr<Response> result) {
      StreamResponse message;
      if (result.ok()) {
        *message.mutable_response() = std::move(*result);
      } else {
        message = ErrorMessage(*request, result.status());
      }
      Complete(index, std::move(message));
    });
  }

  void OnWriteDone(bool ok) override {
    Ops ops;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      writing_ = false;
      slots_.erase(write_index_++);
      if (!ok) write_failed_ = true;
      ops = NextOpsLocked();
    }
    Run(ops);
  }

  void OnCancel() override { cancelled_->store(true, std::memory_order_relaxed); }
  void OnDone() override { delete this; }

 private:
  // gRPC operations decided under the lock and started after releasing it.
  struct Ops {
    const grpc::ByteBuffer* write = nullptr;
    bool read = false;
    std::optional<grpc::Status> finish;
  };

  StreamResponse ErrorMessage(const Request& request, const absl::Status& status) const {
    StreamResponse message;
    message.mutable_error()->set_code(static_cast<int32_t>(status.code()));
    message.mutable_error()->set_message(std::string(status.message()));
    message.mutable_error()->set_request_id(request_id_(request));
    return message;
  }

  void Complete(uint64_t index, const StreamResponse& message) {
    grpc::ByteBuffer bytes;
    if (absl::Status serialized = SerializeWireMessage(message, bytes); !serialized.ok()) {
      // Not expected (the pipeline refuses answers over the send limit); the slot still gets its
      // one answer.
      SerializeWireMessage(ErrorMessage(Request(), serialized), bytes).IgnoreError();
    }
    Ops ops;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slots_[index] = std::move(bytes);
      ops = NextOpsLocked();
    }
    Run(ops);
  }

  Ops NextOpsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    Ops ops;
    if (finished_) return ops;
    if (write_failed_) {
      // Nobody reads the answers any more: drop those that are ready.
      while (!slots_.empty() && slots_.begin()->second.has_value() && !writing_) {
        slots_.erase(slots_.begin());
        ++write_index_;
      }
    } else if (!writing_) {
      auto head = slots_.find(write_index_);
      if (head != slots_.end() && head->second.has_value()) {
        writing_ = true;
        ops.write = &*head->second;
      }
    }
    const bool stream_over = reads_done_ || write_failed_;
    if (!stream_over && !read_in_flight_ && static_cast<int>(slots_.size()) < kMaxOutstanding) {
      read_in_flight_ = true;
      ops.read = true;
    }
    if (stream_over && slots_.empty() && !writing_ && !read_in_flight_) {
      finished_ = true;
      ops.finish = write_failed_ || cancelled_->load(std::memory_order_relaxed)
                       ? grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled")
                       : grpc::Status::OK;
    }
    return ops;
  }

  void Run(const Ops& ops) {
    if (ops.write != nullptr) this->StartWrite(ops.write);
    if (ops.read) this->StartRead(&incoming_);
    if (ops.finish) this->Finish(*ops.finish);
  }

  grpc::CallbackServerContext* const context_;
  const Process process_;
  const RequestId request_id_;
  const Malformed malformed_;
  const std::shared_ptr<CancellationFlag> cancelled_ = std::make_shared<CancellationFlag>(false);
  grpc::ByteBuffer incoming_;  // Written by gRPC between StartRead and OnReadDone only.

  std::mutex mutex_;
  // Requests read and not yet written, by arrival index; a value once answered. std::map keeps
  // them in index order, and its nodes never move, so a pointer handed to StartWrite stays valid.
  std::map<uint64_t, std::optional<grpc::ByteBuffer>> slots_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_index_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t write_index_ ABSL_GUARDED_BY(mutex_) = 0;
  bool read_in_flight_ ABSL_GUARDED_BY(mutex_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mutex_) = false;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace dflash::serving
