// --set, dflash-server's configuration overrides. absl keeps only the last value of a flag given
// several times; --set instead adds every occurrence to one list, in the order absl parses them
// (the command line left to right, a --flagfile or --fromenv/--tryfromenv where it stands), so
// that `--set=a=1 --set=b=2` applies both and a later override of the same key wins. Each value
// is itself a comma-separated list of dotted.path=value overrides.
#pragma once

#include <string>
#include <vector>

namespace dflash::serving {

// The overrides of every --set parsed so far, in order; empty before absl::ParseCommandLine.
std::vector<std::string> ConfigOverridesFromSetFlags();

}  // namespace dflash::serving
