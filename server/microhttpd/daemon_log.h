// libmicrohttpd's messages about one daemon (MHD_OPTION_EXTERNAL_LOGGER): while the daemon
// starts, collected to explain a failed start in its status; afterwards, into the server's log.
#pragma once

#include <spdlog/common.h>

#include <cstdarg>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct MHD_Daemon;

namespace dflash::microhttpd {

class DaemonLog {
 public:
  // Log lines after the start read "<server>: <message>" at `level`.
  DaemonLog(std::string server, spdlog::level::level_enum level);
  DaemonLog(const DaemonLog&) = delete;
  DaemonLog& operator=(const DaemonLog&) = delete;

  // The logger to give MHD_OPTION_EXTERNAL_LOGGER, with the DaemonLog as its argument (first
  // among the options, so that it also hears about the others).
  __attribute__((format(printf, 2, 0))) static void Collect(void* daemon_log, const char* format,
                                                            va_list arguments);

  // Ends the start: later messages go to the log. `daemon` is what MHD_start_daemon returned,
  // null when every attempt failed; `serving` says what it serves where, for the error
  // ("metrics on '127.0.0.1:9464'"): UNAVAILABLE "cannot serve <serving>: <libmicrohttpd's
  // messages> (libmicrohttpd)".
  absl::Status EndStart(MHD_Daemon* daemon, absl::string_view serving);
  // The port a started daemon listens on, or INTERNAL naming `serving`.
  static absl::StatusOr<int> BoundPort(MHD_Daemon* daemon, absl::string_view serving);

 private:
  const std::string server_;
  const spdlog::level::level_enum level_;
  std::mutex mutex_;
  bool starting_ = true;
  std::string start_messages_;
};

}  // namespace dflash::microhttpd
