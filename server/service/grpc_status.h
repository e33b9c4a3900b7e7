// absl::Status -> grpc::Status at the edge of the service. The code numbering is the same
// (google.rpc.Code), so codes map one to one.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace dflash::serving {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace dflash::serving
