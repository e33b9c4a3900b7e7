// dflash-cli's command line: the subcommand, flag syntax, per-command flag sets, typed values,
// combinations that are usage errors, and the help text.
#include "client/cli_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace dflash::client {
namespace {

namespace v1 = dflash::v1;
using ::testing::HasSubstr;
using ::testing::Not;

// The error message of a usage error (and a failure when the line parses).
std::string ErrorOf(const std::vector<std::string>& args) {
  const absl::StatusOr<CliArgs> parsed = ParseArgs(args);
  EXPECT_FALSE(parsed.ok()) << "parsed: " << ::testing::PrintToString(args);
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message().find('\n'), absl::string_view::npos);  // one line
  return std::string(parsed.status().message());
}

CliArgs Parse(const std::vector<std::string>& args) {
  absl::StatusOr<CliArgs> parsed = ParseArgs(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : CliArgs{};
}

TEST(CliFlags, DefaultsOfACommandWithoutFlags) {
  const CliArgs args = Parse({"info"});
  ASSERT_TRUE(args.command.has_value());
  EXPECT_EQ(*args.command, Command::kInfo);
  EXPECT_EQ(args.target, "localhost:50051");
  EXPECT_EQ(args.timeout, absl::Seconds(30));
  EXPECT_FALSE(args.tls);
  EXPECT_FALSE(args.api_key.has_value());
  EXPECT_FALSE(args.pretty);
  EXPECT_EQ(args.batch, 64U);
  EXPECT_FALSE(args.help);
}

TEST(CliFlags, EveryCommandHasItsName) {
  const std::vector<std::pair<std::string, Command>> commands = {
      {"classify", Command::kClassify}, {"zeroshot", Command::kZeroShot},
      {"rerank", Command::kRerank},     {"embed", Command::kEmbed},
      {"tokenize", Command::kTokenize}, {"tokens", Command::kTokens},
      {"info", Command::kInfo},         {"health", Command::kHealth}};
  for (const auto& [name, command] : commands) {
    EXPECT_EQ(CommandName(command), name);
    const absl::StatusOr<CliArgs> parsed = ParseArgs({name, "--help"});
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(parsed->command, command);
  }
}

TEST(CliFlags, FlagsGoBeforeOrAfterTheCommandInEitherSyntax) {
  const CliArgs args = Parse({"--target", "10.0.0.5:7000", "classify", "--text=a", "--model", "nli",
                              "-top_k=2", "--timeout=500ms", "--pretty"});
  EXPECT_EQ(args.target, "10.0.0.5:7000");
  EXPECT_EQ(args.model, "nli");
  EXPECT_EQ(args.top_k, 2U);
  EXPECT_EQ(args.timeout, absl::Milliseconds(500));
  EXPECT_TRUE(args.pretty);
  EXPECT_EQ(args.texts, std::vector<std::string>{"a"});
}

TEST(CliFlags, RepeatedFlagsKeepTheirOrder) {
  const CliArgs classify =
      Parse({"classify", "--text", "t1", "--text_pair", "p1", "--text=t2", "--text_pair="});
  EXPECT_EQ(classify.texts, (std::vector<std::string>{"t1", "t2"}));
  EXPECT_EQ(classify.text_pairs, (std::vector<std::string>{"p1", ""}));
  const CliArgs rerank =
      Parse({"rerank", "--query", "q", "--document", "d1", "--document", "-d2 starts with a dash"});
  EXPECT_EQ(rerank.documents, (std::vector<std::string>{"d1", "-d2 starts with a dash"}));
}

TEST(CliFlags, OptionalBooleansTellUnsetFromFalse) {
  EXPECT_FALSE(Parse({"classify", "--text=a"}).truncate.has_value());
  EXPECT_EQ(Parse({"classify", "--text=a", "--truncate"}).truncate, true);
  EXPECT_EQ(Parse({"classify", "--text=a", "--notruncate"}).truncate, false);
  EXPECT_EQ(Parse({"classify", "--text=a", "--truncate=false"}).truncate, false);
  EXPECT_EQ(Parse({"classify", "--text=a", "--truncate=true"}).truncate, true);
  EXPECT_EQ(Parse({"embed", "--text=a", "--normalize=false"}).normalize, false);
  EXPECT_FALSE(Parse({"embed", "--text=a"}).normalize.has_value());
  EXPECT_EQ(Parse({"tokenize", "--text=a", "--noadd_special_tokens"}).add_special_tokens, false);
  EXPECT_THAT(ErrorOf({"classify", "--text=a", "--truncate=maybe"}),
              HasSubstr("--truncate=maybe: expected true or false"));
  // A boolean never takes the next argument as its value.
  EXPECT_THAT(ErrorOf({"classify", "--truncate", "false", "--text=a"}),
              HasSubstr("unexpected argument 'false'"));
}

TEST(CliFlags, ChoicesMapToTheApiEnums) {
  const CliArgs args = Parse({"classify", "--text=a", "--priority=high", "--score_function=RAW",
                              "--truncation_direction=left", "--truncation_strategy=only_second"});
  EXPECT_EQ(args.priority, v1::PRIORITY_HIGH);
  EXPECT_EQ(args.score_function, v1::SCORE_FUNCTION_RAW);
  EXPECT_EQ(args.truncation_direction, v1::TRUNCATION_DIRECTION_LEFT);
  EXPECT_EQ(args.truncation_strategy, v1::TRUNCATION_STRATEGY_ONLY_SECOND);
  EXPECT_EQ(Parse({"embed", "--text=a", "--encoding", "float16"}).encoding,
            v1::EMBEDDING_ENCODING_FLOAT16);
  EXPECT_THAT(ErrorOf({"classify", "--text=a", "--priority=urgent"}),
              HasSubstr("--priority=urgent: expected one of low, normal, high"));
}

TEST(CliFlags, CountsAreNonNegativeIntegers) {
  EXPECT_EQ(Parse({"rerank", "--query=q", "--document=d", "--top_n=3", "--batch=0"}).top_n, 3U);
  EXPECT_THAT(ErrorOf({"classify", "--text=a", "--top_k=-1"}),
              HasSubstr("--top_k=-1: expected a non-negative integer"));
  EXPECT_THAT(ErrorOf({"embed", "--text=a", "--dimensions=12x"}), HasSubstr("--dimensions=12x"));
  EXPECT_THAT(ErrorOf({"classify", "--text=a", "--batch=99999999999"}), HasSubstr("--batch"));
}

TEST(CliFlags, Timeouts) {
  EXPECT_EQ(Parse({"info", "--timeout=2"}).timeout, absl::Seconds(2));
  EXPECT_EQ(Parse({"info", "--timeout=1.5s"}).timeout, absl::Milliseconds(1500));
  EXPECT_EQ(Parse({"info", "--timeout=2m"}).timeout, absl::Minutes(2));
  EXPECT_EQ(Parse({"info", "--timeout=inf"}).timeout, absl::InfiniteDuration());
  EXPECT_THAT(ErrorOf({"info", "--timeout=0"}), HasSubstr("must be positive"));
  EXPECT_THAT(ErrorOf({"info", "--timeout=soon"}), HasSubstr("expected a duration"));
}

TEST(CliFlags, LabelsSplitAtCommas) {
  const CliArgs args =
      Parse({"zeroshot", "--text=a", "--labels", " sports , politics", "--labels=tech"});
  EXPECT_EQ(args.labels, (std::vector<std::string>{"sports", "politics", "tech"}));
  EXPECT_THAT(ErrorOf({"zeroshot", "--text=a", "--labels=a,,b"}), HasSubstr("an empty label"));
}

TEST(CliFlags, FlagsOfAnotherCommandAreUsageErrors) {
  EXPECT_EQ(ErrorOf({"classify", "--text=a", "--top_n=3"}),
            "--top_n is not a flag of 'classify' (see 'dflash-cli classify --help')");
  EXPECT_THAT(ErrorOf({"--service=x", "info"}), HasSubstr("--service is not a flag of 'info'"));
  EXPECT_THAT(ErrorOf({"tokenize", "--text=a", "--priority=low"}),
              HasSubstr("--priority is not a flag of 'tokenize'"));
  EXPECT_THAT(ErrorOf({"health", "--model=m"}), HasSubstr("--model is not a flag of 'health'"));
}

TEST(CliFlags, MalformedLines) {
  EXPECT_THAT(ErrorOf({"classify", "--txt=a"}), HasSubstr("unknown flag --txt"));
  EXPECT_THAT(ErrorOf({"classify", "--nomodel"}), HasSubstr("unknown flag --nomodel"));
  EXPECT_THAT(ErrorOf({"classify", "--text"}), HasSubstr("--text needs a value (--text=TEXT)"));
  EXPECT_THAT(ErrorOf({"classify", "--text=a", "--model=x", "--model=y"}),
              HasSubstr("--model given more than once"));
  EXPECT_THAT(ErrorOf({"classfy", "--text=a"}), HasSubstr("unknown command 'classfy'"));
  EXPECT_THAT(ErrorOf({"--target=x"}), HasSubstr("missing command"));
  EXPECT_THAT(ErrorOf({}), HasSubstr("missing command"));
  EXPECT_THAT(ErrorOf({"classify", "some text"}), HasSubstr("unexpected argument 'some text'"));
  // After "--" everything is an argument, even what looks like a flag.
  EXPECT_THAT(ErrorOf({"classify", "--text=a", "--", "--pretty"}),
              HasSubstr("unexpected argument '--pretty'"));
}

TEST(CliFlags, RequiredInputsAndCombinations) {
  EXPECT_THAT(ErrorOf({"classify"}), HasSubstr("classify needs --text or --input"));
  EXPECT_THAT(ErrorOf({"embed", "--text=a", "--input=f.jsonl"}),
              HasSubstr("give --text or --input, not both"));
  EXPECT_THAT(ErrorOf({"classify", "--text=a", "--text=b", "--text_pair=p"}),
              HasSubstr("2 --text but 1 --text_pair; give one --text_pair per --text"));
  EXPECT_THAT(ErrorOf({"zeroshot", "--text=a"}), HasSubstr("zeroshot needs --labels"));
  EXPECT_THAT(ErrorOf({"rerank", "--document=d"}), HasSubstr("rerank needs --query"));
  EXPECT_THAT(ErrorOf({"rerank", "--query=q"}), HasSubstr("rerank needs --document or --input"));
  EXPECT_THAT(ErrorOf({"rerank", "--query=q", "--document=d", "--input=-"}), HasSubstr("not both"));
  EXPECT_EQ(Parse({"rerank", "--query=", "--document=d"}).query, "");  // given, though empty
  EXPECT_THAT(ErrorOf({"info", "--tls_cert=c.pem"}), HasSubstr("--tls_cert and --tls_key"));
}

TEST(CliFlags, TlsFlagsImplyTls) {
  EXPECT_TRUE(Parse({"info", "--tls"}).tls);
  EXPECT_TRUE(Parse({"info", "--tls_ca=ca.pem"}).tls);
  EXPECT_TRUE(Parse({"info", "--tls_server_name=dflash.internal"}).tls);
  const CliArgs mtls = Parse({"info", "--tls_cert=c.pem", "--tls_key=k.pem"});
  EXPECT_TRUE(mtls.tls);
  EXPECT_EQ(mtls.tls_key, "k.pem");
}

TEST(CliFlags, HelpWinsOverEverythingElse) {
  EXPECT_TRUE(Parse({"--help"}).help);
  EXPECT_TRUE(Parse({"-h"}).help);
  EXPECT_FALSE(Parse({"--help"}).command.has_value());
  const CliArgs help_command = Parse({"help", "rerank"});
  EXPECT_TRUE(help_command.help);
  EXPECT_EQ(help_command.command, Command::kRerank);
  // A line that is otherwise a usage error still shows the help.
  EXPECT_TRUE(Parse({"classify", "--top_n=3", "--help"}).help);
  EXPECT_FALSE(ParseArgs({"nosuchcommand", "--help"}).ok());
}

TEST(CliFlags, HelpListsTheCommandsFlagsAndExamples) {
  const std::string overview = HelpText(std::nullopt);
  for (const char* name : {"classify", "zeroshot", "rerank", "embed", "tokenize", "info", "health",
                           "--target=HOST:PORT", "--api_key", "DFLASH_API_KEY", "Exit status"}) {
    EXPECT_THAT(overview, HasSubstr(name));
  }
  const std::string classify = HelpText(Command::kClassify);
  EXPECT_THAT(classify, HasSubstr("--text_pair=TEXT ..."));
  EXPECT_THAT(classify, HasSubstr("--score_function=softmax|sigmoid|raw"));
  EXPECT_THAT(classify, HasSubstr("--target=HOST:PORT"));
  EXPECT_THAT(classify, HasSubstr("Examples:\n  dflash-cli classify"));
  EXPECT_THAT(classify, Not(HasSubstr("--top_n")));
  EXPECT_THAT(classify, Not(HasSubstr("--service")));
  EXPECT_THAT(HelpText(Command::kRerank), HasSubstr("--return_documents"));
  EXPECT_THAT(HelpText(Command::kHealth), HasSubstr("--service=NAME"));
  EXPECT_THAT(HelpText(Command::kHealth), Not(HasSubstr("--model")));
  for (const std::string& text : {overview, classify, HelpText(Command::kZeroShot)}) {
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      EXPECT_LE(line.size(), 100U) << line;
    }
  }
}

TEST(CliFlags, TokensTakesAnAggregationAndLabelsToIgnore) {
  const CliArgs args = Parse({"tokens", "--text=Paris", "--aggregation=first",
                              "--ignore_labels=O,MISC", "--ignore_labels", "PER"});
  EXPECT_EQ(args.aggregation, dflash::v1::AGGREGATION_STRATEGY_FIRST);
  EXPECT_THAT(args.ignore_labels, ::testing::ElementsAre("O", "MISC", "PER"));
  EXPECT_FALSE(args.keep_all_labels);
  EXPECT_TRUE(Parse({"tokens", "--text=x", "--keep_all_labels"}).keep_all_labels);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"tokens", "--text=x", "--aggregation=mean"},
           {"tokens", "--text=x", "--ignore_labels=O,"},
           {"tokens", "--text=x", "--ignore_labels=O", "--keep_all_labels"},
           {"tokens", "--text=x", "--text_pair=y"},
           {"tokens"},
           {"classify", "--text=x", "--aggregation=max"}}) {
    EXPECT_EQ(ParseArgs(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << absl::StrJoin(bad, " ");
  }
  const std::string help = HelpText(Command::kTokens);
  EXPECT_THAT(help, ::testing::HasSubstr("--aggregation=none|simple|first|average|max"));
  EXPECT_THAT(help, ::testing::HasSubstr("TokenClassify"));
}

}  // namespace
}  // namespace dflash::client
