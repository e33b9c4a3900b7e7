// The transport-free parts of the HTTP front: routing, each API family's request parsing (every
// field, every error) and response rendering, and the status/body of every error class.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/http/cohere_rerank.h"
#include "server/http/http_errors.h"
#include "server/http/http_router.h"
#include "server/http/json_body.h"
#include "server/http/openai_embeddings.h"
#include "server/http/tei_requests.h"
#include "server/http/tei_responses.h"
#include "server/service/call_context.h"

namespace dflash::http {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

json Body(absl::string_view text) {
  absl::StatusOr<json> parsed = ParseJsonBody(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : json::object();
}

TEST(HttpRouterTest, MatchesEveryRoute) {
  struct Case {
    const char* method;
    const char* path;
    Endpoint endpoint;
    ApiFamily family;
    const char* model;
  };
  const Case cases[] = {
      {"GET", "/health", Endpoint::kHealth, ApiFamily::kTei, ""},
      {"HEAD", "/health", Endpoint::kHealth, ApiFamily::kTei, ""},
      {"GET", "/info", Endpoint::kInfo, ApiFamily::kTei, ""},
      {"POST", "/embed", Endpoint::kEmbed, ApiFamily::kTei, ""},
      {"POST", "/decode", Endpoint::kDecode, ApiFamily::kTei, ""},
      {"POST", "/models/m/decode", Endpoint::kDecode, ApiFamily::kTei, "m"},
      {"POST", "/predict", Endpoint::kPredict, ApiFamily::kTei, ""},
      {"POST", "/rerank", Endpoint::kRerank, ApiFamily::kTei, ""},
      {"POST", "/tokenize", Endpoint::kTokenize, ApiFamily::kTei, ""},
      {"POST", "/zero_shot", Endpoint::kZeroShot, ApiFamily::kTei, ""},
      {"POST", "/token_classify", Endpoint::kTokenClassify, ApiFamily::kTei, ""},
      {"POST", "/models/ner/token_classify", Endpoint::kTokenClassify, ApiFamily::kTei, "ner"},
      {"POST", "/", Endpoint::kByTask, ApiFamily::kTei, ""},
      {"POST", "/invocations", Endpoint::kByTask, ApiFamily::kTei, ""},
      {"POST", "/models/m-1.x/embed", Endpoint::kEmbed, ApiFamily::kTei, "m-1.x"},
      {"POST", "/models/m", Endpoint::kByTask, ApiFamily::kTei, "m"},
      {"GET", "/models/m/info", Endpoint::kInfo, ApiFamily::kTei, "m"},
      {"POST", "/v1/embeddings", Endpoint::kOpenAiEmbeddings, ApiFamily::kOpenAi, ""},
      {"GET", "/v1/models", Endpoint::kOpenAiModels, ApiFamily::kOpenAi, ""},
      {"GET", "/v1/models/embed", Endpoint::kOpenAiModel, ApiFamily::kOpenAi, "embed"},
      {"POST", "/v1/rerank", Endpoint::kCohereRerank, ApiFamily::kCohere, ""},
      {"POST", "/v2/rerank", Endpoint::kCohereRerank, ApiFamily::kCohere, ""},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.path);
    const RouteMatch match = MatchRoute(test.method, test.path);
    EXPECT_EQ(match.status, 200);
    EXPECT_EQ(match.endpoint, test.endpoint);
    EXPECT_EQ(match.family, test.family);
    EXPECT_EQ(match.model, test.model);
  }
}

TEST(HttpRouterTest, RefusesUnknownPathsAndMethods) {
  EXPECT_EQ(MatchRoute("POST", "/nothing").status, 404);
  EXPECT_EQ(MatchRoute("POST", "/models/bad id/embed").status, 404);
  EXPECT_EQ(MatchRoute("POST", "/models//embed").status, 404);
  EXPECT_EQ(MatchRoute("POST", "/v1/models/a/b").status, 404);
  EXPECT_EQ(MatchRoute("GET", "/v1/unknown").family, ApiFamily::kOpenAi);
  const RouteMatch wrong = MatchRoute("GET", "/embed");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_STREQ(wrong.allow, "POST");
  EXPECT_EQ(MatchRoute("DELETE", "/v1/models").status, 405);
  EXPECT_EQ(MatchRoute("GET", "/v1/rerank").family, ApiFamily::kCohere);
}

TEST(JsonBodyTest, RefusesWhatIsNotAJsonObject) {
  for (const char* text : {"", "{", "[]", "3", "\"x\"", "{\"a\":1,\"a\":2}",
                           "{\"a\":[[[[[[[[[[1]]]]]]]]]]}", "{\"a\":\"\xff\"}"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<json> parsed = ParseJsonBody(text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(HttpStatusFor(ApiFamily::kTei, parsed.status()), 400);
  }
}

TEST(TeiRequestsTest, EmbedFields) {
  absl::StatusOr<TeiEmbed> embed = ParseTeiEmbed(Body(
      R"({"inputs":["a","b"],"normalize":false,"truncate":true,"truncation_direction":"Left",
          "dimensions":8,"model":"m","prompt_name":null})"));
  ASSERT_TRUE(embed.ok()) << embed.status();
  EXPECT_EQ(embed->request.inputs_size(), 2);
  EXPECT_FALSE(embed->request.normalize());
  EXPECT_TRUE(embed->request.truncate());
  EXPECT_EQ(embed->request.truncation_direction(), v1::TRUNCATION_DIRECTION_LEFT);
  EXPECT_EQ(embed->request.dimensions(), 8u);
  EXPECT_EQ(embed->request.model(), "m");
  absl::StatusOr<TeiEmbed> defaults = ParseTeiEmbed(Body(R"({"inputs":"a"})"));
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->request.normalize());
  EXPECT_FALSE(defaults->request.has_truncate());  // The model's configured default.
  EXPECT_EQ(defaults->request.truncation_direction(), v1::TRUNCATION_DIRECTION_UNSPECIFIED);
}

TEST(TeiRequestsTest, FieldErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* field;
    int status;
  };
  const Case cases[] = {
      {R"({})", "inputs: is required", 422},
      {R"({"inputs":{}})", "inputs: must be a string or a list", 422},
      {R"({"inputs":[]})", "inputs: must not be empty", 400},
      {R"({"inputs":["a",null]})", "inputs[1]", 422},
      {R"({"inputs":"a","normalize":1})", "normalize", 422},
      {R"({"inputs":"a","dimensions":-1})", "dimensions", 422},
      {R"({"inputs":"a","dimensions":0})", "dimensions: must be at least 1", 422},
      {R"({"inputs":"a","dimensions":1.5})", "dimensions", 422},
      {R"({"inputs":"a","truncation_direction":"up"})", "truncation_direction", 422},
      {R"({"inputs":"a","model":7})", "model", 422},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.body);
    absl::StatusOr<TeiEmbed> embed = ParseTeiEmbed(Body(test.body));
    ASSERT_FALSE(embed.ok());
    EXPECT_THAT(embed.status().message(), HasSubstr(test.field));
    EXPECT_EQ(HttpStatusFor(ApiFamily::kTei, embed.status()), test.status);
  }
}

TEST(TeiRequestsTest, EmbedTokenIdInputs) {
  // A list of numbers is one input given as ids; a list may mix texts and id lists, as TEI's.
  absl::StatusOr<TeiEmbed> single = ParseTeiEmbed(Body(R"({"inputs":[1,7,-3,2]})"));
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_EQ(single->request.inputs_size(), 1);
  ASSERT_EQ(single->token_ids.size(), 1u);
  ASSERT_TRUE(single->token_ids[0].has_value());
  EXPECT_THAT(*single->token_ids[0], ElementsAre(1, 7, -3, 2));

  absl::StatusOr<TeiEmbed> mixed = ParseTeiEmbed(Body(R"({"inputs":["a",[1,2],"b"]})"));
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->request.inputs_size(), 3);
  EXPECT_EQ(mixed->request.inputs(0), "a");
  ASSERT_EQ(mixed->token_ids.size(), 3u);
  EXPECT_FALSE(mixed->token_ids[0].has_value());
  EXPECT_THAT(*mixed->token_ids[1], ElementsAre(1, 2));
  EXPECT_FALSE(mixed->token_ids[2].has_value());

  absl::StatusOr<TeiEmbed> texts = ParseTeiEmbed(Body(R"({"inputs":["a","b"]})"));
  ASSERT_TRUE(texts.ok());
  EXPECT_TRUE(texts->token_ids.empty());

  struct Case {
    const char* body;
    const char* field;
    int status;
  };
  const Case cases[] = {
      {R"({"inputs":[[]]})", "inputs[0]: the token id list is empty", 400},
      {R"({"inputs":["a",[1,"b"]]})", "inputs[1][1]: must be a token id", 422},
      {R"({"inputs":[1,2.5]})", "inputs[1]: must be a token id", 422},
      {R"({"inputs":[1,2147483648]})", "inputs[1]: must be a token id", 422},
      {R"({"inputs":[1,-2147483649]})", "inputs[1]: must be a token id", 422},
      {R"({"inputs":[1,true]})", "inputs[1]: must be a token id", 422},
      {R"({"inputs":[[1],{}]})", "inputs[1]: must be a string or a list of token ids", 422},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.body);
    absl::StatusOr<TeiEmbed> embed = ParseTeiEmbed(Body(test.body));
    ASSERT_FALSE(embed.ok());
    EXPECT_THAT(embed.status().message(), HasSubstr(test.field));
    EXPECT_EQ(HttpStatusFor(ApiFamily::kTei, embed.status()), test.status);
  }
}

TEST(TeiRequestsTest, DecodeBodies) {
  absl::StatusOr<TeiDecode> single = ParseTeiDecode(Body(R"({"ids":[1,5,2]})"));
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_EQ(single->ids.size(), 1u);
  EXPECT_THAT(single->ids[0], ElementsAre(1, 5, 2));
  EXPECT_TRUE(single->skip_special_tokens);
  absl::StatusOr<TeiDecode> batch =
      ParseTeiDecode(Body(R"({"ids":[[1],[5,6]],"skip_special_tokens":false,"model":"m"})"));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->ids.size(), 2u);
  EXPECT_THAT(batch->ids[1], ElementsAre(5, 6));
  EXPECT_FALSE(batch->skip_special_tokens);
  EXPECT_EQ(batch->model, "m");

  struct Case {
    const char* body;
    const char* field;
    int status;
  };
  const Case cases[] = {
      {R"({})", "ids: is required", 422},
      {R"({"ids":"1 2"})", "ids: must be a list", 422},
      {R"({"ids":[]})", "ids: must not be empty", 400},
      {R"({"ids":[[1],[]]})", "ids[1]: the token id list is empty", 400},
      {R"({"ids":[[1],2]})", "ids[1]: must be a list of token ids", 422},
      {R"({"ids":[1,"a"]})", "ids[1]: must be a token id", 422},
      {R"({"ids":[1],"skip_special_tokens":"no"})", "skip_special_tokens", 422},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.body);
    absl::StatusOr<TeiDecode> decode = ParseTeiDecode(Body(test.body));
    ASSERT_FALSE(decode.ok());
    EXPECT_THAT(decode.status().message(), HasSubstr(test.field));
    EXPECT_EQ(HttpStatusFor(ApiFamily::kTei, decode.status()), test.status);
  }
  EXPECT_EQ(RenderTeiDecode({"a b", "", "\xff"}), "[\"a b\",\"\",\"\xEF\xBF\xBD\"]");
}

TEST(TeiRequestsTest, PredictInputShapes) {
  absl::StatusOr<TeiPredict> single = ParseTeiPredict(Body(R"({"inputs":"a"})"));
  ASSERT_TRUE(single.ok());
  EXPECT_FALSE(single->batch);
  EXPECT_EQ(single->request.inputs_size(), 1);
  absl::StatusOr<TeiPredict> pair = ParseTeiPredict(Body(R"({"inputs":["a","b"]})"));
  ASSERT_TRUE(pair.ok());
  EXPECT_FALSE(pair->batch);
  EXPECT_EQ(pair->request.inputs(0).text_pair(), "b");
  absl::StatusOr<TeiPredict> one = ParseTeiPredict(Body(R"({"inputs":["a"]})"));
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->batch);
  EXPECT_FALSE(one->request.inputs(0).has_text_pair());
  absl::StatusOr<TeiPredict> batch =
      ParseTeiPredict(Body(R"({"inputs":[["a"],["b","c"]],"raw_scores":true})"));
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(batch->batch);
  EXPECT_EQ(batch->request.inputs_size(), 2);
  EXPECT_EQ(batch->request.inputs(1).text_pair(), "c");
  EXPECT_EQ(batch->request.score_function(), v1::SCORE_FUNCTION_RAW);
  absl::StatusOr<TeiPredict> texts = ParseTeiPredict(Body(R"({"inputs":["a","b","c"]})"));
  ASSERT_TRUE(texts.ok());
  EXPECT_TRUE(texts->batch);
  EXPECT_EQ(texts->request.inputs_size(), 3);
  absl::StatusOr<TeiPredict> api = ParseTeiPredict(
      Body(R"({"inputs":"a","parameters":{"top_k":2,"function_to_apply":"sigmoid"}})"));
  ASSERT_TRUE(api.ok());
  EXPECT_TRUE(api->inference_api);
  EXPECT_EQ(api->request.top_k(), 2u);
  EXPECT_EQ(api->request.score_function(), v1::SCORE_FUNCTION_SIGMOID);
  for (const char* bad : {R"({"inputs":[["a","b","c"]]})", R"({"inputs":[[]]})",
                          R"({"inputs":[["a"],3]})", R"({"inputs":"a","parameters":[]})",
                          R"({"inputs":"a","parameters":{"function_to_apply":"x"}})"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(ParseTeiPredict(Body(bad)).ok());
  }
}

TEST(TeiRequestsTest, RerankTokenizeZeroShot) {
  absl::StatusOr<TeiRerank> rerank =
      ParseTeiRerank(Body(R"({"query":"q","texts":["a","b"],"return_text":true})"));
  ASSERT_TRUE(rerank.ok());
  EXPECT_EQ(rerank->request.query(), "q");
  EXPECT_EQ(rerank->request.documents_size(), 2);
  EXPECT_TRUE(rerank->return_text);
  EXPECT_FALSE(ParseTeiRerank(Body(R"({"texts":["a"]})")).ok());
  EXPECT_FALSE(ParseTeiRerank(Body(R"({"query":"q","texts":"a"})")).ok());

  absl::StatusOr<TeiTokenize> tokenize =
      ParseTeiTokenize(Body(R"({"inputs":["a b"],"add_special_tokens":false})"));
  ASSERT_TRUE(tokenize.ok());
  EXPECT_FALSE(tokenize->request.add_special_tokens());
  EXPECT_EQ(tokenize->texts, std::vector<std::string>{"a b"});

  absl::StatusOr<TeiZeroShot> zero_shot = ParseTeiZeroShot(Body(
      R"({"inputs":"t","candidate_labels":["x","y"],"hypothesis_template":"It is {}.",
          "multi_label":true,"top_k":1})"));
  ASSERT_TRUE(zero_shot.ok());
  EXPECT_FALSE(zero_shot->batch);
  EXPECT_EQ(zero_shot->request.candidate_labels_size(), 2);
  EXPECT_EQ(zero_shot->request.hypothesis_template(), "It is {}.");
  EXPECT_TRUE(zero_shot->request.multi_label());
  EXPECT_EQ(zero_shot->request.top_k(), 1u);
  EXPECT_FALSE(ParseTeiZeroShot(Body(R"({"inputs":"t"})")).ok());
}

TEST(TeiRequestsTest, TokenClassify) {
  absl::StatusOr<TeiTokenClassify> parsed = ParseTeiTokenClassify(
      Body(R"({"inputs":["a","b"],"aggregation_strategy":"Simple","ignore_labels":["O","MISC"],
               "truncate":true,"truncation_direction":"Left","model":"ner"})"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->batch);
  EXPECT_EQ(parsed->request.inputs_size(), 2);
  EXPECT_EQ(parsed->request.aggregation(), v1::AGGREGATION_STRATEGY_SIMPLE);
  EXPECT_THAT(parsed->request.ignore_labels(), ::testing::ElementsAre("O", "MISC"));
  EXPECT_FALSE(parsed->request.keep_all_labels());
  EXPECT_TRUE(parsed->request.truncate());
  EXPECT_EQ(parsed->request.truncation_direction(), v1::TRUNCATION_DIRECTION_LEFT);
  EXPECT_EQ(parsed->request.model(), "ner");

  // Defaults: the dflash.v1 ones (aggregation unset, ignore_labels unset, so ["O"]).
  parsed = ParseTeiTokenClassify(Body(R"({"inputs":"a"})"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->batch);
  EXPECT_EQ(parsed->request.aggregation(), v1::AGGREGATION_STRATEGY_UNSPECIFIED);
  EXPECT_EQ(parsed->request.ignore_labels_size(), 0);
  EXPECT_FALSE(parsed->request.keep_all_labels());
  EXPECT_FALSE(parsed->request.has_truncate());

  // The Inference API form; an empty ignore_labels keeps every label, as the pipeline's.
  parsed = ParseTeiTokenClassify(Body(
      R"({"inputs":"a","parameters":{"aggregation_strategy":"max","ignore_labels":[],
          "stride":null}})"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->request.aggregation(), v1::AGGREGATION_STRATEGY_MAX);
  EXPECT_TRUE(parsed->request.keep_all_labels());
  EXPECT_EQ(parsed->request.ignore_labels_size(), 0);
  const std::pair<const char*, const char*> strategies[] = {
      {"none", "1"}, {"first", "3"}, {"average", "4"}, {"AVERAGE", "4"}};
  for (const auto& [name, number] : strategies) {
    parsed = ParseTeiTokenClassify(
        Body(absl::StrCat(R"({"inputs":"a","aggregation_strategy":")", name, R"("})")));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(absl::StrCat(static_cast<int>(parsed->request.aggregation())), number) << name;
  }

  const std::pair<const char*, const char*> errors[] = {
      {R"({})", "inputs: is required"},
      {R"({"inputs":[]})", "inputs: must not be empty"},
      {R"({"inputs":"a","aggregation_strategy":"mean"})", "aggregation_strategy: must be"},
      {R"({"inputs":"a","aggregation_strategy":3})", "aggregation_strategy"},
      {R"({"inputs":"a","ignore_labels":"O"})", "ignore_labels"},
      {R"({"inputs":"a","ignore_labels":["O",1]})", "ignore_labels[1]"},
      {R"({"inputs":"a","parameters":[]})", "parameters: must be an object"},
      {R"({"inputs":"a","parameters":{"aggregation_strategy":"x"}})",
       "parameters.aggregation_strategy"},
      {R"({"inputs":"a","parameters":{"stride":16}})", "parameters.stride: is not supported"},
      {R"({"inputs":"a","truncation_direction":"Up"})", "truncation_direction"},
  };
  for (const auto& [body, message] : errors) {
    SCOPED_TRACE(body);
    parsed = ParseTeiTokenClassify(Body(body));
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(message));
  }
}

TEST(TeiResponsesTest, Shapes) {
  v1::EmbedResponse embed;
  embed.add_embeddings()->add_float32_values(0.1f);
  EXPECT_EQ(RenderTeiEmbed(embed), "[[0.1]]");

  v1::ClassifyResponse classify;
  auto* score = classify.add_results()->add_scores();
  score->set_label("pos");
  score->set_score(0.75f);
  TeiPredict single;
  EXPECT_EQ(RenderTeiPredict(classify, single), R"([{"label":"pos","score":0.75}])");
  single.inference_api = true;
  EXPECT_EQ(RenderTeiPredict(classify, single), R"([[{"label":"pos","score":0.75}]])");

  v1::RerankResponse rerank;
  auto* result = rerank.add_results();
  result->set_index(2);
  result->set_score(0.5f);
  result->set_document("doc");
  EXPECT_EQ(RenderTeiRerank(rerank, false), R"([{"index":2,"score":0.5}])");
  EXPECT_EQ(RenderTeiRerank(rerank, true), R"([{"index":2,"score":0.5,"text":"doc"}])");
  EXPECT_THAT(
      RenderCohereRerank(rerank),
      HasSubstr(R"("results":[{"document":{"text":"doc"},"index":2,"relevance_score":0.5}])"));

  v1::TokenizeResponse tokens;
  auto* encoding = tokens.add_encodings();
  auto* cls = encoding->add_tokens();
  cls->set_id(1);
  cls->set_piece("[CLS]");
  cls->set_special(true);
  auto* word = encoding->add_tokens();
  word->set_id(7);
  word->set_piece("\xe2\x96\x81hi");
  word->set_start(0);
  word->set_end(2);
  TeiTokenize request;
  request.texts = {"hi"};
  EXPECT_EQ(RenderTeiTokenize(tokens, request),
            R"([[{"id":1,"special":true,"start":null,"stop":null,"text":"[CLS]"},)"
            R"({"id":7,"special":false,"start":0,"stop":2,"text":"hi"}]])");

  // Tokens (aggregation none) carry entity and index, groups entity_group; start/end are the
  // code-point offsets.
  v1::TokenClassifyResponse entities;
  auto* token = entities.add_results()->add_entities();
  token->set_label("B-LOC");
  token->set_label_id(3);
  token->set_token_index(2);
  token->set_score(0.5f);
  token->set_word("\xe2\x96\x81Z\xc3\xbcrich");
  token->set_start(3);
  token->set_end(11);
  token->set_char_start(3);
  token->set_char_end(10);
  EXPECT_EQ(RenderTeiTokenClassify(entities, false),
            "[{\"end\":10,\"entity\":\"B-LOC\",\"index\":2,\"score\":0.5,\"start\":3,"
            "\"word\":\"\xe2\x96\x81Z\xc3\xbcrich\"}]");
  auto* group = entities.add_results()->add_entities();
  group->set_label("PER");
  group->set_score(0.25f);
  group->set_word("Ann");
  group->set_char_start(0);
  group->set_char_end(3);
  EXPECT_EQ(RenderTeiTokenClassify(entities, true),
            "[[{\"end\":10,\"entity\":\"B-LOC\",\"index\":2,\"score\":0.5,\"start\":3,"
            "\"word\":\"\xe2\x96\x81Z\xc3\xbcrich\"}],"
            R"([{"end":3,"entity_group":"PER","score":0.25,"start":0,"word":"Ann"}]])");
  entities.clear_results();
  entities.add_results();
  EXPECT_EQ(RenderTeiTokenClassify(entities, false), "[]");
  EXPECT_EQ(RenderTeiTokenClassify(entities, true), "[[]]");
}

TEST(OpenAiEmbeddingsTest, RequestAndResponse) {
  absl::StatusOr<OpenAiEmbeddings> parsed = ParseOpenAiEmbeddings(
      Body(R"({"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":4,
               "user":"u"})"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->base64);
  EXPECT_EQ(parsed->request.dimensions(), 4u);
  EXPECT_TRUE(parsed->request.normalize());
  EXPECT_TRUE(parsed->token_ids.empty());
  // OpenAI's token forms: list[int] is one input, list[list[int]] a batch.
  absl::StatusOr<OpenAiEmbeddings> ids = ParseOpenAiEmbeddings(Body(R"({"input":[1,2,3]})"));
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->request.inputs_size(), 1);
  EXPECT_THAT(*ids->token_ids.at(0), ElementsAre(1, 2, 3));
  absl::StatusOr<OpenAiEmbeddings> lists = ParseOpenAiEmbeddings(Body(R"({"input":[[1,2],[3]]})"));
  ASSERT_TRUE(lists.ok()) << lists.status();
  ASSERT_EQ(lists->request.inputs_size(), 2);
  EXPECT_THAT(*lists->token_ids.at(1), ElementsAre(3));
  for (const char* bad : {R"({"input":[1,"a"]})", R"({"input":[[]]})", R"({"input":[[1.5]]})",
                          R"({"model":"embed","input":[[1,2.5,3]]})", R"({"input":[[4294967296]]})",
                          R"({"input":"a","encoding_format":"x"})", R"({"input":[]})",
                          R"({"model":"m"})", R"({"input":"a","user":3})"}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<OpenAiEmbeddings> refused = ParseOpenAiEmbeddings(Body(bad));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(HttpStatusFor(ApiFamily::kOpenAi, refused.status()), 400);
  }

  v1::EmbedResponse response;
  response.mutable_metadata()->set_model("m");
  response.mutable_metadata()->set_tokens(5);
  auto* embedding = response.add_embeddings();
  embedding->add_float32_values(1.0f);
  embedding->add_float32_values(-0.5f);
  const json floats = json::parse(RenderOpenAiEmbeddings(response, false));
  EXPECT_EQ(floats["data"][0]["embedding"], json::parse("[1.0,-0.5]"));
  EXPECT_EQ(floats["data"][0]["object"], "embedding");
  EXPECT_EQ(floats["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(floats["model"], "m");
  const json packed = json::parse(RenderOpenAiEmbeddings(response, true));
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(packed["data"][0]["embedding"].get<std::string>(), &bytes));
  ASSERT_EQ(bytes.size(), 8u);
  float second;
  std::memcpy(&second, bytes.data() + 4, 4);
  EXPECT_EQ(second, -0.5f);
}

TEST(CohereRerankTest, Request) {
  absl::StatusOr<CohereRerank> parsed = ParseCohereRerank(Body(
      R"({"model":"m","query":"q","documents":["a",{"text":"b","title":"t"}],"top_n":1,
          "return_documents":true,"rank_fields":null})"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->request.documents(1), "b");
  EXPECT_EQ(parsed->request.top_n(), 1u);
  EXPECT_TRUE(parsed->request.return_documents());
  for (const char* bad :
       {R"({"query":"q"})", R"({"query":"q","documents":[]})", R"({"query":"q","documents":[{}]})",
        R"({"query":"q","documents":"a"})", R"({"query":"q","documents":["a"],"top_n":0})",
        R"({"documents":["a"]})"}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<CohereRerank> refused = ParseCohereRerank(Body(bad));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(HttpStatusFor(ApiFamily::kCohere, refused.status()), 400);
  }
}

TEST(HttpErrorsTest, StatusAndBodyPerFamily) {
  struct Case {
    absl::Status status;
    int tei;
    const char* tei_type;
    int openai;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("x"), 422, "Validation", 400},
      {EmptyInput("x"), 400, "Empty", 400},
      {MalformedBody("x"), 400, "Validation", 400},
      {absl::NotFoundError("x"), 404, "Validation", 404},
      {absl::FailedPreconditionError("x"), 400, "Validation", 400},
      {absl::UnauthenticatedError("x"), 401, "Unauthorized", 401},
      {absl::PermissionDeniedError("x"), 403, "Unauthorized", 403},
      {absl::ResourceExhaustedError("x"), 429, "Overloaded", 429},
      {serving::ResponseTooLarge("x"), 413, "Validation", 413},
      {absl::UnavailableError("x"), 503, "Unhealthy", 503},
      {absl::DeadlineExceededError("x"), 504, "Backend", 504},
      {absl::InternalError("x"), 424, "Backend", 500},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.status.ToString());
    const HttpResponse tei = ErrorResponse(ApiFamily::kTei, test.status);
    EXPECT_EQ(tei.status, test.tei);
    EXPECT_EQ(json::parse(tei.body), (json{{"error", "x"}, {"error_type", test.tei_type}}));
    const HttpResponse openai = ErrorResponse(ApiFamily::kOpenAi, test.status);
    EXPECT_EQ(openai.status, test.openai);
    const json error = json::parse(openai.body)["error"];
    EXPECT_EQ(error["message"], "x");
    EXPECT_TRUE(error.contains("type") && error.contains("param") && error.contains("code"));
    const HttpResponse cohere = ErrorResponse(ApiFamily::kCohere, test.status);
    EXPECT_EQ(json::parse(cohere.body), (json{{"message", "x"}}));
    const bool retry = test.tei == 429 || test.tei == 503;
    EXPECT_EQ(!tei.headers.empty(), retry);
  }
}

}  // namespace
}  // namespace dflash::http
