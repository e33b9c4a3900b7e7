// --help for the project's binaries. Abseil lists under --help only the flags defined in a file
// named after the binary, which none of the project's mains is, so its default prints "No flags
// matched" for them; this points it at the files that define each binary's flags.
#pragma once

#include <string>
#include <vector>

namespace dflash {

// From now on --help and --helpshort list the flags defined in source files whose path contains
// one of `sources` (a file such as "engine/tools/dflash_tune.cc" or a folder such as
// "server/cli/"). Call before absl::ParseCommandLine.
void ListFlagsOf(std::vector<std::string> sources);

}  // namespace dflash
