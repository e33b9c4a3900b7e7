// dflash-cli's requests: JSONL parsing (with line-numbered errors), inputs from flags, files and
// stdin, and the request messages, chunked by --batch, that carry every option.
#include "client/cli_requests.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dflash::client {
namespace {

namespace v1 = dflash::v1;
using ::testing::HasSubstr;

CliArgs Parse(const std::vector<std::string>& args) {
  absl::StatusOr<CliArgs> parsed = ParseArgs(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : CliArgs{};
}

absl::StatusOr<std::vector<InputRecord>> Jsonl(const std::string& text, JsonlSchema schema) {
  std::istringstream in(text);
  return ParseJsonl(in, "in.jsonl", schema);
}

std::string JsonlError(const std::string& text, JsonlSchema schema) {
  const absl::StatusOr<std::vector<InputRecord>> records = Jsonl(text, schema);
  EXPECT_FALSE(records.ok());
  if (records.ok()) return "";
  EXPECT_EQ(records.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(records.status().message().find('\n'), absl::string_view::npos);
  return std::string(records.status().message());
}

std::vector<InputRecord> Records(const std::vector<std::string>& args) {
  std::istringstream no_stdin;
  absl::StatusOr<std::vector<InputRecord>> records = CollectInputs(Parse(args), no_stdin);
  EXPECT_TRUE(records.ok()) << records.status();
  return records.ok() ? *std::move(records) : std::vector<InputRecord>{};
}

TEST(CliJsonl, TextsAndPairsSkippingBlankLinesAndExtraFields) {
  const absl::StatusOr<std::vector<InputRecord>> records = Jsonl(
      "{\"text\": \"a\"}\n"
      "\n"
      "   \n"
      "{\"text\": \"b\", \"text_pair\": \"c\", \"id\": 7, \"label\": [1]}\r\n"
      "{\"text\": \"\", \"text_pair\": null}\n"
      "{\"text_pair\": \"\", \"text\": \"d\"}",  // no newline at the end
      JsonlSchema::kTextAndPair);
  ASSERT_TRUE(records.ok()) << records.status();
  const std::vector<InputRecord> want = {
      {"a", std::nullopt}, {"b", "c"}, {"", std::nullopt}, {"d", ""}};
  EXPECT_EQ(*records, want);
}

TEST(CliJsonl, BadLinesAreNamedByNumber) {
  EXPECT_EQ(JsonlError("{\"text\": \"a\"}\n\n{\"text\": \"b\",\n", JsonlSchema::kTextAndPair),
            "in.jsonl:3: bad JSON: Unexpected end of string. Expected an object key or }.");
  EXPECT_THAT(JsonlError("{\"text\": \"a\"}\n{\"text\" \"b\"}\n", JsonlSchema::kText),
              HasSubstr("in.jsonl:2: bad JSON: "));
  EXPECT_EQ(JsonlError("[\"a\", \"b\"]\n", JsonlSchema::kText),
            "in.jsonl:1: expected a JSON object");
  EXPECT_EQ(JsonlError("\"just a string\"\n", JsonlSchema::kText),
            "in.jsonl:1: expected a JSON object");
  EXPECT_THAT(JsonlError("{\"text\": \"\xff\"}\n", JsonlSchema::kText),
              HasSubstr("in.jsonl:1: bad JSON: "));
}

TEST(CliJsonl, MissingAndMistypedFields) {
  EXPECT_EQ(JsonlError("{\"text\": \"a\"}\n{\"txt\": \"b\"}\n", JsonlSchema::kTextAndPair),
            "in.jsonl:2: no \"text\"");
  EXPECT_EQ(JsonlError("{\"text\": null}\n", JsonlSchema::kText), "in.jsonl:1: no \"text\"");
  EXPECT_EQ(JsonlError("{\"text\": 12}\n", JsonlSchema::kText),
            "in.jsonl:1: \"text\" must be a string");
  EXPECT_EQ(JsonlError("{\"text\": \"a\", \"text_pair\": true}\n", JsonlSchema::kTextAndPair),
            "in.jsonl:1: \"text_pair\" must be a string");
  EXPECT_THAT(JsonlError("{\"text\": \"a\", \"text_pair\": \"b\"}\n", JsonlSchema::kText),
              HasSubstr("in.jsonl:1: \"text_pair\" is not an input of this command"));
  EXPECT_EQ(JsonlError("", JsonlSchema::kText), "in.jsonl: no inputs");
  EXPECT_EQ(JsonlError("\n\n", JsonlSchema::kText), "in.jsonl: no inputs");
}

TEST(CliJsonl, DocumentsUseDocumentOrText) {
  const absl::StatusOr<std::vector<InputRecord>> records =
      Jsonl("{\"document\": \"d1\"}\n{\"text\": \"d2\"}\n", JsonlSchema::kDocument);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(*records, (std::vector<InputRecord>{{"d1", std::nullopt}, {"d2", std::nullopt}}));
  EXPECT_EQ(JsonlError("{\"document\": \"a\", \"text\": \"b\"}\n", JsonlSchema::kDocument),
            "in.jsonl:1: both \"document\" and \"text\"; give one");
  EXPECT_EQ(JsonlError("{\"query\": \"q\"}\n", JsonlSchema::kDocument),
            "in.jsonl:1: no \"document\" (or \"text\")");
}

TEST(CliJsonl, EachCommandReadsItsSchema) {
  EXPECT_EQ(SchemaOf(Command::kClassify), JsonlSchema::kTextAndPair);
  EXPECT_EQ(SchemaOf(Command::kTokenize), JsonlSchema::kTextAndPair);
  EXPECT_EQ(SchemaOf(Command::kZeroShot), JsonlSchema::kText);
  EXPECT_EQ(SchemaOf(Command::kEmbed), JsonlSchema::kText);
  EXPECT_EQ(SchemaOf(Command::kTokens), JsonlSchema::kText);
  EXPECT_EQ(SchemaOf(Command::kRerank), JsonlSchema::kDocument);
}

TEST(CliInputs, FromFlags) {
  EXPECT_EQ(Records({"classify", "--text=a", "--text_pair=p", "--text=b", "--text_pair="}),
            (std::vector<InputRecord>{{"a", "p"}, {"b", ""}}));
  EXPECT_EQ(Records({"embed", "--text=a", "--text=b"}),
            (std::vector<InputRecord>{{"a", std::nullopt}, {"b", std::nullopt}}));
  EXPECT_EQ(Records({"rerank", "--query=q", "--document=d"}),
            (std::vector<InputRecord>{{"d", std::nullopt}}));
  EXPECT_TRUE(Records({"info"}).empty());
}

TEST(CliInputs, FromAFileOrStdin) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / absl::StrCat("dflash-cli-test-", getpid(), ".jsonl");
  {
    std::ofstream file(path);
    file << "{\"text\": \"one\"}\n{\"text\": \"two\", \"text_pair\": \"2\"}\n";
  }
  std::istringstream no_stdin;
  absl::StatusOr<std::vector<InputRecord>> records =
      CollectInputs(Parse({"classify", "--input", path.string()}), no_stdin);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(*records, (std::vector<InputRecord>{{"one", std::nullopt}, {"two", "2"}}));
  // Errors name the file: embed inputs have no text_pair.
  records = CollectInputs(Parse({"embed", "--input", path.string()}), no_stdin);
  ASSERT_FALSE(records.ok());
  EXPECT_THAT(records.status().message(), HasSubstr(absl::StrCat(path.string(), ":2: ")));
  std::filesystem::remove(path);

  records = CollectInputs(Parse({"classify", "--input", path.string()}), no_stdin);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(records.status().message(), HasSubstr("cannot open"));

  std::istringstream in("{\"document\": \"from stdin\"}\n");
  records = CollectInputs(Parse({"rerank", "--query=q", "--input=-"}), in);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(*records, (std::vector<InputRecord>{{"from stdin", std::nullopt}}));
  std::istringstream bad("{\"document\": 1}\n");
  records = CollectInputs(Parse({"rerank", "--query=q", "--input=-"}), bad);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.status().message(), "<stdin>:1: \"document\" must be a string");
}

std::vector<InputRecord> Texts(int count) {
  std::vector<InputRecord> records;
  for (int i = 0; i < count; ++i) records.push_back({absl::StrCat("t", i), std::nullopt});
  return records;
}

TEST(CliRequests, ClassifyCarriesEveryOptionAndSplitsIntoBatches) {
  const CliArgs args =
      Parse({"classify", "--input=x", "--batch=2", "--model=nli", "--request_id=r7",
             "--priority=low", "--notruncate", "--truncation_direction=left",
             "--truncation_strategy=only_first", "--score_function=sigmoid", "--top_k=3"});
  std::vector<InputRecord> inputs = Texts(5);
  inputs[1].text_pair = "pair";
  inputs[2].text_pair = "";
  const absl::StatusOr<std::vector<v1::ClassifyRequest>> requests =
      BuildClassifyRequests(args, inputs);
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 3U);
  EXPECT_EQ((*requests)[0].inputs_size(), 2);
  EXPECT_EQ((*requests)[1].inputs_size(), 2);
  EXPECT_EQ((*requests)[2].inputs_size(), 1);
  for (const v1::ClassifyRequest& request : *requests) {
    EXPECT_EQ(request.model(), "nli");
    EXPECT_EQ(request.request_id(), "r7");
    EXPECT_EQ(request.priority(), v1::PRIORITY_LOW);
    EXPECT_TRUE(request.has_truncate());
    EXPECT_FALSE(request.truncate());
    EXPECT_EQ(request.truncation_direction(), v1::TRUNCATION_DIRECTION_LEFT);
    EXPECT_EQ(request.truncation_strategy(), v1::TRUNCATION_STRATEGY_ONLY_FIRST);
    EXPECT_EQ(request.score_function(), v1::SCORE_FUNCTION_SIGMOID);
    EXPECT_EQ(request.top_k(), 3U);
  }
  EXPECT_EQ((*requests)[0].inputs(0).text(), "t0");
  EXPECT_FALSE((*requests)[0].inputs(0).has_text_pair());
  EXPECT_EQ((*requests)[0].inputs(1).text_pair(), "pair");
  EXPECT_TRUE((*requests)[1].inputs(0).has_text_pair());  // "" is still a pair
  EXPECT_EQ((*requests)[1].inputs(0).text_pair(), "");
  EXPECT_EQ((*requests)[2].inputs(0).text(), "t4");
}

TEST(CliRequests, UnsetOptionsStayUnset) {
  const absl::StatusOr<std::vector<v1::ClassifyRequest>> requests =
      BuildClassifyRequests(Parse({"classify", "--text=a"}), Texts(1));
  ASSERT_TRUE(requests.ok());
  ASSERT_EQ(requests->size(), 1U);
  const v1::ClassifyRequest& request = requests->front();
  EXPECT_FALSE(request.has_truncate());
  EXPECT_EQ(request.priority(), v1::PRIORITY_UNSPECIFIED);
  EXPECT_EQ(request.score_function(), v1::SCORE_FUNCTION_UNSPECIFIED);
  // Only the input is on the wire: every other field is at its default.
  v1::ClassifyRequest only_input;
  only_input.add_inputs()->set_text("t0");
  EXPECT_EQ(request.SerializeAsString(), only_input.SerializeAsString());
}

TEST(CliRequests, BatchZeroSendsEverythingInOneCall) {
  const absl::StatusOr<std::vector<v1::EmbedRequest>> requests =
      BuildEmbedRequests(Parse({"embed", "--input=x", "--batch=0"}), Texts(200));
  ASSERT_TRUE(requests.ok());
  ASSERT_EQ(requests->size(), 1U);
  EXPECT_EQ(requests->front().inputs_size(), 200);
  const absl::StatusOr<std::vector<v1::EmbedRequest>> by_default =
      BuildEmbedRequests(Parse({"embed", "--input=x"}), Texts(200));
  ASSERT_TRUE(by_default.ok());
  EXPECT_EQ(by_default->size(), 4U);  // 64 + 64 + 64 + 8
  EXPECT_EQ(by_default->back().inputs_size(), 8);
  EXPECT_FALSE(BuildEmbedRequests(Parse({"embed", "--input=x"}), {}).ok());
}

TEST(CliRequests, ZeroShot) {
  const CliArgs args =
      Parse({"zeroshot", "--text=a", "--text=b", "--labels=sports,politics", "--template",
             "It is about {}.", "--multi_label", "--top_k=1", "--priority=normal"});
  std::istringstream no_stdin;
  const absl::StatusOr<std::vector<InputRecord>> inputs = CollectInputs(args, no_stdin);
  ASSERT_TRUE(inputs.ok());
  const absl::StatusOr<std::vector<v1::ZeroShotRequest>> requests =
      BuildZeroShotRequests(args, *inputs);
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 1U);
  const v1::ZeroShotRequest& request = requests->front();
  EXPECT_THAT(request.texts(), ::testing::ElementsAre("a", "b"));
  EXPECT_THAT(request.candidate_labels(), ::testing::ElementsAre("sports", "politics"));
  EXPECT_EQ(request.hypothesis_template(), "It is about {}.");
  EXPECT_TRUE(request.multi_label());
  EXPECT_EQ(request.top_k(), 1U);
  EXPECT_EQ(request.priority(), v1::PRIORITY_NORMAL);
}

TEST(CliRequests, RerankRepeatsTheQueryInEveryCall) {
  const CliArgs args = Parse({"rerank", "--query=how do guitars work", "--input=x", "--batch=2",
                              "--top_n=1", "--return_documents", "--score_function=raw"});
  const absl::StatusOr<std::vector<v1::RerankRequest>> requests =
      BuildRerankRequests(args, Texts(3));
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 2U);
  for (const v1::RerankRequest& request : *requests) {
    EXPECT_EQ(request.query(), "how do guitars work");
    EXPECT_EQ(request.top_n(), 1U);
    EXPECT_TRUE(request.return_documents());
    EXPECT_EQ(request.score_function(), v1::SCORE_FUNCTION_RAW);
  }
  EXPECT_THAT((*requests)[0].documents(), ::testing::ElementsAre("t0", "t1"));
  EXPECT_THAT((*requests)[1].documents(), ::testing::ElementsAre("t2"));
}

TEST(CliRequests, EmbedAndTokenizeOptions) {
  const absl::StatusOr<std::vector<v1::EmbedRequest>> embed = BuildEmbedRequests(
      Parse({"embed", "--text=a", "--dimensions=256", "--normalize=false", "--encoding=float16"}),
      Texts(1));
  ASSERT_TRUE(embed.ok());
  EXPECT_EQ(embed->front().dimensions(), 256U);
  EXPECT_TRUE(embed->front().has_normalize());
  EXPECT_FALSE(embed->front().normalize());
  EXPECT_EQ(embed->front().encoding(), v1::EMBEDDING_ENCODING_FLOAT16);
  const absl::StatusOr<std::vector<v1::EmbedRequest>> plain =
      BuildEmbedRequests(Parse({"embed", "--text=a"}), Texts(1));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->front().has_normalize());

  const absl::StatusOr<std::vector<v1::TokenizeRequest>> tokenize = BuildTokenizeRequests(
      Parse({"tokenize", "--text=a", "--noadd_special_tokens", "--truncate", "--request_id=t"}),
      {{"q", "p"}});
  ASSERT_TRUE(tokenize.ok());
  const v1::TokenizeRequest& request = tokenize->front();
  EXPECT_TRUE(request.has_add_special_tokens());
  EXPECT_FALSE(request.add_special_tokens());
  EXPECT_TRUE(request.truncate());
  EXPECT_EQ(request.request_id(), "t");
  EXPECT_EQ(request.inputs(0).text_pair(), "p");
}

TEST(CliRequests, TokenClassifyOptions) {
  const absl::StatusOr<std::vector<v1::TokenClassifyRequest>> requests = BuildTokenClassifyRequests(
      Parse({"tokens", "--text=a", "--aggregation=average", "--ignore_labels=O,MISC",
             "--priority=high", "--batch=2", "--model=ner"}),
      Texts(3));
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 2U);
  const v1::TokenClassifyRequest& first = requests->front();
  EXPECT_EQ(first.model(), "ner");
  EXPECT_EQ(first.inputs_size(), 2);
  EXPECT_EQ(first.aggregation(), v1::AGGREGATION_STRATEGY_AVERAGE);
  EXPECT_THAT(first.ignore_labels(), ::testing::ElementsAre("O", "MISC"));
  EXPECT_FALSE(first.keep_all_labels());
  EXPECT_EQ(first.priority(), v1::PRIORITY_HIGH);
  EXPECT_EQ(requests->back().inputs_size(), 1);
  // Unset: the server's defaults (NONE, ignore "O").
  const auto plain = BuildTokenClassifyRequests(Parse({"tokens", "--text=a"}), Texts(1));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->front().aggregation(), v1::AGGREGATION_STRATEGY_UNSPECIFIED);
  EXPECT_EQ(plain->front().ignore_labels_size(), 0);
  EXPECT_EQ(BuildTokenClassifyRequests(Parse({"tokens", "--text=a"}), {{"q", "p"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CliRequests, InfoAndHealth) {
  EXPECT_EQ(BuildInfoRequest(Parse({"info", "--model=demo"})).model(), "demo");
  EXPECT_EQ(BuildInfoRequest(Parse({"info"})).model(), "");
  EXPECT_EQ(BuildHealthRequest(Parse({"health", "--service=dflash.v1.InferenceService"})).service(),
            "dflash.v1.InferenceService");
  EXPECT_EQ(BuildHealthRequest(Parse({"health"})).service(), "");
}

}  // namespace
}  // namespace dflash::client
