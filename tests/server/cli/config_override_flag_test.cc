// --set through absl's own parsing, as dflash-server's main parses it: every occurrence adds to
// the overrides, from the command line and from the environment (--tryfromenv), in order.
#include "server/cli/config_override_flag.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/flags/parse.h"

namespace dflash::serving {
namespace {

using ::testing::ElementsAre;

// One parse for the whole binary: absl's flags are process-wide, and so is the list.
TEST(ConfigOverrideFlagTest, EveryOccurrenceAddsItsOverridesInOrder) {
  EXPECT_THAT(ConfigOverridesFromSetFlags(), ElementsAre());
  ASSERT_EQ(setenv("FLAGS_set", "from.env=1", /*overwrite=*/1), 0);
  std::vector<std::string> args = {"dflash-server",
                                   "--set=server.worker_threads=4",
                                   "--tryfromenv=set",
                                   "--set=models.0.cpu_threads=2,server.listen=127.0.0.1:0",
                                   "--set",
                                   "server.worker_threads=8"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  absl::ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  EXPECT_THAT(ConfigOverridesFromSetFlags(),
              ElementsAre("server.worker_threads=4", "from.env=1", "models.0.cpu_threads=2",
                          "server.listen=127.0.0.1:0", "server.worker_threads=8"));
}

}  // namespace
}  // namespace dflash::serving
