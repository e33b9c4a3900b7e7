// dflash-cli's command line: the subcommands, their flags and help text, parsed into CliArgs.
//
// The parser is the CLI's own, not absl flags: absl::ParseCommandLine exits the process on an
// unknown flag (exit code 1, where the CLI promises 2 for usage errors), keeps every value in
// process-wide globals (RunCli is called many times by tests) and cannot repeat a flag
// (--document a --document b keeps only b). Syntax follows absl/gflags: --name=value,
// --name value, --bool, --nobool, --bool=false; a lone "--" ends the flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dflash/v1/dflash.pb.h"

namespace dflash::client {

// The subcommands; each is one RPC.
enum class Command { kClassify, kZeroShot, kRerank, kEmbed, kTokenize, kTokens, kInfo, kHealth };

// The subcommand's name on the command line ("zeroshot").
absl::string_view CommandName(Command command);

// Exit codes of dflash-cli.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRpcError = 1;
inline constexpr int kExitUsage = 2;

// Every flag of every subcommand, typed. A field keeps its default unless its flag was given;
// ParseArgs rejects flags that the chosen subcommand does not take.
struct CliArgs {
  std::optional<Command> command;  // unset only with `help`
  bool help = false;               // --help or `help [command]`: print help, run nothing

  // Connection and output.
  std::string target = "localhost:50051";
  absl::Duration timeout = absl::Seconds(30);  // per call; absl::InfiniteDuration(): none
  bool tls = false;                            // implied by any --tls_* flag
  std::string tls_ca;                          // PEM file; empty: the system's roots
  std::string tls_cert;                        // PEM client certificate chain (mTLS)
  std::string tls_key;                         // PEM private key (mTLS)
  std::string tls_server_name;                 // overrides the name the certificate must match
  std::optional<std::string> api_key;          // unset: DFLASH_API_KEY from the environment
  bool pretty = false;

  // Request fields shared by several RPCs.
  std::string model;
  std::string request_id;
  dflash::v1::Priority priority = dflash::v1::PRIORITY_UNSPECIFIED;
  std::optional<bool> truncate;
  dflash::v1::TruncationDirection truncation_direction =
      dflash::v1::TRUNCATION_DIRECTION_UNSPECIFIED;
  dflash::v1::TruncationStrategy truncation_strategy = dflash::v1::TRUNCATION_STRATEGY_UNSPECIFIED;

  // Inputs: from the flags or from a JSONL file (--input, "-" for stdin), split into calls of
  // `batch` inputs (0: one call).
  std::vector<std::string> texts;
  std::vector<std::string> text_pairs;  // empty, or one per --text
  std::string query;
  std::vector<std::string> documents;
  std::vector<std::string> labels;  // --labels, split at commas
  std::string input;
  uint32_t batch = 64;

  // RPC-specific options.
  dflash::v1::ScoreFunction score_function = dflash::v1::SCORE_FUNCTION_UNSPECIFIED;
  uint32_t top_k = 0;
  uint32_t top_n = 0;
  std::string hypothesis_template;
  bool multi_label = false;
  bool return_documents = false;
  uint32_t dimensions = 0;
  std::optional<bool> normalize;
  dflash::v1::EmbeddingEncoding encoding = dflash::v1::EMBEDDING_ENCODING_UNSPECIFIED;
  std::optional<bool> add_special_tokens;
  dflash::v1::AggregationStrategy aggregation = dflash::v1::AGGREGATION_STRATEGY_UNSPECIFIED;
  std::vector<std::string> ignore_labels;  // --ignore_labels, split at commas
  bool keep_all_labels = false;
  std::string service;  // health: "" asks about the whole server
};

// Parses the arguments after the program name. INVALID_ARGUMENT (a usage error) names the
// offending flag or argument; the message is one line.
absl::StatusOr<CliArgs> ParseArgs(const std::vector<std::string>& args);

// The overview (no command) or one command's help: flags and examples.
std::string HelpText(std::optional<Command> command);

}  // namespace dflash::client
