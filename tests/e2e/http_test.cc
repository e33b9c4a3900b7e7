// End-to-end HTTP/JSON front: the TEI, OpenAI and Cohere routes over real sockets against a
// ServingRuntime, each answer checked against the dflash.v1 gRPC answer for the same input;
// /token_classify on the token-classification golden model; keep-alive; every error family's
// status and body; request smuggling, oversize bodies and slow
// clients; API keys; overload (429) and draining (503); the protocol="http" metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/http_client.h"

namespace dflash::e2e {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kKey[] = "http-test-key-0123456789abcdef";

ServerConfig HttpConfig(std::vector<ModelEntry> models) {
  ServerConfig config = TestServerConfig(std::move(models));
  config.http_listen = "127.0.0.1:0";
  return config;
}

json Parse(const HttpAnswer& answer) {
  return json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
}

class HttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<TinyModels>> models = WriteTinyModels();
    ASSERT_TRUE(models.ok()) << models.status();
    models_ = std::move(*models).release();
    ServerConfig config = HttpConfig({TestModelEntry("demo", DemoModelDir()),
                                      TestModelEntry("rerank", models_->rerank),
                                      TestModelEntry("embed", models_->embed)});
    config.max_message_bytes = 64 << 10;
    absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete models_;
    server_ = nullptr;
    models_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(server_->runtime().http_port(), 0);
  }

  static HttpClient Client() {
    absl::StatusOr<HttpClient> client = HttpClient::Connect(server_->runtime().http_port());
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }
  static HttpAnswer Post(absl::string_view path, const json& body, absl::string_view headers = "") {
    HttpClient client = Client();
    absl::StatusOr<HttpAnswer> answer = client.Post(path, body.dump(), headers);
    EXPECT_TRUE(answer.ok()) << answer.status();
    return answer.ok() ? *answer : HttpAnswer();
  }
  static HttpAnswer PostRaw(absl::string_view path, absl::string_view body) {
    HttpClient client = Client();
    absl::StatusOr<HttpAnswer> answer = client.Post(path, body);
    EXPECT_TRUE(answer.ok()) << answer.status();
    return answer.ok() ? *answer : HttpAnswer();
  }

  static inline TinyModels* models_ = nullptr;
  static inline TestServer* server_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Answers agree with dflash.v1.
// ---------------------------------------------------------------------------------------------

TEST_F(HttpTest, PredictMatchesClassify) {
  v1::ClassifyRequest request;
  request.set_model("demo");
  request.add_inputs()->set_text("a man plays the guitar");
  auto* pair = request.add_inputs();
  pair->set_text("a premise");
  pair->set_text_pair("a hypothesis");
  v1::ClassifyResponse expected;
  ASSERT_TRUE(server_->stub().Classify(NewContext().get(), request, &expected).ok());

  // A single text: its label list alone (the default model serves /predict).
  HttpAnswer single = Post("/predict", {{"inputs", "a man plays the guitar"}});
  ASSERT_EQ(single.status, 200) << single.body;
  json scores = Parse(single);
  ASSERT_EQ(scores.size(), expected.results(0).scores_size());
  for (int i = 0; i < expected.results(0).scores_size(); ++i) {
    EXPECT_EQ(scores[i]["label"], expected.results(0).scores(i).label());
    EXPECT_TRUE(Near(scores[i]["score"].get<double>(), expected.results(0).scores(i).score()));
  }
  // A batch of a text and a pair: one list each.
  HttpAnswer batch =
      Post("/models/demo/predict",
           {{"inputs", {{"a man plays the guitar"}, {"a premise", "a hypothesis"}}}});
  ASSERT_EQ(batch.status, 200) << batch.body;
  json lists = Parse(batch);
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_TRUE(Near(lists[1][0]["score"].get<double>(), expected.results(1).scores(0).score()));
  // A pair alone: ["text", "pair"] is one input.
  HttpAnswer one_pair = Post("/predict", {{"inputs", {"a premise", "a hypothesis"}}});
  ASSERT_EQ(one_pair.status, 200) << one_pair.body;
  EXPECT_TRUE(
      Near(Parse(one_pair)[0]["score"].get<double>(), expected.results(1).scores(0).score()));
  // raw_scores: the logits.
  request.set_score_function(v1::SCORE_FUNCTION_RAW);
  ASSERT_TRUE(server_->stub().Classify(NewContext().get(), request, &expected).ok());
  HttpAnswer raw = Post("/predict", {{"inputs", "a man plays the guitar"}, {"raw_scores", true}});
  EXPECT_TRUE(Near(Parse(raw)[0]["score"].get<double>(), expected.results(0).scores(0).score()));
  // / and /invocations: the classifier's route; the Inference API form answers a list per input.
  HttpAnswer task =
      Post("/invocations", {{"inputs", "a man plays the guitar"}, {"parameters", {{"top_k", 1}}}});
  ASSERT_EQ(task.status, 200) << task.body;
  EXPECT_EQ(Parse(task).size(), 1u);
  EXPECT_EQ(Parse(task)[0].size(), 1u);
}

TEST_F(HttpTest, EmbedAndOpenAiEmbeddingsMatchEmbed) {
  v1::EmbedRequest request;
  request.set_model("embed");
  request.add_inputs("first text");
  request.add_inputs("second text");
  v1::EmbedResponse expected;
  ASSERT_TRUE(server_->stub().Embed(NewContext().get(), request, &expected).ok());

  HttpAnswer tei = Post("/models/embed/embed", {{"inputs", {"first text", "second text"}}});
  ASSERT_EQ(tei.status, 200) << tei.body;
  json vectors = Parse(tei);
  ASSERT_EQ(vectors.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(vectors[i].size(), expected.embeddings(i).float32_values_size());
    for (int k = 0; k < expected.embeddings(i).float32_values_size(); ++k) {
      EXPECT_EQ(vectors[i][k].get<float>(), expected.embeddings(i).float32_values(k));
    }
  }
  // The default model (demo) does not embed: 400 naming the model.
  HttpAnswer wrong_task = Post("/embed", {{"inputs", "x"}});
  EXPECT_EQ(wrong_task.status, 400);

  HttpAnswer openai = Post("/v1/embeddings", {{"model", "embed"},
                                              {"input", {"first text", "second text"}},
                                              {"encoding_format", "base64"}});
  ASSERT_EQ(openai.status, 200) << openai.body;
  json body = Parse(openai);
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "embed");
  EXPECT_EQ(body["usage"]["prompt_tokens"].get<uint64_t>(), expected.metadata().tokens());
  ASSERT_EQ(body["data"].size(), 2u);
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(body["data"][1]["embedding"].get<std::string>(), &bytes));
  ASSERT_EQ(bytes.size(), 4u * expected.embeddings(1).float32_values_size());
  for (int k = 0; k < expected.embeddings(1).float32_values_size(); ++k) {
    float value;
    std::memcpy(&value, bytes.data() + 4 * k, 4);
    EXPECT_EQ(value, expected.embeddings(1).float32_values(k));
  }
  HttpAnswer floats = Post("/v1/embeddings", {{"model", "embed"}, {"input", "first text"}});
  ASSERT_EQ(floats.status, 200) << floats.body;
  EXPECT_EQ(Parse(floats)["data"][0]["embedding"][0].get<float>(),
            expected.embeddings(0).float32_values(0));
}

// Token-id inputs are the model sequence as given: the ids of a text (with [CLS]/[SEP], as
// Tokenize reports them) embed exactly as the text does, on both routes, and usage counts them.
TEST_F(HttpTest, TokenIdInputsEmbedAsTheirText) {
  v1::TokenizeRequest tokenize;
  tokenize.set_model("embed");
  tokenize.add_inputs()->set_text("first text");
  tokenize.add_inputs()->set_text("second text");
  v1::TokenizeResponse tokenized;
  ASSERT_TRUE(server_->stub().Tokenize(NewContext().get(), tokenize, &tokenized).ok());
  std::vector<std::vector<int32_t>> ids(2);
  for (int i = 0; i < 2; ++i) {
    for (const v1::Token& token : tokenized.encodings(i).tokens()) ids[i].push_back(token.id());
  }
  v1::EmbedRequest request;
  request.set_model("embed");
  request.add_inputs("first text");
  request.add_inputs("second text");
  v1::EmbedResponse expected;
  ASSERT_TRUE(server_->stub().Embed(NewContext().get(), request, &expected).ok());

  // TEI: one id list, and a batch mixing an id list and a text.
  HttpAnswer single = Post("/models/embed/embed", {{"inputs", ids[0]}});
  ASSERT_EQ(single.status, 200) << single.body;
  HttpAnswer mixed = Post("/models/embed/embed", {{"inputs", {json(ids[0]), "second text"}}});
  ASSERT_EQ(mixed.status, 200) << mixed.body;
  for (const json& vectors : {Parse(single), Parse(mixed)}) {
    ASSERT_EQ(vectors[0].size(), expected.embeddings(0).float32_values_size());
    for (int k = 0; k < expected.embeddings(0).float32_values_size(); ++k) {
      EXPECT_TRUE(Near(vectors[0][k].get<double>(), expected.embeddings(0).float32_values(k)));
    }
  }
  EXPECT_TRUE(Near(Parse(mixed)[1][0].get<double>(), expected.embeddings(1).float32_values(0)));

  // OpenAI: list[list[int]]; prompt_tokens counts the ids.
  HttpAnswer openai = Post("/v1/embeddings", {{"model", "embed"}, {"input", ids}});
  ASSERT_EQ(openai.status, 200) << openai.body;
  json body = Parse(openai);
  EXPECT_EQ(body["usage"]["prompt_tokens"].get<uint64_t>(), ids[0].size() + ids[1].size());
  EXPECT_EQ(body["usage"]["prompt_tokens"].get<uint64_t>(), expected.metadata().tokens());
  ASSERT_EQ(body["data"].size(), 2u);
  EXPECT_TRUE(Near(body["data"][1]["embedding"][0].get<double>(),
                   expected.embeddings(1).float32_values(0)));

  // Without [CLS]/[SEP] nothing is added: a shorter sequence, counted as sent.
  const std::vector<int32_t> content(ids[0].begin() + 1, ids[0].end() - 1);
  HttpAnswer bare = Post("/v1/embeddings", {{"model", "embed"}, {"input", content}});
  ASSERT_EQ(bare.status, 200) << bare.body;
  EXPECT_EQ(Parse(bare)["usage"]["prompt_tokens"].get<uint64_t>(), content.size());
}

TEST_F(HttpTest, TokenIdInputErrors) {
  // An id outside the vocabulary: 422 (TEI) / 400 in OpenAI's shape, naming input and index.
  HttpAnswer tei = Post("/models/embed/embed", {{"inputs", {json({1, 5}), json({1, 1 << 30})}}});
  EXPECT_EQ(tei.status, 422) << tei.body;
  EXPECT_THAT(Parse(tei)["error"].get<std::string>(), HasSubstr("inputs[1]: token id [1]"));
  HttpAnswer openai = Post("/v1/embeddings", {{"model", "embed"}, {"input", {1, -1}}});
  EXPECT_EQ(openai.status, 400) << openai.body;
  EXPECT_EQ(Parse(openai)["error"]["type"], "invalid_request_error");
  EXPECT_THAT(Parse(openai)["error"]["message"].get<std::string>(),
              HasSubstr("inputs[0]: token id [1]"));
  // Empty id list: TEI's "Empty" error.
  HttpAnswer empty = Post("/models/embed/embed", {{"inputs", {json::array()}}});
  EXPECT_EQ(empty.status, 400) << empty.body;
  EXPECT_EQ(Parse(empty)["error_type"], "Empty");
  // Longer than the model takes: refused with truncate false, cut with truncate true.
  const std::vector<int32_t> long_ids(static_cast<size_t>(kMaxInputLength) + 5, 5);
  HttpAnswer refused = Post("/models/embed/embed", {{"inputs", long_ids}, {"truncate", false}});
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_THAT(Parse(refused)["error"].get<std::string>(), HasSubstr("inputs[0]"));
  HttpAnswer cut = Post("/models/embed/embed", {{"inputs", long_ids}, {"truncate", true}});
  EXPECT_EQ(cut.status, 200) << cut.body;
}

TEST_F(HttpTest, DecodeReturnsTheText) {
  v1::TokenizeRequest tokenize;
  tokenize.set_model("embed");
  tokenize.add_inputs()->set_text("first text");
  v1::TokenizeResponse tokenized;
  ASSERT_TRUE(server_->stub().Tokenize(NewContext().get(), tokenize, &tokenized).ok());
  std::vector<int32_t> ids;
  for (const v1::Token& token : tokenized.encodings(0).tokens()) ids.push_back(token.id());

  const double before = ScrapeRegistry(server_->runtime(), "dflash_requests_total",
                                       {{"protocol", "http"}, {"rpc", "Decode"}, {"code", "OK"}});
  HttpAnswer single = Post("/models/embed/decode", {{"ids", ids}});
  ASSERT_EQ(single.status, 200) << single.body;
  EXPECT_EQ(Parse(single), json({"first text"}));
  EXPECT_EQ(ScrapeRegistry(server_->runtime(), "dflash_requests_total",
                           {{"protocol", "http"}, {"rpc", "Decode"}, {"code", "OK"}}),
            before + 1);
  HttpAnswer kept =
      Post("/models/embed/decode", {{"ids", {ids, ids}}, {"skip_special_tokens", false}});
  ASSERT_EQ(kept.status, 200) << kept.body;
  ASSERT_EQ(Parse(kept).size(), 2u);
  EXPECT_THAT(Parse(kept)[1].get<std::string>(), HasSubstr("first text"));
  EXPECT_NE(Parse(kept)[1], "first text");  // [CLS] and [SEP] are written.

  HttpAnswer outside = Post("/models/embed/decode", {{"ids", {5, 1 << 30}}});
  EXPECT_EQ(outside.status, 422) << outside.body;
  EXPECT_THAT(Parse(outside)["error"].get<std::string>(), HasSubstr("ids: token id [1]"));
}

TEST_F(HttpTest, RerankRoutesMatchRerank) {
  v1::RerankRequest request;
  request.set_model("rerank");
  request.set_query("what is deep learning");
  request.add_documents("deep learning is a kind of machine learning");
  request.add_documents("the cat sat on the mat");
  request.add_documents("neural networks with many layers");
  request.set_return_documents(true);
  v1::RerankResponse expected;
  ASSERT_TRUE(server_->stub().Rerank(NewContext().get(), request, &expected).ok());
  const json documents = {"deep learning is a kind of machine learning", "the cat sat on the mat",
                          "neural networks with many layers"};

  HttpAnswer tei =
      Post("/models/rerank/rerank",
           {{"query", "what is deep learning"}, {"texts", documents}, {"return_text", true}});
  ASSERT_EQ(tei.status, 200) << tei.body;
  json ranks = Parse(tei);
  ASSERT_EQ(ranks.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ranks[i]["index"].get<uint32_t>(), expected.results(i).index());
    EXPECT_TRUE(Near(ranks[i]["score"].get<double>(), expected.results(i).score()));
    EXPECT_EQ(ranks[i]["text"], expected.results(i).document());
  }
  // Cohere / Jina: documents as strings or {"text"} objects, top_n, relevance_score.
  HttpAnswer cohere =
      Post("/v1/rerank", {{"model", "rerank"},
                          {"query", "what is deep learning"},
                          {"documents", {documents[0], {{"text", documents[1]}}, documents[2]}},
                          {"top_n", 2},
                          {"return_documents", true}});
  ASSERT_EQ(cohere.status, 200) << cohere.body;
  json results = Parse(cohere)["results"];
  ASSERT_EQ(results.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(results[i]["index"].get<uint32_t>(), expected.results(i).index());
    EXPECT_TRUE(Near(results[i]["relevance_score"].get<double>(), expected.results(i).score()));
    EXPECT_EQ(results[i]["document"]["text"], expected.results(i).document());
  }
  HttpAnswer v2 =
      Post("/v2/rerank",
           {{"model", "rerank"}, {"query", "what is deep learning"}, {"documents", documents}});
  ASSERT_EQ(v2.status, 200) << v2.body;
  EXPECT_FALSE(Parse(v2)["results"][0].contains("document"));
}

TEST_F(HttpTest, TokenizeZeroShotInfoAndModels) {
  v1::TokenizeRequest request;
  request.set_model("demo");
  request.add_inputs()->set_text("héllo world");
  v1::TokenizeResponse expected;
  ASSERT_TRUE(server_->stub().Tokenize(NewContext().get(), request, &expected).ok());
  HttpAnswer tokens = Post("/tokenize", {{"inputs", "héllo world"}});
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  json list = Parse(tokens)[0];
  ASSERT_EQ(list.size(), expected.encodings(0).tokens_size());
  for (int i = 0; i < expected.encodings(0).tokens_size(); ++i) {
    const v1::Token& token = expected.encodings(0).tokens(i);
    EXPECT_EQ(list[i]["id"].get<int>(), token.id());
    EXPECT_EQ(list[i]["special"].get<bool>(), token.special());
    if (!token.special()) {
      EXPECT_EQ(list[i]["start"].get<uint32_t>(), token.start());
      EXPECT_EQ(list[i]["text"],
                std::string("héllo world").substr(token.start(), token.end() - token.start()));
    } else {
      EXPECT_TRUE(list[i]["start"].is_null());
    }
  }

  v1::ZeroShotRequest zero_shot;
  zero_shot.set_model("demo");
  zero_shot.add_texts("the game went to overtime");
  zero_shot.add_candidate_labels("sports");
  zero_shot.add_candidate_labels("politics");
  v1::ZeroShotResponse labels;
  ASSERT_TRUE(server_->stub().ZeroShot(NewContext().get(), zero_shot, &labels).ok());
  HttpAnswer answer = Post("/zero_shot", {{"inputs", "the game went to overtime"},
                                          {"candidate_labels", {"sports", "politics"}}});
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(Parse(answer)[0]["label"], labels.results(0).scores(0).label());
  EXPECT_TRUE(Near(Parse(answer)[0]["score"].get<double>(), labels.results(0).scores(0).score()));

  HttpClient client = Client();
  absl::StatusOr<HttpAnswer> info = client.Get("/models/embed/info");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(Parse(*info)["model_id"], "embed");
  EXPECT_EQ(Parse(*info)["model_type"]["embedding"]["pooling"], "mean");
  info = client.Get("/info");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(Parse(*info)["model_type"]["classifier"]["id2label"].size(), 3u);
  absl::StatusOr<HttpAnswer> models = client.Get("/v1/models");
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(Parse(*models)["data"].size(), 3u);
  EXPECT_EQ(Parse(*models)["data"][1]["id"], "rerank");
  absl::StatusOr<HttpAnswer> model = client.Get("/v1/models/embed");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(Parse(*model)["id"], "embed");
  absl::StatusOr<HttpAnswer> health = client.Get("/health");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
}

TEST_F(HttpTest, KeepAliveServesManyRequestsOnOneConnection) {
  HttpClient client = Client();
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<HttpAnswer> answer =
        client.Post("/predict", json{{"inputs", absl::StrCat("text ", i)}}.dump());
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 200);
    EXPECT_EQ(answer->headers.count("connection"), 0u);
  }
  // A client error keeps the connection too.
  absl::StatusOr<HttpAnswer> error = client.Post("/predict", "{}");
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->status, 422);
  absl::StatusOr<HttpAnswer> after = client.Post("/predict", R"({"inputs":"again"})");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->status, 200);
}

TEST_F(HttpTest, MetricsCountHttpRequests) {
  const double before = ScrapeRegistry(server_->runtime(), "dflash_requests_total",
                                       {{"protocol", "http"}, {"rpc", "Classify"}, {"code", "OK"}});
  ASSERT_EQ(Post("/predict", {{"inputs", "counted"}}).status, 200);
  EXPECT_EQ(ScrapeRegistry(server_->runtime(), "dflash_requests_total",
                           {{"protocol", "http"}, {"rpc", "Classify"}, {"code", "OK"}}),
            before + 1);
}

// /token_classify: the NER golden model (tests/golden/models/ner, served first so that / and
// /invocations stand for it) and the demo classifier, which has no token-classification head.
class HttpTokenClassifyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::filesystem::path source(DFLASH_SOURCE_DIR);
    models_ = new test::ScopedTempDir();
    const std::filesystem::path ner = models_->path() / "ner";
    std::filesystem::create_directories(ner);
    for (const char* name : {"config.json", "model.safetensors", "tokenizer_config.json"}) {
      std::filesystem::copy_file(source / "tests/golden/models/ner" / name, ner / name);
    }
    std::filesystem::copy_file(source / "tests/golden/tokenizer/spm.model", ner / "spm.model");
    std::ifstream goldens(source / "tests/golden/models/ner/pipeline_goldens.json");
    const json cases = json::parse(goldens)["cases"];
    texts_ = new std::vector<std::string>();
    for (const json& item : cases) {
      texts_->push_back(item["text"].get<std::string>());
    }
    absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(
        HttpConfig({TestModelEntry("ner", ner), TestModelEntry("demo", DemoModelDir())}));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete models_;
    delete texts_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static HttpAnswer Post(absl::string_view path, const json& body) {
    absl::StatusOr<HttpClient> client = HttpClient::Connect(server_->runtime().http_port());
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return HttpAnswer();
    absl::StatusOr<HttpAnswer> answer = client->Post(path, body.dump());
    EXPECT_TRUE(answer.ok()) << answer.status();
    return answer.ok() ? *answer : HttpAnswer();
  }

  static v1::TokenClassifyResponse Grpc(v1::TokenClassifyRequest request) {
    request.set_model("ner");
    v1::TokenClassifyResponse response;
    const grpc::Status status =
        server_->stub().TokenClassify(NewContext().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // The HTTP entities of one text equal the dflash.v1 ones, in the pipeline's field names.
  static void ExpectSameEntities(const json& entities, const v1::TokenClassification& expected) {
    ASSERT_TRUE(entities.is_array()) << entities.dump();
    ASSERT_EQ(entities.size(), static_cast<size_t>(expected.entities_size())) << entities.dump();
    for (int e = 0; e < expected.entities_size(); ++e) {
      const v1::TokenEntity& want = expected.entities(e);
      const json& got = entities[static_cast<size_t>(e)];
      SCOPED_TRACE(got.dump());
      if (want.has_label_id()) {
        EXPECT_EQ(got["entity"], want.label());
        EXPECT_EQ(got["index"].get<uint32_t>(), want.token_index());
        EXPECT_FALSE(got.contains("entity_group"));
      } else {
        EXPECT_EQ(got["entity_group"], want.label());
        EXPECT_FALSE(got.contains("entity"));
        EXPECT_FALSE(got.contains("index"));
      }
      EXPECT_EQ(got["word"], want.word());
      EXPECT_EQ(got["start"].get<uint32_t>(), want.char_start());
      EXPECT_EQ(got["end"].get<uint32_t>(), want.char_end());
      EXPECT_TRUE(Near(got["score"].get<double>(), want.score()));
    }
  }

  static inline test::ScopedTempDir* models_ = nullptr;
  static inline TestServer* server_ = nullptr;
  static inline std::vector<std::string>* texts_ = nullptr;
};

TEST_F(HttpTokenClassifyTest, MatchesTokenClassifyPerStrategy) {
  const std::pair<const char*, v1::AggregationStrategy> strategies[] = {
      {"none", v1::AGGREGATION_STRATEGY_NONE},
      {"simple", v1::AGGREGATION_STRATEGY_SIMPLE},
      {"first", v1::AGGREGATION_STRATEGY_FIRST},
      {"average", v1::AGGREGATION_STRATEGY_AVERAGE},
      {"max", v1::AGGREGATION_STRATEGY_MAX}};
  size_t entities = 0;
  for (const auto& [name, strategy] : strategies) {
    SCOPED_TRACE(name);
    v1::TokenClassifyRequest request;
    request.set_aggregation(strategy);
    for (const std::string& text : *texts_) request.add_inputs(text);
    const v1::TokenClassifyResponse expected = Grpc(request);
    ASSERT_EQ(expected.results_size(), static_cast<int>(texts_->size()));
    HttpAnswer answer =
        Post("/token_classify", {{"inputs", *texts_}, {"aggregation_strategy", name}});
    ASSERT_EQ(answer.status, 200) << answer.body;
    const json lists = Parse(answer);
    ASSERT_EQ(lists.size(), texts_->size());
    for (size_t t = 0; t < texts_->size(); ++t) {
      SCOPED_TRACE((*texts_)[t]);
      ExpectSameEntities(lists[t], expected.results(static_cast<int>(t)));
      entities += lists[t].size();
    }
  }
  EXPECT_GT(entities, 0u);  // The fixture's texts have entities under every strategy.
}

TEST_F(HttpTokenClassifyTest, DefaultsIgnoreLabelsAndTheTaskRoutes) {
  const std::string& text = (*texts_)[0];
  // No aggregation_strategy: the dflash.v1 default; one text answers its list alone.
  v1::TokenClassifyRequest request;
  request.add_inputs(text);
  const v1::TokenClassifyResponse plain = Grpc(request);
  HttpAnswer answer = Post("/models/ner/token_classify", {{"inputs", text}});
  ASSERT_EQ(answer.status, 200) << answer.body;
  ExpectSameEntities(Parse(answer), plain.results(0));

  // ignore_labels [] keeps every label (keep_all_labels); a list is dflash.v1's ignore_labels.
  request.set_aggregation(v1::AGGREGATION_STRATEGY_SIMPLE);
  request.set_keep_all_labels(true);
  const v1::TokenClassifyResponse all = Grpc(request);
  answer = Post(
      "/token_classify",
      {{"inputs", text}, {"aggregation_strategy", "simple"}, {"ignore_labels", json::array()}});
  ASSERT_EQ(answer.status, 200) << answer.body;
  ExpectSameEntities(Parse(answer), all.results(0));
  EXPECT_GT(all.results(0).entities_size(), plain.results(0).entities_size());
  request.set_keep_all_labels(false);
  request.add_ignore_labels("O");
  request.add_ignore_labels("PER");
  const v1::TokenClassifyResponse some = Grpc(request);
  answer = Post(
      "/token_classify",
      {{"inputs", {text}}, {"aggregation_strategy", "simple"}, {"ignore_labels", {"O", "PER"}}});
  ASSERT_EQ(answer.status, 200) << answer.body;
  ExpectSameEntities(Parse(answer)[0], some.results(0));

  // / and /invocations on a token classifier: this route, in the Inference API form too.
  request.clear_ignore_labels();
  request.set_aggregation(v1::AGGREGATION_STRATEGY_FIRST);
  const v1::TokenClassifyResponse first = Grpc(request);
  for (const char* path : {"/", "/invocations", "/models/ner"}) {
    SCOPED_TRACE(path);
    answer = Post(path, {{"inputs", text}, {"parameters", {{"aggregation_strategy", "first"}}}});
    ASSERT_EQ(answer.status, 200) << answer.body;
    ExpectSameEntities(Parse(answer), first.results(0));
  }
}

TEST_F(HttpTokenClassifyTest, Errors) {
  const std::string& text = (*texts_)[0];
  // A model without a token-classification head: 400, as every task mismatch.
  HttpAnswer answer = Post("/models/demo/token_classify", {{"inputs", text}});
  EXPECT_EQ(answer.status, 400) << answer.body;
  EXPECT_THAT(Parse(answer)["error"].get<std::string>(),
              HasSubstr("has no token-classification head"));
  answer = Post("/token_classify", {{"inputs", text}, {"model", "demo"}});
  EXPECT_EQ(answer.status, 400) << answer.body;
  // Field errors: 422 Validation naming the field.
  struct Case {
    json body;
    int status;
    std::string type;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"inputs", text}, {"aggregation_strategy", "mean"}},
       422,
       "Validation",
       "aggregation_strategy"},
      {{{"inputs", text}, {"ignore_labels", "O"}}, 422, "Validation", "ignore_labels"},
      {{{"inputs", text}, {"parameters", {{"stride", 8}}}}, 422, "Validation", "stride"},
      {{{"inputs", json::array()}}, 400, "Empty", "inputs"},
      {json::object(), 422, "Validation", "inputs: is required"},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.body.dump());
    answer = Post("/token_classify", test.body);
    EXPECT_EQ(answer.status, test.status) << answer.body;
    EXPECT_EQ(Parse(answer)["error_type"], test.type);
    EXPECT_THAT(Parse(answer)["error"].get<std::string>(), HasSubstr(test.message));
  }
  // A text over the model's maximum with truncate false: 422, as on the other routes.
  std::string long_text;
  for (int i = 0; i < 600; ++i) absl::StrAppend(&long_text, "word ");
  answer = Post("/token_classify", {{"inputs", long_text}, {"truncate", false}});
  EXPECT_EQ(answer.status, 422) << answer.body;
  answer = Post("/token_classify", {{"inputs", long_text}, {"truncate", true}});
  EXPECT_EQ(answer.status, 200) << answer.body;
}

// ---------------------------------------------------------------------------------------------
// Errors: status and body per family.
// ---------------------------------------------------------------------------------------------

TEST_F(HttpTest, TeiErrors) {
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string type;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"/predict", "{\"inputs\":", 400, "Validation", "invalid JSON"},
      {"/predict", "[1,2]", 400, "Validation", "must be a JSON object"},
      {"/predict", "", 400, "Validation", "no body"},
      {"/predict", R"({"inputs":"a","inputs":"b"})", 400, "Validation", "duplicate key"},
      {"/predict", "{}", 422, "Validation", "inputs: is required"},
      {"/predict", R"({"inputs":5})", 422, "Validation", "inputs"},
      {"/predict", R"({"inputs":[]})", 400, "Empty", "must not be empty"},
      {"/predict", R"({"inputs":[["a","b","c"]]})", 422, "Validation", "inputs[0]"},
      {"/predict", R"({"inputs":"a","truncate":"yes"})", 422, "Validation", "truncate"},
      {"/predict", R"({"inputs":"a","truncation_direction":"Up"})", 422, "Validation",
       "truncation_direction"},
      {"/embed", R"({"inputs":["a",3],"model":"embed"})", 422, "Validation", "inputs[1]"},
      {"/rerank", R"({"query":"q","model":"rerank"})", 422, "Validation", "texts: is required"},
      {"/rerank", R"({"query":"q","texts":[],"model":"rerank"})", 400, "Empty", "texts"},
      {"/models/nope/predict", R"({"inputs":"a"})", 404, "Validation", "not served"},
      {"/predict", R"({"inputs":"a","model":"nope"})", 404, "Validation", "nope"},
      {"/nowhere", "{}", 404, "Validation", "no route"},
      {"/predict", R"({"inputs":"a","truncate":false,"model":"demo"})", 200, "", ""},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.path + " " + test.body);
    HttpAnswer answer = PostRaw(test.path, test.body);
    EXPECT_EQ(answer.status, test.status) << answer.body;
    if (test.status == 200) continue;
    json body = Parse(answer);
    EXPECT_EQ(body["error_type"], test.type);
    EXPECT_THAT(body["error"].get<std::string>(), HasSubstr(test.message));
  }
  // A text over the model's maximum with truncate false: 422 naming the limit.
  std::string long_text;
  for (int i = 0; i < 200; ++i) absl::StrAppend(&long_text, "word ");
  HttpAnswer too_long = Post("/predict", {{"inputs", long_text}, {"truncate", false}});
  EXPECT_EQ(too_long.status, 422) << too_long.body;
  HttpClient client = Client();
  absl::StatusOr<HttpAnswer> wrong_method = client.Get("/predict");
  ASSERT_TRUE(wrong_method.ok());
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->headers["allow"], "POST");
}

TEST_F(HttpTest, OpenAiAndCohereErrorShapes) {
  HttpAnswer openai = PostRaw("/v1/embeddings", R"({"model":"missing","input":"x"})");
  EXPECT_EQ(openai.status, 404);
  json error = Parse(openai)["error"];
  EXPECT_EQ(error["type"], "invalid_request_error");
  EXPECT_EQ(error["code"], "model_not_found");
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("missing"));
  HttpAnswer bad_format =
      PostRaw("/v1/embeddings", R"({"model":"embed","input":"x","encoding_format":"int8"})");
  EXPECT_EQ(bad_format.status, 400);
  EXPECT_THAT(Parse(bad_format)["error"]["message"].get<std::string>(),
              HasSubstr("encoding_format"));
  HttpAnswer tokens = PostRaw("/v1/embeddings", R"({"model":"embed","input":[[1,2.5,3]]})");
  EXPECT_EQ(tokens.status, 400) << tokens.body;
  EXPECT_THAT(Parse(tokens)["error"]["message"].get<std::string>(),
              HasSubstr("input[0][1]: must be a token id"));

  HttpAnswer cohere = PostRaw("/v1/rerank", R"({"model":"rerank","query":"q","documents":[7]})");
  EXPECT_EQ(cohere.status, 400);
  EXPECT_THAT(Parse(cohere)["message"].get<std::string>(), HasSubstr("documents[0]"));
  HttpAnswer malformed = PostRaw("/v1/rerank", "not json");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_TRUE(Parse(malformed).contains("message"));
}

// ---------------------------------------------------------------------------------------------
// Hostile clients.
// ---------------------------------------------------------------------------------------------

TEST_F(HttpTest, ConflictingFramingHeadersAreRefused) {
  const std::vector<std::string> requests = {
      "POST /predict HTTP/1.1\r\nHost: t\r\nContent-Length: 16\r\nTransfer-Encoding: "
      "chunked\r\n\r\n0\r\n\r\nGET /info HTTP/1.1\r\n\r\n",
      "POST /predict HTTP/1.1\r\nHost: t\r\nContent-Length: 15\r\nContent-Length: 3\r\n\r\n"
      "{\"inputs\":\"a\"}",
      "POST /predict HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
  };
  for (const std::string& raw : requests) {
    SCOPED_TRACE(raw);
    HttpClient client = Client();
    ASSERT_TRUE(client.SendRaw(raw).ok());
    absl::StatusOr<HttpAnswer> answer = client.Read();
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 400);
    EXPECT_THAT(answer->body, HasSubstr("malformed request"));
    // The connection is closed: the smuggled request behind it is never served.
    EXPECT_TRUE(client.WaitForClose());
  }
  // A chunked body alone is fine.
  HttpClient client = Client();
  ASSERT_TRUE(client
                  .SendRaw("POST /predict HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "5\r\n{\"inp\r\na\r\nuts\":\"ok\"}\r\n0\r\n\r\n")
                  .ok());
  absl::StatusOr<HttpAnswer> answer = client.Read();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 200) << answer->body;
}

TEST_F(HttpTest, OversizeBodiesGet413) {
  const std::string big(70 << 10, 'x');  // Over the 64 KiB max_message_bytes.
  HttpClient declared = Client();
  ASSERT_TRUE(declared
                  .SendRaw(absl::StrCat("POST /predict HTTP/1.1\r\nHost: t\r\nContent-Length: ",
                                        big.size(), "\r\n\r\n"))
                  .ok());
  absl::StatusOr<HttpAnswer> answer = declared.Read();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 413);
  EXPECT_EQ(Parse(*answer)["error_type"], "Validation");

  HttpClient chunked = Client();
  ASSERT_TRUE(chunked
                  .SendRaw(absl::StrCat("POST /v1/embeddings HTTP/1.1\r\nHost: t\r\n"
                                        "Transfer-Encoding: chunked\r\n\r\n",
                                        absl::Hex(big.size()), "\r\n", big, "\r\n0\r\n\r\n"))
                  .ok());
  answer = chunked.Read();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 413);
  EXPECT_TRUE(Parse(*answer).contains("error"));  // OpenAI's shape for an OpenAI path.
}

TEST(HttpTimeoutTest, StalledClientsAreDisconnected) {
  ServerConfig config = HttpConfig({TestModelEntry("demo", DemoModelDir())});
  config.http_idle_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->runtime().http_port();
  // Stalled in the headers, and stalled in the body.
  for (const std::string& partial :
       {std::string("POST /predict HTTP/1.1\r\nHost: t\r\nContent-Le"),
        std::string("POST /predict HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{\"in")}) {
    absl::StatusOr<HttpClient> client = HttpClient::Connect(port);
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE(client->SendRaw(partial).ok());
    EXPECT_TRUE(client->WaitForClose());
  }
  // The server still serves.
  absl::StatusOr<HttpClient> client = HttpClient::Connect(port);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<HttpAnswer> answer = client->Post("/predict", R"({"inputs":"fine"})");
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 200);
}

TEST(HttpAuthTest, ApiKeysApplyAsOnGrpc) {
  ServerConfig config = HttpConfig({TestModelEntry("demo", DemoModelDir())});
  config.auth.api_keys = {kKey};
  absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<HttpClient> client = HttpClient::Connect((*server)->runtime().http_port());
  ASSERT_TRUE(client.ok());
  const std::string body = R"({"inputs":"x"})";
  absl::StatusOr<HttpAnswer> missing = client->Post("/predict", body);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 401);
  EXPECT_THAT(missing->body, HasSubstr("missing API key"));
  absl::StatusOr<HttpAnswer> wrong =
      client->Post("/v1/embeddings", R"({"input":"x"})", "Authorization: Bearer wrong-key\r\n");
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(Parse(*wrong)["error"]["code"], "invalid_api_key");
  absl::StatusOr<HttpAnswer> good =
      client->Post("/predict", body, absl::StrCat("Authorization: Bearer ", kKey, "\r\n"));
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->status, 200) << good->body;
  absl::StatusOr<HttpAnswer> info = client->Get("/info");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->status, 401);
  absl::StatusOr<HttpAnswer> health = client->Get("/health");  // Probes carry no key.
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
}

TEST(HttpAdmissionTest, RequestTimeoutIsTheDeadline) {
  auto control = std::make_shared<EngineControl>();
  absl::StatusOr<std::unique_ptr<TestServer>> started =
      TestServer::Start(HttpConfig({TestModelEntry("demo", DemoModelDir())}),
                        GatedLoader({{"demo", control}}, InnerEngine::kNull));
  ASSERT_TRUE(started.ok()) << started.status();
  absl::StatusOr<HttpClient> client = HttpClient::Connect((*started)->runtime().http_port());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<HttpAnswer> bad =
      client->Post("/predict", R"({"inputs":"x"})", "X-Request-Timeout: soon\r\n");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 422);
  EXPECT_THAT(bad->body, HasSubstr("X-Request-Timeout"));

  control->Close();
  const int batches = control->batches();
  const absl::Time sent = absl::Now();
  ASSERT_TRUE(client
                  ->SendRaw("POST /predict HTTP/1.1\r\nHost: t\r\nX-Request-Timeout: 0.05\r\n"
                            "Content-Length: 14\r\n\r\n{\"inputs\":\"x\"}")
                  .ok());
  ASSERT_TRUE(control->WaitForBatches(batches + 1));
  // Held in the engine past its deadline: answered 504 once the batch completes.
  ASSERT_TRUE(PollUntil([&] { return absl::Now() > sent + absl::Milliseconds(100); },
                        absl::Milliseconds(10)));
  control->Open();
  absl::StatusOr<HttpAnswer> late = client->Read();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->status, 504) << late->body;
  EXPECT_EQ(Parse(*late)["error_type"], "Backend");
}

TEST(HttpAdmissionTest, OverloadGets429AndDrainingGets503) {
  auto control = std::make_shared<EngineControl>();
  ServerConfig config = HttpConfig({TestModelEntry("demo", DemoModelDir())});
  config.max_inflight_requests = 1;
  absl::StatusOr<std::unique_ptr<TestServer>> started =
      TestServer::Start(config, GatedLoader({{"demo", control}}, InnerEngine::kNull));
  ASSERT_TRUE(started.ok()) << started.status();
  TestServer& server = **started;
  const int port = server.runtime().http_port();

  control->Close();
  const int batches = control->batches();
  absl::StatusOr<HttpClient> held = HttpClient::Connect(port);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(held->SendRaw("POST /predict HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n"
                            "{\"inputs\":\"held\"}")
                  .ok());
  ASSERT_TRUE(control->WaitForBatches(batches + 1));

  absl::StatusOr<HttpClient> second = HttpClient::Connect(port);
  ASSERT_TRUE(second.ok());
  absl::StatusOr<HttpAnswer> overloaded = second->Post("/predict", R"({"inputs":"more"})");
  ASSERT_TRUE(overloaded.ok()) << overloaded.status();
  EXPECT_EQ(overloaded->status, 429);
  EXPECT_EQ(Parse(*overloaded)["error_type"], "Overloaded");
  EXPECT_EQ(overloaded->headers["retry-after"], "1");

  // Draining: requests on open connections get 503 (closing the connection), new connections
  // are refused, and the held request is answered.
  absl::StatusOr<HttpClient> idle = HttpClient::Connect(port);
  ASSERT_TRUE(idle.ok());
  ASSERT_EQ(idle->Get("/health")->status, 200);  // Accepted and kept alive.
  int64_t unanswered = -1;
  std::thread drain([&] { unanswered = server.runtime().Drain(absl::Seconds(30)).unanswered; });
  bool unhealthy = false;
  EXPECT_TRUE(PollUntil(
      [&] {
        absl::StatusOr<HttpAnswer> health = second->Get("/health");
        unhealthy = health.ok() && health->status == 503;
        return unhealthy || !health.ok();
      },
      absl::Milliseconds(10)));
  EXPECT_TRUE(unhealthy);
  // The listener stops accepting just after admission starts refusing.
  EXPECT_TRUE(PollUntil([&] { return !HttpClient::Connect(port).ok(); }, absl::Milliseconds(10)))
      << "the listener still accepts connections while draining";
  absl::StatusOr<HttpAnswer> refused = idle->Post("/predict", R"({"inputs":"late"})");
  EXPECT_TRUE(refused.ok()) << refused.status();
  if (refused.ok()) {
    EXPECT_EQ(refused->status, 503);
    EXPECT_EQ(Parse(*refused)["error_type"], "Unhealthy");
    EXPECT_EQ(refused->headers["connection"], "close");
  }
  control->Open();
  absl::StatusOr<HttpAnswer> answered = held->Read();
  drain.join();
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_EQ(answered->status, 200) << answered->body;
  EXPECT_EQ(unanswered, 0);
}

}  // namespace
}  // namespace dflash::e2e
