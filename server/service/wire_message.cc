#include "server/service/wire_message.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "google/protobuf/stubs/logging.h"

namespace dflash::serving {
namespace {

// Protobuf reports why a parse failed (a string field's invalid UTF-8, naming the field) only
// through its log. While this thread parses a request, the message goes to the parse's error
// instead of stderr, so a client cannot fill the log with malformed requests and still learns
// what was wrong; any other protobuf message goes to the server's log.
thread_local std::string* parse_log = nullptr;

void RouteProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                      const std::string& message) {
  if (parse_log != nullptr && level < google::protobuf::LOGLEVEL_FATAL) {
    absl::StrAppend(parse_log, parse_log->empty() ? "" : "; ", message);
    return;
  }
  Log().warn("protobuf {}:{}: {}", filename, line, message);
}

void InstallProtobufLogRoute() {
  static std::once_flag installed;
  std::call_once(installed, [] { google::protobuf::SetLogHandler(&RouteProtobufLog); });
}

}  // namespace

absl::Status ParseWireMessage(const grpc::ByteBuffer& bytes,
                              google::protobuf::MessageLite& message) {
  InstallProtobufLogRoute();
  grpc::ByteBuffer shared(bytes);  // Shares the slices; the reader consumes its own handle.
  grpc::ProtoBufferReader reader(&shared);
  std::string reason;
  parse_log = &reason;
  const bool parsed = reader.status().ok() && message.ParseFromZeroCopyStream(&reader);
  parse_log = nullptr;
  if (parsed) return absl::OkStatus();
  message.Clear();
  if (reason.empty()) reason = "malformed protobuf wire data";
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid ", message.GetTypeName(), " message: ", reason));
}

absl::Status SerializeWireMessage(const google::protobuf::MessageLite& message,
                                  grpc::ByteBuffer& bytes) {
  bool own_buffer = false;
  const grpc::Status status = grpc::SerializationTraits<google::protobuf::MessageLite>::Serialize(
      message, &bytes, &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("cannot serialize ", message.GetTypeName(), ": ", status.error_message()));
}

}  // namespace dflash::serving
