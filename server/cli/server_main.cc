// dflash-server: serves DeBERTa-v2/v3 models over gRPC (dflash.v1.InferenceService, health,
// reflection) with dynamic batching, and Prometheus metrics over HTTP.
//
// Configuration comes from a YAML file (--config, see config/server.yaml) or, for a quick start,
// from one checkpoint directory (--model); flags and --set (repeatable) override single settings.
// SIGTERM or SIGINT drains: health turns NOT_SERVING, new calls get UNAVAILABLE, accepted requests
// are answered as usual for up to drain_grace_period, then whatever is still queued is answered
// UNAVAILABLE without being computed (batches already on an engine end), and the process exits:
// 0 when every accepted request got an answer, 1 when some did not. A second SIGTERM or SIGINT
// during the drain ends the grace period at once (same answers, same exit codes); further ones
// change nothing. The signals are handled the same whichever thread takes them: their handler
// only writes to a pipe that the main thread reads.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/flags_help.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "dflash_revision.h"  // Generated: DFLASH_REVISION (cmake/DflashRevision.cmake).
#include "server/cli/config_override_flag.h"
#include "server/config/server_config.h"
#include "server/service/serving_runtime.h"

ABSL_FLAG(std::string, config, "", "YAML configuration file (see config/server.yaml).");
ABSL_FLAG(std::string, model, "",
          "Serve this checkpoint directory with default settings instead of a --config file.");
ABSL_FLAG(std::string, model_name, "",
          "With --model: the served model id (default: the directory's name).");
ABSL_FLAG(std::string, listen, "", "Overrides server.listen (host:port; port 0 picks one).");
ABSL_FLAG(std::string, metrics_listen, "",
          "Overrides server.metrics_listen (host:port; \"off\" disables the endpoint).");
ABSL_FLAG(std::string, backend, "",
          "Overrides every model's backend: auto, cpu, cuda or null (no compute; benchmarks).");
ABSL_FLAG(bool, check_config, false, "Validate the configuration, print it, and exit.");

namespace dflash::serving {
namespace {

absl::StatusOr<ServerConfig> BuildConfig() {
  std::vector<std::string> overrides = ConfigOverridesFromSetFlags();
  const std::string config_path = absl::GetFlag(FLAGS_config);
  const std::string model_dir = absl::GetFlag(FLAGS_model);
  if (!absl::GetFlag(FLAGS_listen).empty()) {
    overrides.push_back(absl::StrCat("server.listen=", absl::GetFlag(FLAGS_listen)));
  }
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    const std::string value = absl::GetFlag(FLAGS_metrics_listen);
    overrides.push_back(absl::StrCat("server.metrics_listen=", value == "off" ? "\"\"" : value));
  }
  absl::StatusOr<ServerConfig> config;
  if (!config_path.empty() && !model_dir.empty()) {
    return absl::InvalidArgumentError("give --config or --model, not both");
  }
  if (!config_path.empty()) {
    config = LoadServerConfig(config_path, overrides);
  } else if (!model_dir.empty()) {
    std::string name = absl::GetFlag(FLAGS_model_name);
    if (name.empty()) name = std::filesystem::absolute(model_dir).lexically_normal().filename();
    if (name.empty()) name = "model";
    config = ServerConfigForModel(model_dir, name, overrides);
  } else {
    return absl::InvalidArgumentError(
        "give --config=<server.yaml> or --model=<checkpoint dir> (see --help)");
  }
  if (!config.ok()) return config.status();
  if (const std::string backend = absl::GetFlag(FLAGS_backend); !backend.empty()) {
    std::vector<std::string> backend_overrides;
    for (size_t i = 0; i < config->models.size(); ++i) {
      backend_overrides.push_back(absl::StrCat("models.", i, ".backend=", backend));
    }
    // Re-parse so the backend value is validated like any other setting.
    overrides.insert(overrides.end(), backend_overrides.begin(), backend_overrides.end());
    config = !config_path.empty()
                 ? LoadServerConfig(config_path, overrides)
                 : ServerConfigForModel(model_dir, config->models[0].name, overrides);
  }
  return config;
}

void SetLogLevel(const std::string& level) {
  dflash::Log().set_level(spdlog::level::from_str(level));
}

// The pipe through which the signal handler reports SIGTERM / SIGINT: its write end is
// non-blocking, so the handler never waits, whatever thread it runs on.
int signal_pipe[2] = {-1, -1};

// Async-signal-safe: writes the signal number and nothing else. A process-wide handler, unlike a
// signal mask, also covers threads started before main (OpenBLAS starts its pool from a
// shared-library constructor), which would otherwise take the signal with its default action.
extern "C" void OnTerminationSignal(int signal_number) {
  const int saved_errno = errno;
  const auto byte = static_cast<unsigned char>(signal_number);
  (void)!write(signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

absl::Status InstallSignalHandlers() {
  if (pipe2(signal_pipe, O_CLOEXEC) != 0 ||
      fcntl(signal_pipe[1], F_SETFL, fcntl(signal_pipe[1], F_GETFL) | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("cannot create the signal pipe: errno ", errno));
  }
  struct sigaction action = {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGTERM, &action, nullptr) != 0 || sigaction(SIGINT, &action, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("cannot install the signal handlers: errno ", errno));
  }
  return absl::OkStatus();
}

// The next signal number from the pipe; 0 is the main thread's own "stop reading". Waits in
// poll() rather than read(): ThreadSanitizer runs a signal's handler while its thread waits in a
// call it knows may block (poll, not read), and otherwise only after that call returns.
int ReadSignal() {
  pollfd readable = {signal_pipe[0], POLLIN, 0};
  unsigned char byte = 0;
  while (poll(&readable, 1, -1) < 1 || read(signal_pipe[0], &byte, 1) != 1) {
    if (errno != EINTR && errno != EAGAIN) return 0;
  }
  return byte;
}

const char* SignalName(int signal_number) {
  return signal_number == SIGTERM ? "SIGTERM" : signal_number == SIGINT ? "SIGINT" : "a signal";
}

int Serve() {
  absl::StatusOr<ServerConfig> config = BuildConfig();
  if (!config.ok()) {
    std::cerr << "dflash-server: " << config.status().message() << "\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_check_config)) {
    std::cout << DescribeServerConfig(*config);
    return 0;
  }
  SetLogLevel(config->logging.level);

  // From here on SIGTERM/SIGINT only write to the signal pipe; one arriving while the models load
  // is read once serving starts. The threads the runtime starts inherit a mask that blocks them,
  // so that the handler interrupts the main thread (unblocked again below) rather than a worker.
  if (absl::Status installed = InstallSignalHandlers(); !installed.ok()) {
    dflash::Log().error("cannot start: {}", installed.ToString());
    return 1;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  dflash::Log().info("dflash-server {} starting\n{}", DFLASH_VERSION,
                     DescribeServerConfig(*config));
  absl::StatusOr<std::unique_ptr<ServingRuntime>> runtime =
      ServingRuntime::Start(*config, ServerIdentity{DFLASH_VERSION, DFLASH_REVISION});
  if (!runtime.ok()) {
    dflash::Log().error("cannot start: {}", runtime.status().ToString());
    return 1;
  }
  dflash::Log().info(
      "serving gRPC on port {}{}", (*runtime)->port(),
      (*runtime)->metrics_port() > 0
          ? absl::StrCat(", metrics on http port ", (*runtime)->metrics_port(), " at /metrics")
          : std::string());
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  const int signal_number = ReadSignal();
  dflash::Log().info("received {}; draining (grace period {}; a second signal ends it now)",
                     SignalName(signal_number), absl::FormatDuration(config->drain_grace_period));
  // Signals during the drain end its grace period; the 0 written after the drain ends the watch.
  std::thread watcher([&runtime] {
    while (const int next = ReadSignal()) {
      dflash::Log().warn("received {} during the drain; ending the grace period now",
                         SignalName(next));
      (*runtime)->EndGracePeriod();
    }
  });
  const DrainResult drained = (*runtime)->Drain(config->drain_grace_period);
  const unsigned char stop = 0;
  (void)!write(signal_pipe[1], &stop, 1);
  watcher.join();
  if (drained.unavailable_at_deadline > 0) {
    dflash::Log().warn(
        "grace period over: {} queued requests were answered UNAVAILABLE without being computed",
        drained.unavailable_at_deadline);
  }
  if (drained.unanswered > 0) {
    dflash::Log().error("drain over with {} accepted requests unanswered", drained.unanswered);
    return 1;
  }
  dflash::Log().info("drained; every accepted request was answered");
  return 0;
}

}  // namespace
}  // namespace dflash::serving

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Serves DeBERTa-v2/v3 models over gRPC (dflash.v1.InferenceService).\n\n"
      "  dflash-server --config=config/server.yaml\n"
      "  dflash-server --model=build/demo-model --listen=127.0.0.1:50051\n\n"
      "SIGTERM/SIGINT drain gracefully: accepted requests are answered for up to\n"
      "server.drain_grace_period, then what is still queued is answered UNAVAILABLE; a second\n"
      "SIGTERM/SIGINT ends the grace period at once. Exit status 0 when every accepted request\n"
      "was answered, 1 when some were not (or the server could not start), 2 for a bad\n"
      "configuration. Health: grpc.health.v1; metrics: http://<metrics_listen>/metrics.");
  dflash::ListFlagsOf({"server/cli/server_main.cc", "server/cli/config_override_flag.cc"});
  absl::ParseCommandLine(argc, argv);
  // Abseil's mutex deadlock detection, on where the library was built without NDEBUG (Debian's
  // is), records every lock taken in a lock graph: a debugging aid the tests keep, that costs the
  // server CPU on every call's locks (gRPC's included).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return dflash::serving::Serve();
}
