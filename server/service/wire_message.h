// Request and response messages as gRPC bytes. The service registers its methods raw (bytes in,
// bytes out) and converts here, so that a message that does not parse is answered in place:
// INVALID_ARGUMENT with the reason for a unary call, a StreamError for one stream message (the
// stream goes on), counted like every other answer. gRPC's generated handlers instead end the
// call (or the whole stream) before any of the service's code runs.
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"

namespace dflash::serving {

// Parses `bytes` into `message` (cleared first). INVALID_ARGUMENT naming the message type and
// the reason (malformed wire data, a string field that is not valid UTF-8) when it does not parse.
absl::Status ParseWireMessage(const grpc::ByteBuffer& bytes,
                              google::protobuf::MessageLite& message);

// Serializes `message` into `bytes`; INTERNAL if protobuf cannot (a message over 2 GiB).
absl::Status SerializeWireMessage(const google::protobuf::MessageLite& message,
                                  grpc::ByteBuffer& bytes);

}  // namespace dflash::serving
