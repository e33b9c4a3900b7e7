#include "server/cli/config_override_flag.h"

#include <mutex>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"

ABSL_DECLARE_FLAG(std::vector<std::string>, set);

namespace dflash::serving {
namespace {

struct SetFlagValues {
  std::mutex mutex;
  std::vector<std::string> overrides;
};

SetFlagValues& Values() {
  static auto* values = new SetFlagValues();
  return *values;
}

// absl parses each occurrence of a flag into a fresh value and then runs the flag's update
// callback: this one moves that value to the end of the list.
void AppendSetFlag() {
  const std::vector<std::string> parsed = absl::GetFlag(FLAGS_set);
  SetFlagValues& values = Values();
  std::lock_guard<std::mutex> lock(values.mutex);
  values.overrides.insert(values.overrides.end(), parsed.begin(), parsed.end());
}

}  // namespace

std::vector<std::string> ConfigOverridesFromSetFlags() {
  SetFlagValues& values = Values();
  std::lock_guard<std::mutex> lock(values.mutex);
  return values.overrides;
}

}  // namespace dflash::serving

ABSL_FLAG(std::vector<std::string>, set, {},
          "Config overrides, dotted.path=value, comma-separated. Repeatable: every --set applies, "
          "in order, a later one winning on the same key, e.g. --set=server.worker_threads=4 "
          "--set=models.0.batching.max_batch_tokens=8192,models.0.batching.max_queue_delay=2ms")
    .OnUpdate(dflash::serving::AppendSetFlag);
