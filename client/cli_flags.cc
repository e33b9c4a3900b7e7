#include "client/cli_flags.h"

#include <array>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace dflash::client {
namespace {

namespace v1 = dflash::v1;

constexpr unsigned Bit(Command command) { return 1U << static_cast<unsigned>(command); }

constexpr unsigned kClassify = Bit(Command::kClassify);
constexpr unsigned kZeroShot = Bit(Command::kZeroShot);
constexpr unsigned kRerank = Bit(Command::kRerank);
constexpr unsigned kEmbed = Bit(Command::kEmbed);
constexpr unsigned kTokenize = Bit(Command::kTokenize);
constexpr unsigned kTokens = Bit(Command::kTokens);
constexpr unsigned kInfo = Bit(Command::kInfo);
constexpr unsigned kHealth = Bit(Command::kHealth);
// The RPCs that queue (and so take a priority), and those that also read inputs.
constexpr unsigned kQueued = kClassify | kZeroShot | kRerank | kEmbed | kTokens;
constexpr unsigned kWithInputs = kQueued | kTokenize;
constexpr unsigned kAll = kWithInputs | kInfo | kHealth;
// The commands whose inputs are texts (--text or --input).
constexpr unsigned kTextInputs = kClassify | kZeroShot | kEmbed | kTokenize | kTokens;

struct CommandDef {
  Command command;
  absl::string_view name;
  absl::string_view summary;
  absl::string_view usage;
  absl::string_view description;
  absl::string_view examples;
};

constexpr std::array<CommandDef, 8> kCommands = {{
    {Command::kClassify, "classify", "Score texts or text pairs with a sequence classifier.",
     "classify (--text=TEXT [--text_pair=TEXT] ... | --input=FILE) [flags]",
     "Scores texts or text pairs with a sequence-classification model "
     "(InferenceService.Classify).\n"
     "--input lines: {\"text\": \"...\", \"text_pair\": \"...\"} (text_pair optional; other fields "
     "are ignored).",
     "dflash-cli classify --text \"A man is playing a guitar.\"\n"
     "dflash-cli classify --text \"A man plays.\" --text_pair \"Someone makes music.\" --top_k 1\n"
     "dflash-cli --target=gpu-1:50051 classify --input reviews.jsonl --batch 128 --priority low"},
    {Command::kZeroShot, "zeroshot", "Classify texts against free-form labels with an NLI model.",
     "zeroshot (--text=TEXT ... | --input=FILE) --labels=A,B ... [flags]",
     "Zero-shot classification through an NLI model (InferenceService.ZeroShot): every text is "
     "paired\nwith a hypothesis per candidate label. --input lines: {\"text\": \"...\"}.",
     "dflash-cli zeroshot --text \"The match went to extra time.\" --labels sports,politics\n"
     "dflash-cli zeroshot --input news.jsonl --labels tech,food,sports --multi_label --top_k 1\n"
     "dflash-cli zeroshot --text \"...\" --labels tech,food --template \"This text is about {}.\""},
    {Command::kRerank, "rerank", "Rank documents against a query with a cross-encoder.",
     "rerank --query=TEXT (--document=TEXT ... | --input=FILE) [flags]",
     "Scores documents against one query with a cross-encoder and sorts them "
     "(InferenceService.Rerank).\n--input lines: {\"document\": \"...\"} or {\"text\": \"...\"}. "
     "Each call ranks its own --batch\ndocuments (indices are within the call); --batch 0 ranks "
     "all of them together.",
     "dflash-cli rerank --query \"how do guitars make sound\" --document \"Strings vibrate.\" "
     "--document \"Extra time.\"\n"
     "dflash-cli rerank --query \"guitars\" --input docs.jsonl --batch 0 --top_n 10 "
     "--return_documents"},
    {Command::kEmbed, "embed", "Compute an embedding per text.",
     "embed (--text=TEXT ... | --input=FILE) [flags]",
     "Computes one embedding vector per text (InferenceService.Embed). --input lines: {\"text\": "
     "\"...\"}.\nFloat16 values come back base64-encoded (proto JSON of bytes).",
     "dflash-cli embed --text \"query: guitars\" --dimensions 256\n"
     "dflash-cli embed --input corpus.jsonl --normalize=false --encoding float16"},
    {Command::kTokenize, "tokenize", "Show the tokens the model would see.",
     "tokenize (--text=TEXT [--text_pair=TEXT] ... | --input=FILE) [flags]",
     "Tokenizes inputs exactly as the inference RPCs would, without running the model\n"
     "(InferenceService.Tokenize). --input lines: {\"text\": \"...\", \"text_pair\": \"...\"}.",
     "dflash-cli tokenize --text \"héllo world\"\n"
     "dflash-cli tokenize --text \"question\" --text_pair \"passage\" --noadd_special_tokens"},
    {Command::kTokens, "tokens", "Label the tokens of texts and group them into entities.",
     "tokens (--text=TEXT ... | --input=FILE) [flags]",
     "Labels every token of each text with a token-classification model and groups the labels "
     "into\nentities (InferenceService.TokenClassify), as transformers' "
     "TokenClassificationPipeline does.\nOffsets: start/end in UTF-8 bytes, char_start/char_end "
     "in code points. --input lines: {\"text\": \"...\"}.",
     "dflash-cli tokens --text \"Ada Lovelace met Charles Babbage in London.\" --aggregation "
     "simple\n"
     "dflash-cli tokens --input news.jsonl --aggregation first --ignore_labels O,MISC\n"
     "dflash-cli tokens --text \"Paris\" --keep_all_labels --pretty"},
    {Command::kInfo, "info", "Describe the server and its models.", "info [--model=ID] [flags]",
     "Describes the server and the models it serves (InferenceService.Info).",
     "dflash-cli info\ndflash-cli info --model nli-deberta-v3-base --pretty"},
    {Command::kHealth, "health", "Check the server's health (grpc.health.v1).",
     "health [--service=NAME] [flags]",
     "Asks grpc.health.v1.Health/Check about a service (\"\": the whole server). Exits with 1 "
     "unless\nthe status is SERVING, so it can serve as a probe.",
     "dflash-cli health\ndflash-cli --target=localhost:50051 health --service "
     "dflash.v1.InferenceService"},
}};

using ApplyFn = absl::Status (*)(absl::string_view value, CliArgs& args);

// One flag. An empty value_name marks a boolean flag (--x, --nox, --x=false).
struct FlagDef {
  absl::string_view name;
  absl::string_view value_name;
  bool repeated;
  unsigned commands;
  absl::string_view help;
  ApplyFn apply;
};

absl::Status FlagError(absl::string_view name, absl::string_view value, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--", name, "=", value, ": ", what));
}

absl::StatusOr<bool> ParseBool(absl::string_view name, absl::string_view value) {
  bool result = false;
  if (!absl::SimpleAtob(value, &result)) return FlagError(name, value, "expected true or false");
  return result;
}

absl::StatusOr<uint32_t> ParseCount(absl::string_view name, absl::string_view value) {
  uint32_t result = 0;
  if (!absl::SimpleAtoi(value, &result)) {
    return FlagError(name, value, "expected a non-negative integer");
  }
  return result;
}

// Looks `value` up in a name -> enum table; the error lists the accepted names.
template <typename E, size_t N>
absl::StatusOr<E> ParseChoice(absl::string_view name, absl::string_view value,
                              const std::array<std::pair<absl::string_view, E>, N>& choices) {
  for (const auto& [choice, result] : choices) {
    if (absl::EqualsIgnoreCase(value, choice)) return result;
  }
  std::vector<absl::string_view> names;
  for (const auto& choice : choices) names.push_back(choice.first);
  return FlagError(name, value, absl::StrCat("expected one of ", absl::StrJoin(names, ", ")));
}

constexpr std::array<std::pair<absl::string_view, v1::Priority>, 3> kPriorities = {{
    {"low", v1::PRIORITY_LOW},
    {"normal", v1::PRIORITY_NORMAL},
    {"high", v1::PRIORITY_HIGH},
}};
constexpr std::array<std::pair<absl::string_view, v1::TruncationDirection>, 2> kDirections = {{
    {"right", v1::TRUNCATION_DIRECTION_RIGHT},
    {"left", v1::TRUNCATION_DIRECTION_LEFT},
}};
constexpr std::array<std::pair<absl::string_view, v1::TruncationStrategy>, 3> kStrategies = {{
    {"longest_first", v1::TRUNCATION_STRATEGY_LONGEST_FIRST},
    {"only_first", v1::TRUNCATION_STRATEGY_ONLY_FIRST},
    {"only_second", v1::TRUNCATION_STRATEGY_ONLY_SECOND},
}};
constexpr std::array<std::pair<absl::string_view, v1::ScoreFunction>, 3> kScoreFunctions = {{
    {"softmax", v1::SCORE_FUNCTION_SOFTMAX},
    {"sigmoid", v1::SCORE_FUNCTION_SIGMOID},
    {"raw", v1::SCORE_FUNCTION_RAW},
}};
constexpr std::array<std::pair<absl::string_view, v1::AggregationStrategy>, 5> kAggregations = {{
    {"none", v1::AGGREGATION_STRATEGY_NONE},
    {"simple", v1::AGGREGATION_STRATEGY_SIMPLE},
    {"first", v1::AGGREGATION_STRATEGY_FIRST},
    {"average", v1::AGGREGATION_STRATEGY_AVERAGE},
    {"max", v1::AGGREGATION_STRATEGY_MAX},
}};
constexpr std::array<std::pair<absl::string_view, v1::EmbeddingEncoding>, 2> kEncodings = {{
    {"float32", v1::EMBEDDING_ENCODING_FLOAT32},
    {"float16", v1::EMBEDDING_ENCODING_FLOAT16},
}};

absl::Status ApplyTimeout(absl::string_view value, CliArgs& args) {
  absl::Duration timeout;
  double seconds = 0;
  if (absl::SimpleAtod(value, &seconds)) {  // a bare number is seconds
    timeout = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(value, &timeout)) {
    return FlagError("timeout", value, "expected a duration such as 30s, 500ms, 2m or inf");
  }
  if (timeout <= absl::ZeroDuration()) return FlagError("timeout", value, "must be positive");
  args.timeout = timeout;
  return absl::OkStatus();
}

// Appends the comma-separated, non-empty labels of --`name` to `labels`.
absl::Status AppendLabels(absl::string_view name, absl::string_view value,
                          std::vector<std::string>& labels) {
  for (absl::string_view label : absl::StrSplit(value, ',')) {
    label = absl::StripAsciiWhitespace(label);
    if (label.empty()) return FlagError(name, value, "has an empty label");
    labels.emplace_back(label);
  }
  return absl::OkStatus();
}

absl::Status ApplyLabels(absl::string_view value, CliArgs& args) {
  return AppendLabels("labels", value, args.labels);
}

// The flags, in the order help lists them: connection and output first, then request fields.
const std::vector<FlagDef>& Flags() {
  static const std::vector<FlagDef> flags = {
      {"target", "HOST:PORT", false, kAll, "Server address (default localhost:50051).",
       [](absl::string_view v, CliArgs& a) {
         a.target = std::string(v);
         return absl::OkStatus();
       }},
      {"timeout", "DURATION", false, kAll,
       "Deadline of each call: 30s, 500ms, 2m, a number of seconds, or inf (default 30s).",
       ApplyTimeout},
      {"tls", "", false, kAll, "Use TLS, verifying the server with the system's root certificates.",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.tls, ParseBool("tls", v));
         return absl::OkStatus();
       }},
      {"tls_ca", "FILE", false, kAll,
       "PEM root certificates to verify the server with (implies --tls).",
       [](absl::string_view v, CliArgs& a) {
         a.tls_ca = std::string(v);
         return absl::OkStatus();
       }},
      {"tls_cert", "FILE", false, kAll,
       "PEM client certificate chain for mutual TLS, with --tls_key (implies --tls).",
       [](absl::string_view v, CliArgs& a) {
         a.tls_cert = std::string(v);
         return absl::OkStatus();
       }},
      {"tls_key", "FILE", false, kAll, "PEM private key of --tls_cert.",
       [](absl::string_view v, CliArgs& a) {
         a.tls_key = std::string(v);
         return absl::OkStatus();
       }},
      {"tls_server_name", "NAME", false, kAll,
       "Name the server's certificate must match, when it is not the target's host (implies "
       "--tls).",
       [](absl::string_view v, CliArgs& a) {
         a.tls_server_name = std::string(v);
         return absl::OkStatus();
       }},
      {"api_key", "KEY", false, kAll,
       "Sent as the metadata 'authorization: Bearer KEY' (default: $DFLASH_API_KEY).",
       [](absl::string_view v, CliArgs& a) {
         a.api_key = std::string(v);
         return absl::OkStatus();
       }},
      {"pretty", "", false, kAll, "Indent the JSON output.",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.pretty, ParseBool("pretty", v));
         return absl::OkStatus();
       }},
      {"text", "TEXT", true, kTextInputs, "An input text; repeat the flag for several.",
       [](absl::string_view v, CliArgs& a) {
         a.texts.emplace_back(v);
         return absl::OkStatus();
       }},
      {"text_pair", "TEXT", true, kClassify | kTokenize,
       "The second text of a pair; give one per --text, in the same order.",
       [](absl::string_view v, CliArgs& a) {
         a.text_pairs.emplace_back(v);
         return absl::OkStatus();
       }},
      {"labels", "A,B", true, kZeroShot,
       "Candidate labels, comma-separated; repeat the flag to add more.", ApplyLabels},
      {"template", "TEXT", false, kZeroShot,
       "Hypothesis template with one {} (default: the server's, \"This example is {}.\").",
       [](absl::string_view v, CliArgs& a) {
         a.hypothesis_template = std::string(v);
         return absl::OkStatus();
       }},
      {"multi_label", "", false, kZeroShot,
       "Judge every label alone instead of a softmax over the labels.",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.multi_label, ParseBool("multi_label", v));
         return absl::OkStatus();
       }},
      {"query", "TEXT", false, kRerank, "The query every document is scored against.",
       [](absl::string_view v, CliArgs& a) {
         a.query = std::string(v);
         return absl::OkStatus();
       }},
      {"document", "TEXT", true, kRerank, "A document; repeat the flag for several.",
       [](absl::string_view v, CliArgs& a) {
         a.documents.emplace_back(v);
         return absl::OkStatus();
       }},
      {"input", "FILE", false, kWithInputs,
       "JSONL file of inputs, one JSON object per line ('-': stdin), instead of the input "
       "flags.",
       [](absl::string_view v, CliArgs& a) {
         a.input = std::string(v);
         return absl::OkStatus();
       }},
      {"batch", "N", false, kWithInputs,
       "Inputs (texts, documents) per call (default 64; 0: all in one call).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.batch, ParseCount("batch", v));
         return absl::OkStatus();
       }},
      {"score_function", "softmax|sigmoid|raw", false, kClassify | kRerank,
       "How logits become scores (default: the model's).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.score_function,
                                 ParseChoice("score_function", v, kScoreFunctions));
         return absl::OkStatus();
       }},
      {"top_k", "N", false, kClassify | kZeroShot,
       "Return only the N best labels of each input (default 0: all).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.top_k, ParseCount("top_k", v));
         return absl::OkStatus();
       }},
      {"top_n", "N", false, kRerank, "Return only the N best documents (default 0: all).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.top_n, ParseCount("top_n", v));
         return absl::OkStatus();
       }},
      {"return_documents", "", false, kRerank, "Copy each document's text into its result.",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.return_documents, ParseBool("return_documents", v));
         return absl::OkStatus();
       }},
      {"dimensions", "N", false, kEmbed,
       "Keep the first N values of each embedding (Matryoshka models; default 0: all).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.dimensions, ParseCount("dimensions", v));
         return absl::OkStatus();
       }},
      {"normalize", "", false, kEmbed, "Scale embeddings to unit L2 norm (default true).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.normalize, ParseBool("normalize", v));
         return absl::OkStatus();
       }},
      {"encoding", "float32|float16", false, kEmbed,
       "Encoding of the values in the response (default float32).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.encoding, ParseChoice("encoding", v, kEncodings));
         return absl::OkStatus();
       }},
      {"add_special_tokens", "", false, kTokenize,
       "Add the special tokens ([CLS], [SEP]) the model sees (default true).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.add_special_tokens, ParseBool("add_special_tokens", v));
         return absl::OkStatus();
       }},
      {"aggregation", "none|simple|first|average|max", false, kTokens,
       "How token labels become entities (default none: one per token; see dflash.proto).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.aggregation, ParseChoice("aggregation", v, kAggregations));
         return absl::OkStatus();
       }},
      {"ignore_labels", "A,B", true, kTokens,
       "Labels (entity groups) left out of the answer, comma-separated (default: O).",
       [](absl::string_view v, CliArgs& a) {
         return AppendLabels("ignore_labels", v, a.ignore_labels);
       }},
      {"keep_all_labels", "", false, kTokens, "Leave nothing out, O included.",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.keep_all_labels, ParseBool("keep_all_labels", v));
         return absl::OkStatus();
       }},
      {"service", "NAME", false, kHealth,
       "The service to ask about, e.g. dflash.v1.InferenceService (default \"\": the server).",
       [](absl::string_view v, CliArgs& a) {
         a.service = std::string(v);
         return absl::OkStatus();
       }},
      {"model", "ID", false, kAll & ~kHealth,
       "Served model id (info lists them). Default: the server's only model; info: all models.",
       [](absl::string_view v, CliArgs& a) {
         a.model = std::string(v);
         return absl::OkStatus();
       }},
      {"request_id", "ID", false, kWithInputs,
       "Echoed in the response metadata and written to the server's logs.",
       [](absl::string_view v, CliArgs& a) {
         a.request_id = std::string(v);
         return absl::OkStatus();
       }},
      {"priority", "low|normal|high", false, kQueued,
       "Scheduling priority (default: the server's, normally normal).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.priority, ParseChoice("priority", v, kPriorities));
         return absl::OkStatus();
       }},
      {"truncate", "", false, kWithInputs,
       "Truncate over-long inputs (true) or reject them (false; default: the server's).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.truncate, ParseBool("truncate", v));
         return absl::OkStatus();
       }},
      {"truncation_direction", "right|left", false, kWithInputs,
       "Which end truncation removes tokens from (default: the tokenizer's).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.truncation_direction,
                                 ParseChoice("truncation_direction", v, kDirections));
         return absl::OkStatus();
       }},
      {"truncation_strategy", "longest_first|only_first|only_second", false,
       kClassify | kZeroShot | kRerank | kTokenize,
       "How pairs are truncated (default: the RPC's; see dflash.proto).",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.truncation_strategy,
                                 ParseChoice("truncation_strategy", v, kStrategies));
         return absl::OkStatus();
       }},
      {"help", "", true, kAll, "Show help and exit.",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.help, ParseBool("help", v));
         return absl::OkStatus();
       }},
      {"h", "", true, kAll, "Same as --help.",
       [](absl::string_view v, CliArgs& a) {
         DFLASH_ASSIGN_OR_RETURN(a.help, ParseBool("h", v));
         return absl::OkStatus();
       }},
  };
  return flags;
}

// The connection and output flags, which every command takes; help lists them apart.
bool IsCommonFlag(const FlagDef& flag) {
  return flag.commands == kAll && flag.name != "help" && flag.name != "h";
}

const FlagDef* FindFlag(absl::string_view name) {
  for (const FlagDef& flag : Flags()) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

const CommandDef* FindCommand(absl::string_view name) {
  for (const CommandDef& def : kCommands) {
    if (def.name == name) return &def;
  }
  return nullptr;
}

// kCommands is indexed by Command.
constexpr bool CommandsInEnumOrder() {
  for (size_t i = 0; i < kCommands.size(); ++i) {
    if (static_cast<size_t>(kCommands[i].command) != i) return false;
  }
  return true;
}
static_assert(CommandsInEnumOrder());

const CommandDef& Def(Command command) { return kCommands[static_cast<size_t>(command)]; }

std::string CommandList() {
  std::vector<absl::string_view> names;
  for (const CommandDef& def : kCommands) names.push_back(def.name);
  return absl::StrJoin(names, ", ");
}

absl::Status UsageError(absl::string_view message, std::optional<Command> command) {
  return absl::InvalidArgumentError(absl::StrCat(
      message, " (see 'dflash-cli ",
      command.has_value() ? absl::StrCat(CommandName(*command), " ") : "", "--help')"));
}

// Combinations the flag table cannot express: required inputs, --text_pair counts, key with cert.
absl::Status CheckCombinations(const CliArgs& args, const std::set<absl::string_view>& given) {
  const Command command = *args.command;
  const absl::string_view name = CommandName(command);
  const auto fail = [&](absl::string_view message) { return UsageError(message, command); };
  if ((Bit(command) & kTextInputs) != 0) {
    if (args.texts.empty() && args.input.empty()) {
      return fail(absl::StrCat(name, " needs --text or --input"));
    }
    if (!args.texts.empty() && !args.input.empty()) return fail("give --text or --input, not both");
  }
  if (!args.text_pairs.empty() && args.text_pairs.size() != args.texts.size()) {
    return fail(absl::StrCat(args.texts.size(), " --text but ", args.text_pairs.size(),
                             " --text_pair; give one --text_pair per --text"));
  }
  if (command == Command::kZeroShot && args.labels.empty()) return fail("zeroshot needs --labels");
  if (args.keep_all_labels && !args.ignore_labels.empty()) {
    return fail("give --ignore_labels or --keep_all_labels, not both");
  }
  if (command == Command::kRerank) {
    if (!given.contains("query")) return fail("rerank needs --query");
    if (args.documents.empty() && args.input.empty()) {
      return fail("rerank needs --document or --input");
    }
    if (!args.documents.empty() && !args.input.empty()) {
      return fail("give --document or --input, not both");
    }
  }
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    return fail("--tls_cert and --tls_key go together");
  }
  return absl::OkStatus();
}

// Appends "  left   help" with the help wrapped at 100 columns under a 32-column indent.
void AppendFlagLine(std::string& out, absl::string_view left, absl::string_view help) {
  constexpr size_t kIndent = 32;
  constexpr size_t kWidth = 100;
  std::string line = absl::StrCat("  ", left);
  if (line.size() + 1 >= kIndent) {
    absl::StrAppend(&out, line, "\n");
    line.clear();
  }
  line.resize(kIndent, ' ');
  bool first = true;
  for (absl::string_view word : absl::StrSplit(help, ' ', absl::SkipEmpty())) {
    if (!first && line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(&out, line, "\n");
      line.assign(kIndent, ' ');
      first = true;
    }
    absl::StrAppend(&line, first ? "" : " ", word);
    first = false;
  }
  absl::StrAppend(&out, line, "\n");
}

void AppendFlag(std::string& out, const FlagDef& flag) {
  std::string left = absl::StrCat("--", flag.name);
  if (flag.value_name.empty()) {
    absl::StrAppend(&left, "[=true|false]");
  } else {
    absl::StrAppend(&left, "=", flag.value_name);
  }
  if (flag.repeated) absl::StrAppend(&left, " ...");
  AppendFlagLine(out, left, flag.help);
}

void AppendIndented(std::string& out, absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) absl::StrAppend(&out, "  ", line, "\n");
}

constexpr absl::string_view kOutputNote =
    "Output: one JSON document per call on stdout, with the API's field names (--pretty indents "
    "it).\nErrors: one line on stderr. Exit status: 0 ok, 1 RPC error (or not SERVING), 2 usage "
    "error.\n";

}  // namespace

absl::string_view CommandName(Command command) { return Def(command).name; }

absl::StatusOr<CliArgs> ParseArgs(const std::vector<std::string>& args) {
  CliArgs result;
  std::vector<absl::string_view> positionals;
  // (flag, value) in command-line order; applied once the command is known and allows them.
  std::vector<std::pair<const FlagDef*, std::string>> given;
  std::set<absl::string_view> seen;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const absl::string_view arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      positionals.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    absl::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::optional<std::string> value;
    if (const size_t eq = body.find('='); eq != absl::string_view::npos) {
      value = std::string(body.substr(eq + 1));
      body = body.substr(0, eq);
    }
    const FlagDef* flag = FindFlag(body);
    if (flag == nullptr && absl::StartsWith(body, "no") && !value.has_value()) {
      // --noX is --X=false for boolean flags.
      const FlagDef* negated = FindFlag(body.substr(2));
      if (negated != nullptr && negated->value_name.empty()) {
        flag = negated;
        value = "false";
      }
    }
    if (flag == nullptr) return UsageError(absl::StrCat("unknown flag --", body), std::nullopt);
    if (!value.has_value()) {
      if (flag->value_name.empty()) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return UsageError(absl::StrCat("--", flag->name, " needs a value (--", flag->name, "=",
                                       flag->value_name, ")"),
                          std::nullopt);
      }
    }
    if (!seen.insert(flag->name).second && !flag->repeated) {
      return UsageError(absl::StrCat("--", flag->name, " given more than once"), std::nullopt);
    }
    given.emplace_back(flag, *std::move(value));
  }

  // The first positional is the command; "help [command]" is --help.
  size_t next = 0;
  if (next < positionals.size() && positionals[next] == "help") {
    result.help = true;
    ++next;
  }
  if (next < positionals.size()) {
    const CommandDef* def = FindCommand(positionals[next]);
    if (def == nullptr) {
      return UsageError(
          absl::StrCat("unknown command '", positionals[next], "' (commands: ", CommandList(), ")"),
          std::nullopt);
    }
    result.command = def->command;
    ++next;
  }
  for (const auto& [flag, value] : given) {
    if (flag->name == "help" || flag->name == "h")
      DFLASH_RETURN_IF_ERROR(flag->apply(value, result));
  }
  if (result.help) return result;  // help wins over every other mistake on the line
  if (!result.command.has_value()) {
    return UsageError(absl::StrCat("missing command (", CommandList(), ")"), std::nullopt);
  }
  if (next < positionals.size()) {
    return UsageError(absl::StrCat("unexpected argument '", positionals[next],
                                   "' (inputs are given with flags such as --text)"),
                      result.command);
  }
  for (const auto& [flag, value] : given) {
    if ((flag->commands & Bit(*result.command)) == 0) {
      return UsageError(
          absl::StrCat("--", flag->name, " is not a flag of '", CommandName(*result.command), "'"),
          result.command);
    }
    DFLASH_RETURN_IF_ERROR(flag->apply(value, result));
  }
  if (!result.tls_ca.empty() || !result.tls_cert.empty() || !result.tls_server_name.empty()) {
    result.tls = true;
  }
  DFLASH_RETURN_IF_ERROR(CheckCombinations(result, seen));
  return result;
}

std::string HelpText(std::optional<Command> command) {
  std::string out;
  const auto& flags = Flags();
  if (!command.has_value()) {
    absl::StrAppend(&out,
                    "dflash-cli: command-line client of the DisentangledFlash Serve gRPC API "
                    "(dflash.v1).\n\nUsage: dflash-cli [flags] <command> [flags]\n\nCommands:\n");
    for (const CommandDef& def : kCommands) {
      absl::StrAppend(&out, "  ", def.name, std::string(12 - def.name.size(), ' '), def.summary,
                      "\n");
    }
    absl::StrAppend(&out, "\nFlags of every command:\n");
    for (const FlagDef& flag : flags) {
      if (IsCommonFlag(flag)) AppendFlag(out, flag);
    }
    absl::StrAppend(&out, "\n", kOutputNote,
                    "\nRun 'dflash-cli <command> --help' for a command's flags and examples.\n"
                    "\nExamples:\n");
    AppendIndented(out,
                   "dflash-cli classify --text \"A man is playing a guitar.\"\n"
                   "dflash-cli --target=10.0.0.5:50051 --api_key=$KEY info --pretty\n"
                   "dflash-cli health --service dflash.v1.InferenceService");
    return out;
  }
  const CommandDef& def = Def(*command);
  absl::StrAppend(&out, "Usage: dflash-cli [flags] ", def.usage, "\n\n", def.description,
                  "\n\nFlags:\n");
  for (const FlagDef& flag : flags) {
    if ((flag.commands & Bit(*command)) != 0 && flag.commands != kAll) AppendFlag(out, flag);
  }
  absl::StrAppend(&out, "\nFlags of every command:\n");
  for (const FlagDef& flag : flags) {
    if (IsCommonFlag(flag)) AppendFlag(out, flag);
  }
  absl::StrAppend(&out, "\n", kOutputNote, "\nExamples:\n");
  AppendIndented(out, def.examples);
  return out;
}

}  // namespace dflash::client
