// Opens the channels of a run. This is the library's one way to make channels, and it enforces the
// loopback rule (target_address.h), so no caller of the library can aim it at another machine.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dflash::loadtest {

// `count` channels to `target` (INVALID_ARGUMENT unless it is a loopback target). Each has its own
// subchannel pool, hence its own connection, so that several channels spread the client's HTTP/2
// work over several connections. Message sizes are unlimited (large Embed answers);
// `tls_server_name`, when not empty, overrides the name checked in the server certificate.
absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> MakeLoopbackChannels(
    absl::string_view target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    int count, absl::string_view tls_server_name = "");

// Connects every channel, waiting at most `timeout` in all (UNAVAILABLE naming the target and the
// channel that did not connect). RunLoad expects connected channels: a call on a channel whose
// first connection attempt failed fails at once, and gRPC retries that channel only after its
// backoff, so a run started before connecting can count a channel's every call as an error.
absl::Status ConnectChannels(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                             absl::string_view target, absl::Duration timeout);

}  // namespace dflash::loadtest
