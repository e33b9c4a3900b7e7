#include "loadtest/loopback_channels.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "loadtest/target_address.h"

namespace dflash::loadtest {

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> MakeLoopbackChannels(
    absl::string_view target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    int count, absl::string_view tls_server_name) {
  DFLASH_ASSIGN_OR_RETURN(const std::string checked, CheckLoopbackTarget(target));
  if (count < 1 || count > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel count must be in [1, 1024], got ", count));
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < count; ++i) {
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    arguments.SetMaxReceiveMessageSize(-1);
    arguments.SetMaxSendMessageSize(-1);
    if (!tls_server_name.empty()) arguments.SetSslTargetNameOverride(std::string(tls_server_name));
    channels.push_back(grpc::CreateCustomChannel(checked, credentials, arguments));
  }
  return channels;
}

absl::Status ConnectChannels(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                             absl::string_view target, absl::Duration timeout) {
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout);
  for (size_t i = 0; i < channels.size(); ++i) {
    if (!channels[i]->WaitForConnected(deadline)) {
      return absl::UnavailableError(absl::StrCat(
          "cannot connect to ", target, " within ", absl::FormatDuration(timeout), " (channel ",
          i + 1, " of ", channels.size(), "; is the server running there?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace dflash::loadtest
