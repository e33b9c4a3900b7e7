// TokenClassify end to end, against transformers: the server on the token-classification golden
// model (tests/golden/models/ner, made by tests/golden/make_token_goldens.py) answers every text
// under every aggregation strategy as transformers' TokenClassificationPipeline did, unary and
// streamed: labels, words, groups and offsets exactly, scores within kScoreTolerance.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e_harness.h"

namespace dflash::e2e {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = fs::path(DFLASH_SOURCE_DIR);

// Scores are label probabilities. The engine's float32 logits match transformers' to about 1e-5
// of their size (the model golden tests' bound) and a softmax moves by at most the largest logit
// change, so with logits of a few units a score may differ by a few 1e-5 (measured: under 1e-6
// with OpenBLAS on x86-64); 1e-4 leaves room for
// BLAS summation order without letting a wrong label's probability pass (the fixture's labels
// lead the next by at least 2e-3).
constexpr double kScoreTolerance = 1e-4;

const std::map<std::string, v1::AggregationStrategy> kStrategies = {
    {"none", v1::AGGREGATION_STRATEGY_NONE},
    {"simple", v1::AGGREGATION_STRATEGY_SIMPLE},
    {"first", v1::AGGREGATION_STRATEGY_FIRST},
    {"average", v1::AGGREGATION_STRATEGY_AVERAGE},
    {"max", v1::AGGREGATION_STRATEGY_MAX}};

nlohmann::json LoadGoldens() {
  std::ifstream in(kSource / "tests/golden/models/ner/pipeline_goldens.json");
  return nlohmann::json::parse(in);
}

// The fixture's files plus the tokenizer's spm.model, in one served directory.
void CopyNerModel(const fs::path& to) {
  fs::create_directories(to);
  for (const char* name : {"config.json", "model.safetensors", "tokenizer_config.json"}) {
    fs::copy_file(kSource / "tests/golden/models/ner" / name, to / name);
  }
  fs::copy_file(kSource / "tests/golden/tokenizer/spm.model", to / "spm.model");
}

class TokenClassifyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new test::ScopedTempDir();
    CopyNerModel(models_->path() / "ner");
    absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(TestServerConfig(
        {TestModelEntry("ner", models_->path() / "ner"), TestModelEntry("demo", DemoModelDir())}));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    goldens_ = new nlohmann::json(LoadGoldens());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete models_;
    delete goldens_;
  }

  static v1::TokenClassifyRequest AllTexts(v1::AggregationStrategy strategy) {
    v1::TokenClassifyRequest request;
    request.set_model("ner");
    request.set_aggregation(strategy);
    for (const auto& item : (*goldens_)["cases"]) {
      request.add_inputs(item["text"].get<std::string>());
    }
    return request;
  }

  // Compares `result` with the pipeline's answer for case `c` under `strategy`; returns the
  // largest score difference.
  static double ExpectGolden(const v1::TokenClassification& result, size_t c,
                             const std::string& strategy) {
    const nlohmann::json& item = (*goldens_)["cases"][c];
    const nlohmann::json& expected = item["answers"][strategy];
    SCOPED_TRACE(absl::StrCat(strategy, ": ", item["text"].get<std::string>()));
    EXPECT_EQ(result.tokens(), item["input_ids"].size());
    EXPECT_EQ(static_cast<size_t>(result.entities_size()), expected.size());
    double worst = 0;
    const auto& labels = (*goldens_)["labels"];
    for (size_t e = 0; e < std::min<size_t>(expected.size(), result.entities_size()); ++e) {
      const v1::TokenEntity& entity = result.entities(static_cast<int>(e));
      const nlohmann::json& want = expected[e];
      SCOPED_TRACE(absl::StrCat("entity ", e, ": ", want.dump()));
      EXPECT_EQ(entity.label(), want["label"].get<std::string>());
      EXPECT_EQ(entity.word(), want["word"].get<std::string>());
      EXPECT_EQ(entity.char_start(), want["start"].get<uint32_t>());
      EXPECT_EQ(entity.char_end(), want["end"].get<uint32_t>());
      EXPECT_EQ(entity.start(), want["start_byte"].get<uint32_t>());
      EXPECT_EQ(entity.end(), want["end_byte"].get<uint32_t>());
      const double difference = std::fabs(entity.score() - want["score"].get<double>());
      EXPECT_LE(difference, kScoreTolerance);
      worst = std::max(worst, difference);
      if (strategy == "none") {
        EXPECT_EQ(entity.token_index(), want["index"].get<uint32_t>());
        const auto label = std::find(labels.begin(), labels.end(), want["label"]);
        EXPECT_EQ(entity.label_id(), label - labels.begin());
      } else {
        EXPECT_FALSE(entity.has_label_id());
        EXPECT_FALSE(entity.has_token_index());
      }
    }
    return worst;
  }

  static test::ScopedTempDir* models_;
  static TestServer* server_;
  static nlohmann::json* goldens_;
};

test::ScopedTempDir* TokenClassifyTest::models_ = nullptr;
TestServer* TokenClassifyTest::server_ = nullptr;
nlohmann::json* TokenClassifyTest::goldens_ = nullptr;

TEST_F(TokenClassifyTest, TokenizesTheTextsAsTransformersDid) {
  v1::TokenizeRequest request;
  request.set_model("ner");
  for (const auto& item : (*goldens_)["cases"]) request.add_inputs()->set_text(item["text"]);
  v1::TokenizeResponse response;
  ASSERT_TRUE(server_->stub().Tokenize(NewContext().get(), request, &response).ok());
  for (size_t c = 0; c < (*goldens_)["cases"].size(); ++c) {
    std::vector<int32_t> ids;
    for (const v1::Token& token : response.encodings(static_cast<int>(c)).tokens()) {
      ids.push_back(token.id());
    }
    EXPECT_EQ(ids, (*goldens_)["cases"][c]["input_ids"].get<std::vector<int32_t>>()) << c;
  }
}

TEST_F(TokenClassifyTest, EveryStrategyMatchesThePipeline) {
  size_t entities = 0;
  for (const auto& [name, strategy] : kStrategies) {
    v1::TokenClassifyResponse response;
    const grpc::Status status =
        server_->stub().TokenClassify(NewContext().get(), AllTexts(strategy), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(static_cast<size_t>(response.results_size()), (*goldens_)["cases"].size());
    double worst = 0;
    for (size_t c = 0; c < (*goldens_)["cases"].size(); ++c) {
      worst = std::max(worst, ExpectGolden(response.results(static_cast<int>(c)), c, name));
      entities += static_cast<size_t>(response.results(static_cast<int>(c)).entities_size());
    }
    EXPECT_EQ(response.metadata().model(), "ner");
    EXPECT_GT(response.metadata().tokens(), 0u);
    std::printf("%s: largest score difference %.3g\n", name.c_str(), worst);
  }
  EXPECT_GT(entities, 100u);  // The fixture is not trivially empty.
}

TEST_F(TokenClassifyTest, StreamAnswersEachRequestAsUnary) {
  auto context = NewContext();
  auto stream = server_->stub().TokenClassifyStream(context.get());
  std::vector<std::string> names;
  for (const auto& [name, strategy] : kStrategies) {
    v1::TokenClassifyRequest request = AllTexts(strategy);
    request.set_request_id(name);
    ASSERT_TRUE(stream->Write(request));
    names.push_back(name);
  }
  v1::TokenClassifyRequest bad = AllTexts(static_cast<v1::AggregationStrategy>(42));
  bad.set_request_id("bad");
  ASSERT_TRUE(stream->Write(bad));
  stream->WritesDone();
  for (const std::string& name : names) {
    v1::TokenClassifyStreamResponse message;
    ASSERT_TRUE(stream->Read(&message));
    ASSERT_TRUE(message.has_response()) << message.error().message();
    EXPECT_EQ(message.response().metadata().request_id(), name);
    for (size_t c = 0; c < (*goldens_)["cases"].size(); ++c) {
      ExpectGolden(message.response().results(static_cast<int>(c)), c, name);
    }
  }
  v1::TokenClassifyStreamResponse error;
  ASSERT_TRUE(stream->Read(&error));
  ASSERT_TRUE(error.has_error());
  EXPECT_EQ(error.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(error.error().request_id(), "bad");
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(TokenClassifyTest, IgnoreLabelsAndKeepAllLabels) {
  // keep_all_labels: one entity per content token (NONE), "O" included.
  v1::TokenClassifyRequest request = AllTexts(v1::AGGREGATION_STRATEGY_NONE);
  request.set_keep_all_labels(true);
  v1::TokenClassifyResponse all;
  ASSERT_TRUE(server_->stub().TokenClassify(NewContext().get(), request, &all).ok());
  for (size_t c = 0; c < (*goldens_)["cases"].size(); ++c) {
    EXPECT_EQ(static_cast<size_t>(all.results(static_cast<int>(c)).entities_size()),
              (*goldens_)["cases"][c]["input_ids"].size() - 2);
  }
  // Ignoring the entity groups' names drops exactly those groups.
  request = AllTexts(v1::AGGREGATION_STRATEGY_SIMPLE);
  request.add_ignore_labels("O");
  request.add_ignore_labels("LOC");
  v1::TokenClassifyResponse some;
  ASSERT_TRUE(server_->stub().TokenClassify(NewContext().get(), request, &some).ok());
  size_t expected = 0;
  size_t got = 0;
  for (size_t c = 0; c < (*goldens_)["cases"].size(); ++c) {
    for (const auto& group : (*goldens_)["cases"][c]["answers"]["simple"]) {
      if (group["label"] != "LOC") ++expected;
    }
    for (const v1::TokenEntity& entity : some.results(static_cast<int>(c)).entities()) {
      EXPECT_NE(entity.label(), "LOC");
      ++got;
    }
  }
  EXPECT_EQ(got, expected);
}

TEST_F(TokenClassifyTest, RefusesWhatItCannotDoAndCountsIt) {
  const auto call = [](const v1::TokenClassifyRequest& request) {
    v1::TokenClassifyResponse response;
    return server_->stub().TokenClassify(NewContext().get(), request, &response).error_code();
  };
  const double refused_before =
      ScrapeRegistry(server_->runtime(), "dflash_requests_total",
                     {{"rpc", "TokenClassify"}, {"code", "INVALID_ARGUMENT"}});
  v1::TokenClassifyRequest request = AllTexts(static_cast<v1::AggregationStrategy>(9));
  EXPECT_EQ(call(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = AllTexts(v1::AGGREGATION_STRATEGY_NONE);
  request.set_keep_all_labels(true);
  request.add_ignore_labels("O");
  EXPECT_EQ(call(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = AllTexts(v1::AGGREGATION_STRATEGY_NONE);
  request.clear_inputs();
  EXPECT_EQ(call(request), grpc::StatusCode::INVALID_ARGUMENT);
  // Longer than the model's maximum without truncation.
  request = AllTexts(v1::AGGREGATION_STRATEGY_NONE);
  std::string long_text;
  for (int i = 0; i < kMaxInputLength; ++i) long_text += "Paris ";
  request.add_inputs(long_text);
  request.set_truncate(false);
  EXPECT_EQ(call(request), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ScrapeRegistry(server_->runtime(), "dflash_requests_total",
                           {{"rpc", "TokenClassify"}, {"code", "INVALID_ARGUMENT"}}),
            refused_before + 4);
  // The NLI model has no token-classification head, and the token classifier no sequence one.
  request = AllTexts(v1::AGGREGATION_STRATEGY_NONE);
  request.set_model("demo");
  EXPECT_EQ(call(request), grpc::StatusCode::FAILED_PRECONDITION);
  v1::ClassifyRequest classify;
  classify.set_model("ner");
  classify.add_inputs()->set_text("Paris");
  v1::ClassifyResponse classified;
  EXPECT_EQ(server_->stub().Classify(NewContext().get(), classify, &classified).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // Truncated: served, and flagged.
  request = AllTexts(v1::AGGREGATION_STRATEGY_SIMPLE);
  request.add_inputs(long_text);
  request.set_truncate(true);
  v1::TokenClassifyResponse response;
  ASSERT_TRUE(server_->stub().TokenClassify(NewContext().get(), request, &response).ok());
  EXPECT_TRUE(response.results(response.results_size() - 1).truncated());
  EXPECT_EQ(response.results(response.results_size() - 1).tokens(),
            static_cast<uint32_t>(kMaxInputLength));
}

TEST_F(TokenClassifyTest, InfoDescribesTheTokenClassifier) {
  v1::InfoRequest request;
  request.set_model("ner");
  v1::InfoResponse info;
  ASSERT_TRUE(server_->stub().Info(NewContext().get(), request, &info).ok());
  ASSERT_EQ(info.models_size(), 1);
  ASSERT_EQ(info.models(0).tasks_size(), 1);
  EXPECT_EQ(info.models(0).tasks(0), v1::TASK_TOKEN_CLASSIFY);
  ASSERT_EQ(static_cast<size_t>(info.models(0).labels_size()), (*goldens_)["labels"].size());
  EXPECT_EQ(info.models(0).labels(1).name(), "B-PER");
}

}  // namespace
}  // namespace dflash::e2e
