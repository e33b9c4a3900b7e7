// Checks the exposition with the official Python parser (prometheus_client.parser), Debian's
// python3-prometheus-client, run with Debian's /usr/bin/python3.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "server/metrics/metric_registry.h"
#include "server/metrics/text_exposition.h"

namespace dflash::metrics {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

// Runs `/usr/bin/python3 -c script args...`; returns the exit status, output in `output`.
int RunPython(const std::string& script, const std::string& argument, std::string& output) {
  const std::filesystem::path script_path = std::filesystem::temp_directory_path() /
                                            ("metrics_parser_" + std::to_string(getpid()) + ".py");
  std::ofstream(script_path) << script;
  const std::string command =
      std::string(kPython) + " " + script_path.string() + " " + argument + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  std::filesystem::remove(script_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(MetricsPythonParserTest, OfficialParserReadsExposition) {
  std::string probe;
  if (RunPython("import prometheus_client.parser\n", "", probe) != 0) {
    GTEST_SKIP() << kPython << " cannot import prometheus_client (install Debian's "
                 << "python3-prometheus-client): " << probe;
  }

  Registry registry;
  auto requests = registry.AddCounterFamily("dflash_requests_total", "Requests.\nSecond \\ line",
                                            {"model", "code"});
  auto memory = registry.AddGaugeFamily("dflash_memory_bytes", "Memory.", {"pool"});
  auto latency =
      registry.AddHistogramFamily("dflash_latency_seconds", "Latency.", {"model"}, {0.1, 1, 10});
  ASSERT_TRUE(requests.ok() && memory.ok() && latency.ok());
  ASSERT_TRUE((*(*requests)->WithLabels({"a\"b\\c\nd", "OK"}))->Increment(3).ok());
  ASSERT_TRUE((*(*requests)->WithLabels({"plain", "INTERNAL"}))->Increment(0.5).ok());
  (*(*memory)->WithLabels({"host"}))->Set(1e300);
  (*(*memory)->WithLabels({"inf"}))->Set(-std::numeric_limits<double>::infinity());
  (*(*memory)->WithLabels({"nan"}))->Set(std::numeric_limits<double>::quiet_NaN());
  Histogram* histogram = *(*latency)->WithLabels({"m"});
  for (double v : {0.05, 0.5, 0.5, 20.0}) histogram->Observe(v);

  const std::filesystem::path exposition_path =
      std::filesystem::temp_directory_path() /
      ("metrics_exposition_" + std::to_string(getpid()) + ".txt");
  std::ofstream(exposition_path) << SerializeTextExposition(registry);

  // Exits non-zero (with a traceback) if parsing raises or any expectation fails.
  const std::string script = R"PY(
import math, sys
from prometheus_client.parser import text_string_to_metric_families as parse
fams = {f.name: f for f in parse(open(sys.argv[1]).read())}
# The parser reports counters by their name without _total (OpenMetrics model).
assert sorted(fams) == ['dflash_latency_seconds', 'dflash_memory_bytes', 'dflash_requests'], fams
req = fams['dflash_requests']
assert req.type == 'counter' and req.documentation == 'Requests.\nSecond \\ line', req
s = {(x.name, tuple(sorted(x.labels.items()))): x.value for x in req.samples}
assert s == {('dflash_requests_total', (('code', 'OK'), ('model', 'a"b\\c\nd'))): 3.0,
             ('dflash_requests_total', (('code', 'INTERNAL'), ('model', 'plain'))): 0.5}, s
mem = fams['dflash_memory_bytes']
assert mem.type == 'gauge'
v = {x.labels['pool']: x.value for x in mem.samples}
assert v['host'] == 1e300 and v['inf'] == -math.inf and math.isnan(v['nan']), v
lat = fams['dflash_latency_seconds']
assert lat.type == 'histogram'
got = [(x.name, x.labels.get('le'), x.value) for x in lat.samples]
assert all(x.labels['model'] == 'm' for x in lat.samples)
assert got == [('dflash_latency_seconds_bucket', '0.1', 1.0),
               ('dflash_latency_seconds_bucket', '1', 3.0),
               ('dflash_latency_seconds_bucket', '10', 3.0),
               ('dflash_latency_seconds_bucket', '+Inf', 4.0),
               ('dflash_latency_seconds_sum', None, 21.05),
               ('dflash_latency_seconds_count', None, 4.0)], got
print('ok')
)PY";
  std::string output;
  const int status = RunPython(script, exposition_path.string(), output);
  std::filesystem::remove(exposition_path);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "ok\n");
}

}  // namespace
}  // namespace dflash::metrics
