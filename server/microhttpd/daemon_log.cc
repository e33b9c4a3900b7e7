#include "server/microhttpd/daemon_log.h"

#include <microhttpd.h>

#include <cstdio>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace dflash::microhttpd {

DaemonLog::DaemonLog(std::string server, spdlog::level::level_enum level)
    : server_(std::move(server)), level_(level) {}

void DaemonLog::Collect(void* daemon_log, const char* format, va_list arguments) {
  char text[512];
  std::vsnprintf(text, sizeof(text), format, arguments);
  std::string message(absl::StripAsciiWhitespace(text));
  auto& log = *static_cast<DaemonLog*>(daemon_log);
  {
    std::lock_guard<std::mutex> lock(log.mutex_);
    if (log.starting_) {
      absl::StrAppend(&log.start_messages_, log.start_messages_.empty() ? "" : "; ", message);
      return;
    }
  }
  Log().log(log.level_, "{}: {}", log.server_, message);
}

absl::Status DaemonLog::EndStart(MHD_Daemon* daemon, absl::string_view serving) {
  std::lock_guard<std::mutex> lock(mutex_);
  starting_ = false;
  if (daemon != nullptr) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "cannot serve ", serving, ": ", start_messages_.empty() ? "unknown error" : start_messages_,
      " (libmicrohttpd)"));
}

absl::StatusOr<int> DaemonLog::BoundPort(MHD_Daemon* daemon, absl::string_view serving) {
  const MHD_DaemonInfo* bound = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
  if (bound == nullptr || bound->port == 0) {
    return absl::InternalError(
        absl::StrCat("cannot serve ", serving, ": libmicrohttpd reports no bound port"));
  }
  return bound->port;
}

}  // namespace dflash::microhttpd
