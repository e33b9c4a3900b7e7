#include "loadtest/report.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace dflash::loadtest {
namespace {

// Keys keep the order written here (config first), which reads better than sorted.
using json = nlohmann::ordered_json;

constexpr int kReportVersion = 1;
// A send lag worth a note under the table: beyond timer and scheduling noise.
constexpr double kNotableSendLagMs = 1.0;
// Limits of a schedule that was kept (JudgeSchedule).
constexpr double kKeptPaceFraction = 0.98;
constexpr double kKeptSendLagP99Ms = 10.0;

double Rate(int64_t count, double seconds) {
  return seconds > 0.0 ? static_cast<double>(count) / seconds : 0.0;
}

double Milliseconds(double nanoseconds) { return nanoseconds / 1e6; }

// A number of the report, or "-" when absent or null.
std::string Number(const json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_number()) return "-";
  return absl::StrFormat("%.1f", object[key].get<double>());
}

std::string HistogramRow(const char* name, const json& histogram) {
  const auto count = histogram.value("count", int64_t{0});
  if (count == 0) return absl::StrFormat("%-14s %9d\n", name, 0);
  return absl::StrFormat("%-14s %9d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, count,
                         histogram.value("mean", 0.0), histogram.value("p50", 0.0),
                         histogram.value("p90", 0.0), histogram.value("p99", 0.0),
                         histogram.value("p99_9", 0.0), histogram.value("max", 0.0));
}

}  // namespace

json HistogramJson(const LatencyHistogram& histogram) {
  auto ms = [](int64_t nanoseconds) { return Milliseconds(static_cast<double>(nanoseconds)); };
  return json{{"count", histogram.count()},
              {"min", ms(histogram.min())},
              {"mean", Milliseconds(histogram.mean())},
              {"p50", ms(histogram.ValueAtPercentile(50.0))},
              {"p90", ms(histogram.ValueAtPercentile(90.0))},
              {"p99", ms(histogram.ValueAtPercentile(99.0))},
              {"p99_9", ms(histogram.ValueAtPercentile(99.9))},
              {"max", ms(histogram.max())}};
}

ScheduleVerdict JudgeSchedule(double scheduled_seconds, double actual_seconds,
                              double send_lag_p99_ms, int64_t max_in_flight_waits,
                              int64_t max_in_flight) {
  const double pace = actual_seconds > 0.0 ? scheduled_seconds / actual_seconds : 1.0;
  if (pace >= kKeptPaceFraction && send_lag_p99_ms <= kKeptSendLagP99Ms) return {};
  ScheduleVerdict verdict;
  verdict.kept = false;
  if (max_in_flight_waits > 0) {
    verdict.cause = absl::StrFormat(
        "%d sends waited because %d calls were unanswered (--max_in_flight): the server answered "
        "slower than the offered rate",
        max_in_flight_waits, max_in_flight);
  } else {
    verdict.cause =
        "the generator's sending threads ran late: give dflash-loadtest more --senders and the "
        "cores for them (its own, apart from the server's), more --channels, or split the rate "
        "over several generators";
  }
  return verdict;
}

json ReportJson(const RunDescription& description, const LoadOptions& options,
                const RunResult& result) {
  const RunTotals& totals = result.totals;
  const bool open_loop = options.process != ArrivalProcess::kClosedLoop;
  json config = {
      {"target", description.target},
      {"workload", description.workload_path},
      {"workload_description", description.workload_description},
      {"rpc", description.rpc},
      {"model", description.model},
      {"corpus", description.corpus},
      {"mode", std::string(ArrivalProcessName(options.process))},
      {"concurrency", open_loop ? json(nullptr) : json(options.concurrency)},
      {"rate_per_s", open_loop ? json(options.rate) : json(nullptr)},
      {"duration_s", absl::ToDoubleSeconds(options.duration)},
      {"warmup_s", absl::ToDoubleSeconds(options.warmup)},
      {"requests", options.max_requests},
      {"timeout_s", absl::ToDoubleSeconds(options.timeout)},
      {"seed", options.seed},
      {"channels", description.channels},
      {"max_in_flight", options.max_in_flight},
      {"senders", open_loop ? json(result.senders) : json(nullptr)},
  };
  const PhaseCounts& measured = totals.measured;
  const int64_t completed = measured.ok + measured.errors;
  json errors_by_code = json::object();
  for (const auto& [code, count] : totals.errors_by_code) errors_by_code[code] = count;
  json error_examples = json::object();
  for (const auto& [code, message] : totals.first_error_message) error_examples[code] = message;
  json measured_json = {
      {"sent", measured.sent},
      {"completed", completed},
      {"ok", measured.ok},
      {"errors", measured.errors},
      {"errors_by_code", errors_by_code},
      {"first_error_message", error_examples},
      {"send_window_s", result.send_seconds},
      {"elapsed_s", result.measured_seconds},
      {"offered_rate_per_s", open_loop ? json(options.rate) : json(nullptr)},
      {"sent_rate_per_s", Rate(measured.sent, result.send_seconds)},
      {"actual_sent_rate_per_s",
       open_loop ? json(Rate(measured.sent, result.actual_send_seconds)) : json(nullptr)},
      {"ok_rate_per_s", Rate(measured.ok, result.measured_seconds)},
      {"completion_rate_per_s", Rate(completed, result.measured_seconds)},
      {"sequences", totals.sequences},
      {"sequences_per_s", Rate(totals.sequences, result.measured_seconds)},
      {"server_tokens", totals.server_tokens},
      {"server_tokens_per_s", Rate(totals.server_tokens, result.measured_seconds)},
  };
  json schedule = nullptr;
  if (open_loop && measured.sent > 0) {
    const double lag_p99_ms =
        Milliseconds(static_cast<double>(totals.send_lag.ValueAtPercentile(99.0)));
    const ScheduleVerdict verdict =
        JudgeSchedule(result.scheduled_send_seconds, result.actual_send_seconds, lag_p99_ms,
                      totals.max_in_flight_waits, options.max_in_flight);
    schedule = {
        {"kept", verdict.kept},
        {"pace", result.actual_send_seconds > 0.0
                     ? result.scheduled_send_seconds / result.actual_send_seconds
                     : 1.0},
        {"send_lag_p99_ms", lag_p99_ms},
        {"max_in_flight_waits", totals.max_in_flight_waits},
        {"cause", verdict.kept ? json(nullptr) : json(verdict.cause)},
    };
  }
  return json{
      {"tool", "dflash-loadtest"},
      {"report_version", kReportVersion},
      {"started_at",
       absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", result.started_at, absl::UTCTimeZone())},
      {"config", config},
      {"interrupted", result.interrupted},
      {"warmup",
       {{"sent", totals.warmup.sent}, {"ok", totals.warmup.ok}, {"errors", totals.warmup.errors}}},
      {"measured", measured_json},
      {"schedule", schedule},
      {"latency_ms", HistogramJson(totals.latency)},
      {"error_latency_ms", HistogramJson(totals.error_latency)},
      {"send_lag_ms", HistogramJson(totals.send_lag)},
      {"server_total_ms", HistogramJson(totals.server_total)},
      {"server_queue_ms", HistogramJson(totals.server_queue)},
  };
}

std::string SummaryTable(const json& report) {
  const json& config = report["config"];
  const json& measured = report["measured"];
  const json& warmup = report["warmup"];
  std::string out;
  absl::StrAppend(&out, "dflash-loadtest: ", config.value("rpc", ""), " (",
                  config.value("workload", ""), ") -> ", config.value("target", ""), "\n");
  const std::string mode = config.value("mode", "");
  const std::string load =
      mode == "closed" ? absl::StrCat("concurrency ", config.value("concurrency", 0))
                       : absl::StrFormat("offered %.1f calls/s", config.value("rate_per_s", 0.0));
  absl::StrAppend(
      &out, absl::StrFormat("mode %s, %s, measured %.1f s after %.1f s warm-up%s\n\n", mode, load,
                            measured.value("send_window_s", 0.0), config.value("warmup_s", 0.0),
                            report.value("interrupted", false) ? " (interrupted)" : ""));
  absl::StrAppend(&out, absl::StrFormat("%-14s %9s %9s %9s\n", "calls", "sent", "ok", "errors"));
  for (const auto& [name, phase] : {std::pair<const char*, const json*>{"warm-up", &warmup},
                                    std::pair<const char*, const json*>{"measured", &measured}}) {
    absl::StrAppend(
        &out, absl::StrFormat("%-14s %9d %9d %9d\n", name, phase->value("sent", int64_t{0}),
                              phase->value("ok", int64_t{0}), phase->value("errors", int64_t{0})));
  }
  absl::StrAppend(&out, "\nper second: offered ", Number(measured, "offered_rate_per_s"), ", sent ",
                  Number(measured, "sent_rate_per_s"), ", ok ", Number(measured, "ok_rate_per_s"),
                  ", sequences ", Number(measured, "sequences_per_s"), ", server tokens ",
                  Number(measured, "server_tokens_per_s"), "\n\n");
  absl::StrAppend(&out, absl::StrFormat("%-14s %9s %9s %9s %9s %9s %9s %9s\n", "latency (ms)",
                                        "count", "mean", "p50", "p90", "p99", "p99.9", "max"));
  absl::StrAppend(&out, HistogramRow("ok", report["latency_ms"]));
  absl::StrAppend(&out, HistogramRow("errors", report["error_latency_ms"]));
  if (mode != "closed") absl::StrAppend(&out, HistogramRow("send lag", report["send_lag_ms"]));
  absl::StrAppend(&out, HistogramRow("server total", report["server_total_ms"]));
  absl::StrAppend(&out, HistogramRow("server queue", report["server_queue_ms"]));
  // In an open loop a late send is the generator's fault, not the server's; say so, since it is
  // counted in the latencies above.
  const double max_lag = report["send_lag_ms"].value("max", 0.0);
  if (mode != "closed" && max_lag > kNotableSendLagMs) {
    absl::StrAppend(&out, absl::StrFormat("\nnote: the generator fell behind its schedule by up to "
                                          "%.3f ms (max send lag); latencies include it\n",
                                          max_lag));
  }
  const json& schedule = report["schedule"];
  if (schedule.is_object() && !schedule.value("kept", true)) {
    absl::StrAppend(
        &out, absl::StrFormat(
                  "\nWARNING: the offered rate was NOT sent: %s calls/s actually went out against "
                  "%s offered (%.1f%% of the schedule's pace, send lag p99 %.3f ms). Cause: %s. "
                  "The latencies above include the lag; this run does not measure the server at "
                  "the offered rate.\n",
                  Number(measured, "actual_sent_rate_per_s"),
                  Number(measured, "offered_rate_per_s"), 100.0 * schedule.value("pace", 0.0),
                  schedule.value("send_lag_p99_ms", 0.0), schedule.value("cause", std::string())));
  }
  const json& errors = measured["errors_by_code"];
  if (!errors.empty()) {
    absl::StrAppend(&out, "\nerrors by code:\n");
    for (auto it = errors.begin(); it != errors.end(); ++it) {
      std::string example;
      const json& messages = measured["first_error_message"];
      if (messages.contains(it.key())) example = messages[it.key()].get<std::string>();
      absl::StrAppend(&out, absl::StrFormat("  %-20s %9d  first: \"%s\"\n", it.key(),
                                            it.value().get<int64_t>(), example));
    }
  }
  return out;
}

absl::Status WriteReport(const std::string& path, const json& report) {
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot be written"));
  out << report.dump(2) << "\n";
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace dflash::loadtest
