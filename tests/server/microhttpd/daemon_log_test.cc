// DaemonLog: libmicrohttpd's messages explain a failed start in its status, with real daemons
// (a port in use) and with messages sent to the logger directly; after the start they reach the
// log at the level given.
#include "server/microhttpd/daemon_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <microhttpd.h>
#include <spdlog/sinks/ostream_sink.h>

#include <cstdarg>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace dflash::microhttpd {
namespace {

using ::testing::HasSubstr;

__attribute__((format(printf, 2, 3))) void Report(DaemonLog& log, const char* format, ...) {
  va_list arguments;
  va_start(arguments, format);
  DaemonLog::Collect(&log, format, arguments);
  va_end(arguments);
}

MHD_Result Refuse(void* /*cls*/, MHD_Connection* /*connection*/, const char* /*url*/,
                  const char* /*method*/, const char* /*version*/, const char* /*upload_data*/,
                  size_t* /*upload_data_size*/, void** /*request_state*/) {
  return MHD_NO;
}

// A daemon on 127.0.0.1:`port` (0: a free one) that reports to `log`; null when it cannot start.
MHD_Daemon* StartDaemon(DaemonLog& log, uint16_t port) {
  return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, port, nullptr,
                          nullptr, &Refuse, nullptr, MHD_OPTION_EXTERNAL_LOGGER,
                          &DaemonLog::Collect, &log, MHD_OPTION_END);
}

TEST(DaemonLogTest, AStartedDaemonGivesItsPortAndAPortInUseNamesTheAddress) {
  DaemonLog first_log("first", spdlog::level::debug);
  MHD_Daemon* first = StartDaemon(first_log, 0);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first_log.EndStart(first, "test on '127.0.0.1:0'").ok());
  const absl::StatusOr<int> port = DaemonLog::BoundPort(first, "test on '127.0.0.1:0'");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);

  DaemonLog second_log("second", spdlog::level::debug);
  MHD_Daemon* second = StartDaemon(second_log, static_cast<uint16_t>(*port));
  EXPECT_EQ(second, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  const absl::Status refused = second_log.EndStart(second, absl::StrCat("test on '", address, "'"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.message(), HasSubstr(absl::StrCat("cannot serve test on '", address, "': ")));
  EXPECT_THAT(refused.message(), HasSubstr("in use"));
  MHD_stop_daemon(first);
}

TEST(DaemonLogTest, AFailedStartJoinsTheMessagesOrSaysUnknown) {
  DaemonLog log("server", spdlog::level::warn);
  Report(log, "Failed to bind to port %d: %s\n", 80, "Permission denied");
  Report(log, "  second  ");
  EXPECT_EQ(log.EndStart(nullptr, "HTTP on ':80'"),
            absl::UnavailableError("cannot serve HTTP on ':80': Failed to bind to port 80: "
                                   "Permission denied; second (libmicrohttpd)"));

  DaemonLog silent("server", spdlog::level::warn);
  EXPECT_EQ(silent.EndStart(nullptr, "HTTP on ':80'"),
            absl::UnavailableError("cannot serve HTTP on ':80': unknown error (libmicrohttpd)"));
}

TEST(DaemonLogTest, AfterTheStartMessagesGoToTheLogAtItsLevel) {
  std::ostringstream lines;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(lines);
  sink->set_pattern("%l %v");
  Log().sinks().push_back(sink);
  const spdlog::level::level_enum level = Log().level();
  Log().set_level(spdlog::level::info);

  DaemonLog log("metrics endpoint", spdlog::level::warn);
  EXPECT_FALSE(log.EndStart(nullptr, "metrics on ':0'").ok());
  Report(log, "Error accepting connection: %s\n", "Too many open files");
  DaemonLog quiet("http listener", spdlog::level::debug);
  EXPECT_FALSE(quiet.EndStart(nullptr, "HTTP on ':0'").ok());
  Report(quiet, "below the log's level\n");

  Log().set_level(level);
  Log().sinks().pop_back();
  EXPECT_EQ(lines.str(),
            "warning metrics endpoint: Error accepting connection: Too many open files\n");
}

}  // namespace
}  // namespace dflash::microhttpd
