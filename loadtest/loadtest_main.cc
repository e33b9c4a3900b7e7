// dflash-loadtest: a load generator for the dflash.v1 API (gRPC; KServe v2 or HTTP/JSON with
// --protocol). Closed-loop concurrency or open-loop (constant or Poisson) arrivals, latencies from
// the intended send time, a JSON report and a summary table. It only ever targets this machine
// (see target_address.h).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/flags_help.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "loadtest/arrival_schedule.h"
#include "loadtest/corpus.h"
#include "loadtest/http_caller.h"
#include "loadtest/http_request.h"
#include "loadtest/load_generator.h"
#include "loadtest/loopback_channels.h"
#include "loadtest/report.h"
#include "loadtest/request_generator.h"
#include "loadtest/target_address.h"
#include "loadtest/workload.h"

ABSL_FLAG(std::string, target, "",
          "Server address on this machine: localhost:PORT, 127.0.0.1:PORT, [::1]:PORT or "
          "unix:PATH. Other hosts are refused.");
ABSL_FLAG(std::string, workload, "",
          "Workload file (JSON): the RPC, request options and length mix. See "
          "loadtest/workloads/README.md.");
ABSL_FLAG(std::string, mode, "closed", "closed, constant or poisson (see above).");
ABSL_FLAG(int, concurrency, 1, "closed mode: concurrent workers, one call in flight each.");
ABSL_FLAG(double, rate, 0.0, "constant and poisson modes: mean calls per second.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10),
          "Measured time, after the warm-up (0: bounded by --requests only).");
ABSL_FLAG(int64_t, requests, 0, "Most measured calls (0: bounded by --duration only).");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(2),
          "Warm-up time before measuring: its calls are sent but excluded from the statistics.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "Deadline of each call.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the texts and of the Poisson schedule.");
ABSL_FLAG(std::string, corpus, "",
          "Text file the requests are cut from (default: config/demo/corpus.txt of the "
          "repository).");
ABSL_FLAG(std::string, model, "", "Served model id; overrides the workload's model.");
ABSL_FLAG(std::string, report, "", "Write the JSON report to this file.");
ABSL_FLAG(int, channels, 1,
          "gRPC channels (TCP connections); calls go round-robin over them. More than one helps "
          "at high concurrency. --protocol=http: open-loop keep-alive connections (one call in "
          "flight each); closed loops open one per worker.");
ABSL_FLAG(std::string, senders, "auto",
          "Open loop: threads that send the schedule, each an equal share of the rate (Poisson: "
          "independent Poisson processes, which add up to one at --rate). auto: one per 10,000 "
          "calls/s of --rate, at most half the cores this process may run on (taskset), at least "
          "1. Give senders cores apart from the server's.");
ABSL_FLAG(int64_t, max_in_flight, 10000,
          "Open loop: most unanswered calls, over all senders; a sender waits beyond it (reported "
          "as send lag).");
ABSL_FLAG(std::string, protocol, "dflash",
          "dflash (dflash.v1.InferenceService), kserve (KServe v2 ModelInfer; classify "
          "workloads: the same texts as raw BYTES tensors, the scores output) or http (the HTTP/"
          "JSON front's TEI routes over HTTP/1.1 keep-alive: classify -> POST /predict, embed -> "
          "POST /embed, rerank -> POST /rerank; --target is then the HTTP address).");
ABSL_FLAG(std::string, api_key, "", "Send \"authorization: Bearer <key>\" with every call.");
ABSL_FLAG(std::string, tls_ca, "", "TLS: PEM file of the CA that signed the server certificate.");
ABSL_FLAG(std::string, tls_cert, "", "mTLS: PEM client certificate chain (with --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "mTLS: PEM client private key (with --tls_cert).");
ABSL_FLAG(std::string, tls_server_name, "",
          "TLS: the name to verify in the server certificate instead of the target host.");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(5),
          "How long to wait for the channels to connect (one deadline for all of them) before "
          "giving up.");
ABSL_FLAG(absl::Duration, progress, absl::Seconds(1),
          "Interval of progress lines on stderr (0: none).");

namespace dflash::loadtest {
namespace {

constexpr char kUsage[] =
    R"(Load generator for DisentangledFlash Serve: the dflash.v1 gRPC API, KServe v2 ModelInfer
(--protocol=kserve) and the HTTP/JSON front's TEI routes (--protocol=http).

Usage: dflash-loadtest --target=localhost:PORT --workload=FILE [--mode=...] [options]

Modes (--mode):
  closed    --concurrency=N workers; each sends its next call as soon as the previous answer
            arrives, so the server's speed sets the rate (throughput at a given concurrency).
  constant  open loop: calls are due at exactly --rate per second, whatever the answers do.
  poisson   open loop: exponential gaps of mean 1/--rate, like independent users arriving.
Open-loop calls go out on gRPC's callback API, so slow answers never delay sends. Latency runs
from each call's INTENDED send time (its scheduled time; in closed mode, the previous answer), so
a generator or server that falls behind is counted against latency and shown as "send lag"
(no coordinated omission). An open loop sends from --senders threads (default: one per 10,000
calls/s of --rate, up to half the cores the process may use), each with its own share of the
schedule.

Bounds: --duration (measured time) and/or --requests (measured calls), after --warmup whose calls
are excluded from the statistics; every call has the deadline --timeout. Ctrl-C stops sending
and still reports (a second Ctrl-C quits).

Output: a summary table on stdout, progress lines on stderr every --progress, and with
--report=FILE a JSON report (format: loadtest/README.md).

Only loopback targets are accepted (localhost, 127.0.0.0/8, [::1], unix: sockets).

Examples:
  dflash-loadtest --target=localhost:50051 --workload=loadtest/workloads/classify_64.json \
      --mode=closed --concurrency=1 --duration=10s --warmup=2s
  dflash-loadtest --target=localhost:50051 --workload=loadtest/workloads/mnli_mix.json \
      --mode=poisson --rate=50 --duration=60s --report=mnli.json)";

// Bad flags and unusable inputs exit with 2, failures of the run itself with 1.
constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

std::atomic<bool> stop_requested{false};

// The first Ctrl-C stops sending and still reports; a second one ends the process at once.
extern "C" void OnInterrupt(int signal_number) {
  if (stop_requested.exchange(true)) {
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
  }
}

struct Setup {
  RunDescription description;
  LoadOptions options;
  std::unique_ptr<RequestGenerator> generator;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::unique_ptr<HttpCaller> http;  // --protocol=http, instead of channels.
};

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials() {
  const std::string ca = absl::GetFlag(FLAGS_tls_ca);
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (ca.empty() && cert.empty()) {
    if (!absl::GetFlag(FLAGS_tls_server_name).empty()) {
      return absl::InvalidArgumentError("--tls_server_name needs TLS (--tls_ca)");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  if (!ca.empty()) {
    DFLASH_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(ca, size_t{1} << 20));
  }
  if (!cert.empty()) {
    DFLASH_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile(cert, size_t{1} << 20));
    DFLASH_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile(key, size_t{1} << 20));
  }
  return grpc::SslCredentials(ssl);
}

// Everything that can be checked before connecting; errors here are usage errors.
absl::StatusOr<Setup> PrepareRun() {
  Setup setup;
  DFLASH_ASSIGN_OR_RETURN(setup.description.target,
                          CheckLoopbackTarget(absl::GetFlag(FLAGS_target)));
  const std::string workload_path = absl::GetFlag(FLAGS_workload);
  if (workload_path.empty()) return absl::InvalidArgumentError("--workload is required");
  DFLASH_ASSIGN_OR_RETURN(Workload workload, LoadWorkloadFile(workload_path));
  if (!absl::GetFlag(FLAGS_model).empty()) workload.model = absl::GetFlag(FLAGS_model);
  const std::string protocol_name = absl::GetFlag(FLAGS_protocol);
  if (protocol_name != "dflash" && protocol_name != "kserve" && protocol_name != "http") {
    return absl::InvalidArgumentError("--protocol must be dflash, kserve or http");
  }
  const bool http = protocol_name == "http";
  std::string http_path;
  if (http) {
    DFLASH_ASSIGN_OR_RETURN(http_path, HttpPathFor(workload.rpc));
  }
  const WireProtocol protocol =
      protocol_name == "kserve" ? WireProtocol::kKserve : WireProtocol::kDflash;
  if (protocol == WireProtocol::kKserve && workload.rpc != RpcKind::kClassify) {
    return absl::InvalidArgumentError("--protocol=kserve sends classify workloads only");
  }

  LoadOptions& options = setup.options;
  DFLASH_ASSIGN_OR_RETURN(options.process, ParseArrivalProcess(absl::GetFlag(FLAGS_mode)));
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.rate = absl::GetFlag(FLAGS_rate);
  options.duration = absl::GetFlag(FLAGS_duration);
  options.max_requests = absl::GetFlag(FLAGS_requests);
  options.warmup = absl::GetFlag(FLAGS_warmup);
  options.timeout = absl::GetFlag(FLAGS_timeout);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  if (const std::string senders = absl::GetFlag(FLAGS_senders); senders != "auto") {
    if (!absl::SimpleAtoi(senders, &options.senders) || options.senders < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--senders must be auto or a positive count, got '", senders, "'"));
    }
  }
  options.api_key = absl::GetFlag(FLAGS_api_key);
  options.progress_interval = absl::GetFlag(FLAGS_progress);
  options.stop = &stop_requested;
  DFLASH_RETURN_IF_ERROR(ValidateLoadOptions(options));
  const int channel_count = absl::GetFlag(FLAGS_channels);

  std::string corpus_path = absl::GetFlag(FLAGS_corpus);
  if (corpus_path.empty()) corpus_path = DefaultCorpusPath();
  DFLASH_ASSIGN_OR_RETURN(Corpus corpus, Corpus::Load(corpus_path));

  int connections = channel_count;
  if (http) {
    if (!absl::GetFlag(FLAGS_tls_ca).empty() || !absl::GetFlag(FLAGS_tls_cert).empty()) {
      return absl::InvalidArgumentError("--protocol=http sends plaintext HTTP only (no TLS flags)");
    }
    if (options.process == ArrivalProcess::kClosedLoop) connections = options.concurrency;
    DFLASH_ASSIGN_OR_RETURN(
        setup.http, HttpCaller::Create(setup.description.target, connections, options.api_key));
  } else {
    DFLASH_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                            MakeCredentials());
    DFLASH_ASSIGN_OR_RETURN(
        setup.channels, MakeLoopbackChannels(setup.description.target, credentials, channel_count,
                                             absl::GetFlag(FLAGS_tls_server_name)));
  }

  setup.description.workload_path = workload_path;
  setup.description.workload_description = workload.description;
  setup.description.rpc = protocol == WireProtocol::kKserve
                              ? "kserve ModelInfer (classify)"
                              : std::string(RpcKindName(workload.rpc));
  if (http) absl::StrAppend(&setup.description.rpc, " (http POST ", http_path, ")");
  setup.description.model = workload.model;
  setup.description.corpus = corpus_path;
  setup.description.channels = connections;
  setup.generator = std::make_unique<RequestGenerator>(
      std::move(workload), std::make_shared<const Corpus>(std::move(corpus)), options.seed,
      protocol);
  return setup;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  dflash::ListFlagsOf({"loadtest/loadtest_main.cc"});
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::cerr << "dflash-loadtest: unexpected argument '" << positional[1]
              << "' (flags are --name=value; see --help)\n";
    return kExitUsage;
  }
  absl::StatusOr<Setup> setup = PrepareRun();
  if (!setup.ok()) {
    std::cerr << "dflash-loadtest: " << setup.status().message() << "\n";
    return kExitUsage;
  }
  if (const absl::Status connected =
          setup->http != nullptr ? setup->http->Probe()
                                 : ConnectChannels(setup->channels, setup->description.target,
                                                   absl::GetFlag(FLAGS_connect_timeout));
      !connected.ok()) {
    std::cerr << "dflash-loadtest: " << connected.message() << "\n";
    return kExitFailure;
  }
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  absl::StatusOr<RunResult> result =
      setup->http != nullptr ? RunLoad(setup->options, *setup->generator, *setup->http)
                             : RunLoad(setup->options, *setup->generator, setup->channels);
  if (!result.ok()) {
    std::cerr << "dflash-loadtest: " << result.status().message() << "\n";
    return kExitFailure;
  }
  const nlohmann::ordered_json report = ReportJson(setup->description, setup->options, *result);
  std::cout << SummaryTable(report) << std::flush;
  const std::string report_path = absl::GetFlag(FLAGS_report);
  if (!report_path.empty()) {
    if (absl::Status written = WriteReport(report_path, report); !written.ok()) {
      std::cerr << "dflash-loadtest: " << written.message() << "\n";
      return kExitFailure;
    }
    std::cout << "report: " << report_path << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace dflash::loadtest

int main(int argc, char** argv) { return dflash::loadtest::Main(argc, argv); }
