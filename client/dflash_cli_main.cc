// dflash-cli: the command-line client of the dflash.v1 gRPC API. See `dflash-cli --help`.
#include <grpc/support/log.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "client/cli_run.h"

int main(int argc, char** argv) {
  // gRPC logs failures such as a refused TLS handshake on stderr by itself; the CLI reports every
  // failure as its own one-line error, so gRPC's lines stay out unless its own variables ask.
  if (std::getenv("GRPC_VERBOSITY") == nullptr && std::getenv("GRPC_TRACE") == nullptr) {
    gpr_set_log_function([](gpr_log_func_args*) {});
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  return dflash::client::RunCli(args, std::cin, std::cout, std::cerr);
}
