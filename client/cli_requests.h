// dflash-cli's requests: inputs from the flags or a JSONL file, split into calls of --batch inputs
// and turned into the dflash.v1 request messages.
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cli_flags.h"
#include "dflash/v1/dflash.pb.h"
#include "grpc/health/v1/health.pb.h"

namespace dflash::client {

// One input: a text (or document) and, for pairs, its second text.
struct InputRecord {
  std::string text;
  std::optional<std::string> text_pair;

  bool operator==(const InputRecord&) const = default;
};

// What one JSONL line holds.
enum class JsonlSchema {
  kTextAndPair,  // {"text": ..., "text_pair": ...} with text_pair optional (classify, tokenize)
  kText,         // {"text": ...} (zeroshot, embed, tokens)
  kDocument,     // {"document": ...} or {"text": ...} (rerank)
};

// The schema of a command's --input lines.
JsonlSchema SchemaOf(Command command);

// Parses JSONL: one JSON object per line; blank lines are skipped and fields other than the
// schema's are ignored (dataset files with ids or labels work as they are). A null text_pair is
// unset. INVALID_ARGUMENT names "<source>:<line>" and the problem; an empty file is an error too.
absl::StatusOr<std::vector<InputRecord>> ParseJsonl(std::istream& in, absl::string_view source,
                                                    JsonlSchema schema);

// The command's inputs: the --text/--text_pair or --document flags, or the --input file ("-"
// reads `stdin_stream`). Usage errors (a missing file, a bad line) are INVALID_ARGUMENT.
absl::StatusOr<std::vector<InputRecord>> CollectInputs(const CliArgs& args,
                                                       std::istream& stdin_stream);

// One request per chunk of args.batch inputs (one request for all when batch is 0), with the
// command's options from `args`.
absl::StatusOr<std::vector<dflash::v1::ClassifyRequest>> BuildClassifyRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs);
absl::StatusOr<std::vector<dflash::v1::ZeroShotRequest>> BuildZeroShotRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs);
absl::StatusOr<std::vector<dflash::v1::RerankRequest>> BuildRerankRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs);
absl::StatusOr<std::vector<dflash::v1::EmbedRequest>> BuildEmbedRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs);
absl::StatusOr<std::vector<dflash::v1::TokenizeRequest>> BuildTokenizeRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs);
absl::StatusOr<std::vector<dflash::v1::TokenClassifyRequest>> BuildTokenClassifyRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs);
dflash::v1::InfoRequest BuildInfoRequest(const CliArgs& args);
grpc::health::v1::HealthCheckRequest BuildHealthRequest(const CliArgs& args);

}  // namespace dflash::client
