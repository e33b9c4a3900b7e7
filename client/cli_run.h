// dflash-cli's entry point as a library function, so tests run the whole client in process.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace dflash::client {

// Runs dflash-cli with `args` (the arguments after the program name): reads --input "-" from
// `in`, writes one JSON document per call to `out` and help to `out`, and one-line errors to
// `err`. Returns the exit code: kExitOk, kExitRpcError or kExitUsage (cli_flags.h).
int RunCli(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
           std::ostream& err);

}  // namespace dflash::client
