// End-to-end results: every RPC's answer over gRPC equals the tokenizer and the CPU engine called
// directly on the same checkpoint (one sequence at a time), whatever the sequence was batched
// with; the streaming RPCs answer in request order with errors in place; many clients calling
// two models at once all get correct answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e_harness.h"

namespace dflash::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kLongText[] =
    "And it came to pass, when the king heard the words of the book of the law, that he rent his "
    "clothes, and he sent for the priests and the scribes, and for all the elders of the land, "
    "and they came unto him in the house by the river, and he read in their ears all the words.";

// Batch budget of the served models: several requests' worth (batches mix them), and small
// enough that the warm-up batch each server start runs stays cheap.
constexpr int kBatchTokens = 256;

// Texts the tests combine; every expected result is computed once per text by the reference.
const std::vector<std::string>& TextPool() {
  static const std::vector<std::string> pool = {
      "A soccer game with multiple males playing.",
      "Some men are playing a sport.",
      "The weather is lovely today and the sun is out over the hills.",
      "I need to fix the engine of my car before the trip.",
      "Naomi returned to Bethlehem at the beginning of the barley harvest.",
      "Café au lait, naïve façade — 東京 🎉",
      "short",
      kLongText,
  };
  return pool;
}

// The scores of one ranked answer are non-increasing, ties in ascending id order.
template <typename Scores>
void ExpectRanked(const Scores& scores) {
  for (int i = 1; i < scores.size(); ++i) {
    const auto& previous = scores.Get(i - 1);
    const auto& current = scores.Get(i);
    EXPECT_TRUE(previous.score() > current.score() ||
                (previous.score() == current.score() && previous.id() < current.id()))
        << "rank " << i;
  }
}

class ResultsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<TinyModels>> models = WriteTinyModels();
    ASSERT_TRUE(models.ok()) << models.status();
    models_ = std::move(*models).release();
    demo_control_ = new std::shared_ptr<EngineControl>(std::make_shared<EngineControl>());
    ServerConfig config =
        TestServerConfig({TestModelEntry("demo", DemoModelDir(), kBatchTokens),
                          TestModelEntry("rerank", models_->rerank, kBatchTokens),
                          TestModelEntry("embed", models_->embed, kBatchTokens),
                          TestModelEntry("embed-cls", models_->embed_cls, kBatchTokens)});
    absl::StatusOr<std::unique_ptr<TestServer>> server =
        TestServer::Start(config, GatedLoader({{"demo", *demo_control_}}));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }

  static void TearDownTestSuite() {
    if (demo_control_ != nullptr) (*demo_control_)->Open();
    delete server_;
    delete demo_;
    delete rerank_;
    delete embed_;
    delete embed_cls_;
    delete demo_control_;
    delete models_;
    // --gtest_repeat sets the suite up again: nothing may point at what was just deleted.
    server_ = nullptr;
    demo_ = nullptr;
    rerank_ = nullptr;
    embed_ = nullptr;
    embed_cls_ = nullptr;
    demo_control_ = nullptr;
    models_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(server_, nullptr) << "the server did not start"; }
  // Leaves the server as the next test expects it (also after a failure): engine free, queue
  // empty.
  void TearDown() override {
    control().Open();
    EXPECT_TRUE(server_->WaitForQueuedRequests("demo", 0));
    EXPECT_TRUE(control().WaitUntilIdle());
  }

  static EngineControl& control() { return **demo_control_; }

  // The references, loaded on first use (each test is a process of its own under CTest).
  static Reference& demo() { return Lazy(demo_, DemoModelDir()); }
  static Reference& rerank() { return Lazy(rerank_, models_->rerank); }
  static Reference& embed() { return Lazy(embed_, models_->embed); }
  static Reference& embed_cls() { return Lazy(embed_cls_, models_->embed_cls); }
  static Reference& Lazy(Reference*& slot, const std::filesystem::path& directory) {
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    if (slot == nullptr) {
      absl::StatusOr<std::unique_ptr<Reference>> loaded = Reference::Load(directory);
      if (!loaded.ok()) {
        std::fprintf(stderr, "cannot load the reference %s: %s\n", directory.c_str(),
                     loaded.status().ToString().c_str());
        std::abort();
      }
      slot = std::move(*loaded).release();
    }
    return *slot;
  }
  static v1::InferenceService::Stub& stub() { return server_->stub(); }

  // The demo model's class probabilities for a text (pair), computed once.
  static std::vector<double> ExpectedClassify(const std::string& text,
                                              std::optional<std::string> pair = std::nullopt) {
    static std::mutex mutex;
    static std::map<std::pair<std::string, std::optional<std::string>>, std::vector<double>> cache;
    std::lock_guard<std::mutex> lock(mutex);
    auto key = std::make_pair(text, pair);
    auto it = cache.find(key);
    if (it == cache.end()) {
      const Encoding encoding =
          demo().Encode(text, pair ? std::optional<absl::string_view>(*pair) : std::nullopt);
      it = cache.emplace(key, Softmax(demo().Logits(encoding))).first;
    }
    return it->second;
  }

  // The cross-encoder's relevance logit of (query, document), computed once.
  static double ExpectedRerankLogit(const std::string& query, const std::string& document) {
    static std::mutex mutex;
    static std::map<std::pair<std::string, std::string>, double> cache;
    std::lock_guard<std::mutex> lock(mutex);
    auto key = std::make_pair(query, document);
    auto it = cache.find(key);
    if (it == cache.end()) {
      const Encoding encoding = rerank().Encode(query, document, TruncationStrategy::kOnlySecond);
      it = cache.emplace(key, rerank().Logits(encoding).at(0)).first;
    }
    return it->second;
  }

  static void ExpectClassification(const v1::Classification& result, const std::string& text,
                                   std::optional<std::string> pair = std::nullopt) {
    const Encoding encoding =
        demo().Encode(text, pair ? std::optional<absl::string_view>(*pair) : std::nullopt);
    const std::vector<double> expected = ExpectedClassify(text, pair);
    EXPECT_EQ(result.tokens(), encoding.ids.size()) << text;
    EXPECT_EQ(result.truncated(), encoding.truncated) << text;
    ASSERT_EQ(result.scores_size(), 3) << text;
    ExpectRanked(result.scores());
    std::set<int> ids;
    for (const v1::LabelScore& score : result.scores()) {
      ids.insert(score.id());
      ASSERT_GE(score.id(), 0);
      ASSERT_LT(score.id(), 3);
      EXPECT_EQ(score.label(), demo().config().id2label[static_cast<size_t>(score.id())]);
      EXPECT_TRUE(Near(score.score(), expected[static_cast<size_t>(score.id())]))
          << text << " label " << score.id();
    }
    EXPECT_EQ(ids.size(), 3u);
  }

  static inline TinyModels* models_ = nullptr;
  static inline TestServer* server_ = nullptr;
  static inline std::shared_ptr<EngineControl>* demo_control_ = nullptr;
  static inline Reference* demo_ = nullptr;
  static inline Reference* rerank_ = nullptr;
  static inline Reference* embed_ = nullptr;
  static inline Reference* embed_cls_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// 1. Every RPC equals the direct tokenizer + engine computation.
// ---------------------------------------------------------------------------------------------

TEST_F(ResultsTest, ClassifyEqualsEngine) {
  struct Input {
    std::string text;
    std::optional<std::string> pair;
  };
  const std::vector<Input> inputs = {
      {TextPool()[0], std::nullopt},
      {TextPool()[0], TextPool()[1]},
      {TextPool()[2], ""},  // A pair whose second text is empty.
      {kLongText, std::nullopt},
      {kLongText, TextPool()[3]},
      {TextPool()[5], std::nullopt},
      {"A text with [SEP] inside", std::nullopt},
      {"", std::nullopt},  // An empty text: [CLS] [SEP].
  };
  v1::ClassifyRequest request;
  request.set_model("demo");
  request.set_request_id("classify-1");
  for (const Input& input : inputs) {
    v1::TextInput* added = request.add_inputs();
    added->set_text(input.text);
    if (input.pair) added->set_text_pair(*input.pair);
  }
  v1::ClassifyResponse response;
  ASSERT_TRUE(stub().Classify(NewContext().get(), request, &response).ok());
  EXPECT_EQ(response.metadata().request_id(), "classify-1");
  EXPECT_EQ(response.metadata().model(), "demo");
  ASSERT_EQ(response.results_size(), static_cast<int>(inputs.size()));
  uint64_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectClassification(response.results(static_cast<int>(i)), inputs[i].text, inputs[i].pair);
    tokens += response.results(static_cast<int>(i)).tokens();
  }
  EXPECT_TRUE(response.results(3).truncated());
  EXPECT_EQ(response.results(3).tokens(), static_cast<uint32_t>(kMaxInputLength));
  EXPECT_EQ(response.metadata().tokens(), tokens);

  // Other score functions and top_k, on one input.
  const Encoding encoding = demo().Encode(TextPool()[4]);
  const std::vector<float> logits = demo().Logits(encoding);
  for (v1::ScoreFunction function : {v1::SCORE_FUNCTION_RAW, v1::SCORE_FUNCTION_SIGMOID}) {
    v1::ClassifyRequest single;
    single.set_model("demo");
    single.add_inputs()->set_text(TextPool()[4]);
    single.set_score_function(function);
    single.set_top_k(2);
    v1::ClassifyResponse answer;
    ASSERT_TRUE(stub().Classify(NewContext().get(), single, &answer).ok());
    ASSERT_EQ(answer.results_size(), 1);
    const v1::Classification& result = answer.results(0);
    ASSERT_EQ(result.scores_size(), 2) << "top_k = 2";
    ExpectRanked(result.scores());
    for (const v1::LabelScore& score : result.scores()) {
      const double logit = logits[static_cast<size_t>(score.id())];
      const double expected = function == v1::SCORE_FUNCTION_RAW ? logit : Sigmoid(logit);
      EXPECT_TRUE(Near(score.score(), expected)) << v1::ScoreFunction_Name(function);
    }
    // The two kept are the two best.
    std::vector<float> sorted = logits;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    EXPECT_TRUE(Near(result.scores(1).score(),
                     function == v1::SCORE_FUNCTION_RAW ? sorted[1] : Sigmoid(sorted[1])));
  }
}

TEST_F(ResultsTest, ZeroShotEqualsEngineInBothModes) {
  const std::vector<std::string> texts = {TextPool()[2], TextPool()[3]};
  const std::vector<std::string> labels = {"weather", "cars", "cooking"};
  constexpr int kEntailment = 1;
  constexpr int kContradiction = 0;
  for (const std::string& hypothesis_template : {std::string(), std::string("Topic: {}")}) {
    for (bool multi_label : {false, true}) {
      SCOPED_TRACE(absl::StrCat("template '", hypothesis_template, "' multi_label ", multi_label));
      v1::ZeroShotRequest request;
      request.set_model("demo");
      request.set_request_id("zero-shot");
      for (const std::string& text : texts) request.add_texts(text);
      for (const std::string& label : labels) request.add_candidate_labels(label);
      request.set_hypothesis_template(hypothesis_template);
      request.set_multi_label(multi_label);
      v1::ZeroShotResponse response;
      ASSERT_TRUE(stub().ZeroShot(NewContext().get(), request, &response).ok());
      EXPECT_EQ(response.metadata().request_id(), "zero-shot");
      ASSERT_EQ(response.results_size(), 2);
      uint64_t all_tokens = 0;
      for (size_t t = 0; t < texts.size(); ++t) {
        std::vector<double> entailment(labels.size());
        std::vector<double> contradiction(labels.size());
        uint32_t tokens = 0;
        for (size_t l = 0; l < labels.size(); ++l) {
          const std::string hypothesis = hypothesis_template.empty()
                                             ? absl::StrCat("This example is ", labels[l], ".")
                                             : absl::StrCat("Topic: ", labels[l]);
          const Encoding encoding =
              demo().Encode(texts[t], hypothesis, TruncationStrategy::kOnlyFirst);
          tokens += static_cast<uint32_t>(encoding.ids.size());
          const std::vector<float> logits = demo().Logits(encoding);
          entailment[l] = logits[kEntailment];
          contradiction[l] = logits[kContradiction];
        }
        // The formulas of dflash.proto's ZeroShotRequest.multi_label.
        std::vector<double> expected(labels.size());
        if (multi_label) {
          for (size_t l = 0; l < labels.size(); ++l) {
            expected[l] = Softmax(
                {static_cast<float>(contradiction[l]), static_cast<float>(entailment[l])})[1];
          }
        } else {
          std::vector<float> as_float(entailment.begin(), entailment.end());
          expected = Softmax(as_float);
        }
        const v1::ZeroShotResult& result = response.results(static_cast<int>(t));
        EXPECT_EQ(result.tokens(), tokens);
        EXPECT_FALSE(result.truncated());
        ASSERT_EQ(result.scores_size(), 3);
        ExpectRanked(result.scores());
        double sum = 0;
        for (const v1::LabelScore& score : result.scores()) {
          EXPECT_EQ(score.label(), labels[static_cast<size_t>(score.id())]);
          EXPECT_TRUE(Near(score.score(), expected[static_cast<size_t>(score.id())]))
              << "text " << t << " label " << score.id();
          sum += score.score();
        }
        if (!multi_label) {
          EXPECT_NEAR(sum, 1.0, 1e-5);
        }
        all_tokens += tokens;
      }
      EXPECT_EQ(response.metadata().tokens(), all_tokens);
    }
  }
}

TEST_F(ResultsTest, RerankEqualsEngine) {
  const std::string query = "Who returned to Bethlehem?";
  const std::vector<std::string> documents = {TextPool()[4], TextPool()[0], TextPool()[3],
                                              kLongText,     TextPool()[6], TextPool()[5]};
  v1::RerankRequest request;
  request.set_model("rerank");
  request.set_request_id("rerank-all");
  request.set_query(query);
  for (const std::string& document : documents) request.add_documents(document);
  request.set_return_documents(true);
  v1::RerankResponse response;
  ASSERT_TRUE(stub().Rerank(NewContext().get(), request, &response).ok());
  EXPECT_EQ(response.metadata().request_id(), "rerank-all");
  EXPECT_EQ(response.metadata().model(), "rerank");
  ASSERT_EQ(response.results_size(), static_cast<int>(documents.size()));
  std::set<uint32_t> seen;
  uint64_t tokens = 0;
  for (int k = 0; k < response.results_size(); ++k) {
    const v1::RerankResult& result = response.results(k);
    ASSERT_LT(result.index(), documents.size());
    seen.insert(result.index());
    const std::string& document = documents[result.index()];
    const Encoding encoding = rerank().Encode(query, document, TruncationStrategy::kOnlySecond);
    EXPECT_TRUE(Near(result.score(), Sigmoid(ExpectedRerankLogit(query, document))))
        << "document " << result.index();
    ASSERT_TRUE(result.has_document());
    EXPECT_EQ(result.document(), document);
    EXPECT_EQ(result.tokens(), encoding.ids.size());
    EXPECT_EQ(result.truncated(), encoding.truncated);
    tokens += result.tokens();
    if (k > 0) {
      const v1::RerankResult& previous = response.results(k - 1);
      EXPECT_TRUE(previous.score() > result.score() ||
                  (previous.score() == result.score() && previous.index() < result.index()));
    }
  }
  EXPECT_EQ(seen.size(), documents.size());
  EXPECT_EQ(response.metadata().tokens(), tokens);
  EXPECT_TRUE(response
                  .results(static_cast<int>(
                      std::find_if(response.results().begin(), response.results().end(),
                                   [](const v1::RerankResult& r) { return r.index() == 3; }) -
                      response.results().begin()))
                  .truncated());

  // top_n without documents, raw scores: the best three by the reference's logits.
  std::vector<std::pair<double, uint32_t>> expected;
  for (uint32_t i = 0; i < documents.size(); ++i) {
    expected.emplace_back(ExpectedRerankLogit(query, documents[i]), i);
  }
  std::stable_sort(expected.begin(), expected.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  request.set_top_n(3);
  request.set_return_documents(false);
  request.set_score_function(v1::SCORE_FUNCTION_RAW);
  v1::RerankResponse top;
  ASSERT_TRUE(stub().Rerank(NewContext().get(), request, &top).ok());
  ASSERT_EQ(top.results_size(), 3);
  for (int k = 0; k < 3; ++k) {
    EXPECT_FALSE(top.results(k).has_document());
    EXPECT_TRUE(Near(top.results(k).score(), expected[static_cast<size_t>(k)].first));
    // Exact order unless two logits are closer than the batching noise.
    if (expected[static_cast<size_t>(k)].first - expected[static_cast<size_t>(k) + 1].first >
        1e-4) {
      EXPECT_EQ(top.results(k).index(), expected[static_cast<size_t>(k)].second) << "rank " << k;
    }
  }
}

TEST_F(ResultsTest, EmbedEqualsEngine) {
  const std::vector<std::string> inputs = {TextPool()[0], kLongText, TextPool()[5]};
  struct Variant {
    uint32_t dimensions;
    std::optional<bool> normalize;
    v1::EmbeddingEncoding encoding;
  };
  const std::vector<Variant> variants = {
      {0, std::nullopt, v1::EMBEDDING_ENCODING_UNSPECIFIED},
      {8, std::nullopt, v1::EMBEDDING_ENCODING_FLOAT32},
      {0, false, v1::EMBEDDING_ENCODING_FLOAT32},
      {20, true, v1::EMBEDDING_ENCODING_FLOAT16},
      {32, false, v1::EMBEDDING_ENCODING_FLOAT16},
  };
  for (const auto& [model, reference] :
       {std::pair{"embed", &embed()}, std::pair{"embed-cls", &embed_cls()}}) {
    for (const Variant& variant : variants) {
      SCOPED_TRACE(absl::StrCat(model, " dimensions ", variant.dimensions, " normalize ",
                                variant.normalize.value_or(true), " encoding ", variant.encoding));
      v1::EmbedRequest request;
      request.set_model(model);
      request.set_request_id("embed");
      for (const std::string& input : inputs) request.add_inputs(input);
      request.set_dimensions(variant.dimensions);
      if (variant.normalize) request.set_normalize(*variant.normalize);
      request.set_encoding(variant.encoding);
      v1::EmbedResponse response;
      ASSERT_TRUE(stub().Embed(NewContext().get(), request, &response).ok());
      EXPECT_EQ(response.metadata().model(), model);
      ASSERT_EQ(response.embeddings_size(), static_cast<int>(inputs.size()));
      const size_t dimensions = variant.dimensions == 0 ? 32 : variant.dimensions;
      uint64_t tokens = 0;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const v1::Embedding& embedding = response.embeddings(static_cast<int>(i));
        const Encoding encoding = reference->Encode(inputs[i]);
        const std::vector<double> expected = PostprocessEmbedding(
            reference->Embedding(encoding), dimensions, variant.normalize.value_or(true));
        EXPECT_EQ(embedding.dimensions(), dimensions);
        EXPECT_EQ(embedding.tokens(), encoding.ids.size());
        EXPECT_EQ(embedding.truncated(), encoding.truncated);
        tokens += embedding.tokens();
        const bool half = variant.encoding == v1::EMBEDDING_ENCODING_FLOAT16;
        std::vector<float> values;
        if (half) {
          EXPECT_EQ(embedding.float32_values_size(), 0);
          ASSERT_EQ(embedding.float16_bytes().size(), 2 * dimensions);
          values = DecodeFloat16(embedding.float16_bytes());
        } else {
          EXPECT_TRUE(embedding.float16_bytes().empty());
          values.assign(embedding.float32_values().begin(), embedding.float32_values().end());
        }
        ASSERT_EQ(values.size(), dimensions);
        // The server runs the three inputs as one batch, the reference each alone.
        const double absolute = EmbeddingAbsoluteTolerance(expected);
        for (size_t d = 0; d < dimensions; ++d) {
          // binary16 keeps 11 significant bits: a relative error of at most 2^-11.
          EXPECT_TRUE(half ? Near(values[d], expected[d], 1.0 / 2048, absolute)
                           : Near(values[d], expected[d], 1e-5, absolute))
              << "input " << i << " value " << d;
        }
      }
      EXPECT_EQ(response.metadata().tokens(), tokens);
    }
  }
}

// The ids, pieces, offsets, segments, special flags and type ids of `encoding` (the tokenizer
// called directly), without special tokens when `specials` is false.
void ExpectTokens(const v1::Encoding& actual, const Encoding& expected, const Tokenizer& tokenizer,
                  bool specials) {
  int k = 0;
  for (size_t t = 0; t < expected.ids.size(); ++t) {
    const bool special = expected.sources[t] == TokenSource::kTemplate;
    EXPECT_EQ(special, expected.special_tokens_mask[t] == 1);
    if (special && !specials) continue;
    ASSERT_LT(k, actual.tokens_size());
    const v1::Token& token = actual.tokens(k++);
    SCOPED_TRACE(absl::StrCat("token ", t));
    EXPECT_EQ(token.id(), expected.ids[t]);
    EXPECT_EQ(token.piece(), tokenizer.TokenText(expected.ids[t]));
    EXPECT_EQ(token.start(), expected.offsets[t].begin);
    EXPECT_EQ(token.end(), expected.offsets[t].end);
    EXPECT_EQ(token.segment(), special ? v1::SEGMENT_UNSPECIFIED
                               : expected.sources[t] == TokenSource::kFirst
                                   ? v1::SEGMENT_TEXT
                                   : v1::SEGMENT_TEXT_PAIR);
    EXPECT_EQ(token.special(), special);
    EXPECT_EQ(token.type_id(), expected.token_type_ids[t]);
  }
  EXPECT_EQ(k, actual.tokens_size());
  EXPECT_EQ(actual.truncated(), expected.truncated);
}

TEST_F(ResultsTest, TokenizeEqualsTokenizer) {
  struct Input {
    std::string text;
    std::optional<std::string> pair;
  };
  const std::vector<Input> inputs = {{TextPool()[0], std::nullopt},
                                     {TextPool()[0], TextPool()[1]},
                                     {kLongText, std::nullopt},
                                     {kLongText, TextPool()[4]},
                                     {"A [SEP] in the text, and [MASK] too", ""},
                                     {TextPool()[5], std::nullopt},
                                     {"", ""}};
  const Tokenizer& tokenizer = demo().tokenizer();
  struct Variant {
    std::optional<bool> add_special_tokens;
    std::optional<bool> truncate;
    v1::TruncationDirection direction;
    v1::TruncationStrategy strategy;
  };
  for (const Variant& variant :
       {Variant{std::nullopt, std::nullopt, v1::TRUNCATION_DIRECTION_UNSPECIFIED,
                v1::TRUNCATION_STRATEGY_UNSPECIFIED},
        Variant{false, std::nullopt, v1::TRUNCATION_DIRECTION_UNSPECIFIED,
                v1::TRUNCATION_STRATEGY_UNSPECIFIED},
        Variant{true, false, v1::TRUNCATION_DIRECTION_UNSPECIFIED,
                v1::TRUNCATION_STRATEGY_UNSPECIFIED},
        Variant{std::nullopt, true, v1::TRUNCATION_DIRECTION_LEFT,
                v1::TRUNCATION_STRATEGY_ONLY_FIRST}}) {
    SCOPED_TRACE(absl::StrCat("add_special_tokens ", variant.add_special_tokens.value_or(true),
                              " truncate ", variant.truncate.value_or(true), " direction ",
                              variant.direction, " strategy ", variant.strategy));
    v1::TokenizeRequest request;
    request.set_model("demo");
    request.set_request_id("tokenize");
    for (const Input& input : inputs) {
      v1::TextInput* added = request.add_inputs();
      added->set_text(input.text);
      if (input.pair) added->set_text_pair(*input.pair);
    }
    if (variant.add_special_tokens) request.set_add_special_tokens(*variant.add_special_tokens);
    if (variant.truncate) request.set_truncate(*variant.truncate);
    request.set_truncation_direction(variant.direction);
    request.set_truncation_strategy(variant.strategy);
    v1::TokenizeResponse response;
    ASSERT_TRUE(stub().Tokenize(NewContext().get(), request, &response).ok());
    EXPECT_EQ(response.metadata().request_id(), "tokenize");
    EXPECT_EQ(response.metadata().model(), "demo");
    EXPECT_EQ(response.metadata().queue_us(), 0u);
    EXPECT_EQ(response.metadata().inference_us(), 0u);
    ASSERT_EQ(response.encodings_size(), static_cast<int>(inputs.size()));
    uint64_t tokens = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("input ", i));
      TruncationOptions truncation;
      if (variant.truncate.value_or(true)) {
        truncation.max_length = kMaxInputLength;
        truncation.side = variant.direction == v1::TRUNCATION_DIRECTION_LEFT
                              ? TruncationSide::kLeft
                              : TruncationSide::kRight;
        truncation.strategy =
            inputs[i].pair && variant.strategy == v1::TRUNCATION_STRATEGY_ONLY_FIRST
                ? TruncationStrategy::kOnlyFirst
                : TruncationStrategy::kLongestFirst;
      }
      absl::StatusOr<Encoding> expected = tokenizer.Encode(
          inputs[i].text,
          inputs[i].pair ? std::optional<absl::string_view>(*inputs[i].pair) : std::nullopt,
          truncation);
      ASSERT_TRUE(expected.ok()) << expected.status();
      ExpectTokens(response.encodings(static_cast<int>(i)), *expected, tokenizer,
                   variant.add_special_tokens.value_or(true));
      tokens += static_cast<uint64_t>(response.encodings(static_cast<int>(i)).tokens_size());
    }
    EXPECT_EQ(response.metadata().tokens(), tokens);
    if (variant.truncate == false) {
      EXPECT_GT(response.encodings(2).tokens_size(), kMaxInputLength) << "reported in full";
    } else {
      EXPECT_TRUE(response.encodings(2).truncated());
    }
  }
}

TEST_F(ResultsTest, InfoDescribesServerAndModels) {
  v1::InfoResponse info;
  ASSERT_TRUE(stub().Info(NewContext().get(), v1::InfoRequest(), &info).ok());
  EXPECT_EQ(info.version(), kTestVersion);
  EXPECT_EQ(info.revision(), kTestRevision);
  ASSERT_EQ(info.models_size(), 4);
  const std::vector<std::string> ids = {"demo", "rerank", "embed", "embed-cls"};
  for (int m = 0; m < 4; ++m) {
    const v1::ModelInfo& model = info.models(m);
    SCOPED_TRACE(model.id());
    EXPECT_EQ(model.id(), ids[static_cast<size_t>(m)]) << "configuration order";
    EXPECT_EQ(model.max_input_length(), static_cast<uint32_t>(kMaxInputLength));
    EXPECT_TRUE(model.default_truncate());
    EXPECT_EQ(model.dtype(), v1::DATA_TYPE_FLOAT32);
    EXPECT_EQ(model.backend(), v1::BACKEND_CPU);
    EXPECT_FALSE(model.device().empty());
    EXPECT_EQ(model.tuning_profile(), "");
    EXPECT_EQ(model.batching().max_batch_tokens(), static_cast<uint32_t>(kBatchTokens));
    EXPECT_EQ(model.batching().max_batch_sequences(), 64u);
    EXPECT_EQ(model.batching().max_queue_delay_us(), 0u);
    EXPECT_EQ(model.batching().max_queued_requests(), 1024u);
    const serving::RequestLimitsConfig defaults;
    EXPECT_EQ(model.limits().max_inputs(), static_cast<uint32_t>(defaults.max_inputs));
    EXPECT_EQ(model.limits().max_candidate_labels(),
              static_cast<uint32_t>(defaults.max_candidate_labels));
    EXPECT_EQ(model.limits().max_sequences(), static_cast<uint32_t>(defaults.max_sequences));
    EXPECT_EQ(model.limits().max_text_bytes(), static_cast<uint32_t>(defaults.max_text_bytes));
    EXPECT_EQ(model.limits().max_request_tokens(),
              static_cast<uint64_t>(defaults.max_request_tokens));
  }
  auto tasks = [](const v1::ModelInfo& model) {
    return std::set<int>(model.tasks().begin(), model.tasks().end());
  };
  const v1::ModelInfo& demo = info.models(0);
  EXPECT_EQ(demo.source(), DemoModelDir().string());
  EXPECT_EQ(demo.architecture(), "DebertaV2ForSequenceClassification");
  EXPECT_EQ(tasks(demo), (std::set<int>{v1::TASK_CLASSIFY, v1::TASK_ZERO_SHOT}));
  ASSERT_EQ(demo.labels_size(), 3);
  const std::vector<std::string> names = {"contradiction", "entailment", "neutral"};
  for (int id = 0; id < 3; ++id) {
    EXPECT_EQ(demo.labels(id).id(), id);
    EXPECT_EQ(demo.labels(id).name(), names[static_cast<size_t>(id)]);
  }
  EXPECT_EQ(demo.default_score_function(), v1::SCORE_FUNCTION_SOFTMAX);
  ASSERT_TRUE(demo.has_entailment_id() && demo.has_contradiction_id());
  EXPECT_EQ(demo.entailment_id(), 1);
  EXPECT_EQ(demo.contradiction_id(), 0);
  EXPECT_EQ(demo.pooling(), v1::POOLING_UNSPECIFIED);
  EXPECT_EQ(demo.embedding_dimensions(), 0u);

  const v1::ModelInfo& rerank = info.models(1);
  EXPECT_EQ(tasks(rerank), (std::set<int>{v1::TASK_CLASSIFY, v1::TASK_RERANK}));
  ASSERT_EQ(rerank.labels_size(), 1);
  EXPECT_EQ(rerank.labels(0).name(), "LABEL_0");
  EXPECT_EQ(rerank.default_score_function(), v1::SCORE_FUNCTION_SIGMOID);
  EXPECT_FALSE(rerank.has_entailment_id());

  for (int m : {2, 3}) {
    const v1::ModelInfo& embed = info.models(m);
    EXPECT_EQ(embed.architecture(), "DebertaV2Model");
    EXPECT_EQ(tasks(embed), (std::set<int>{v1::TASK_EMBED}));
    EXPECT_EQ(embed.labels_size(), 0);
    EXPECT_EQ(embed.default_score_function(), v1::SCORE_FUNCTION_UNSPECIFIED);
    EXPECT_EQ(embed.embedding_dimensions(), 32u);
    EXPECT_EQ(embed.pooling(), m == 2 ? v1::POOLING_MEAN : v1::POOLING_CLS);
  }

  v1::InfoRequest one;
  one.set_model("rerank");
  v1::InfoResponse single;
  ASSERT_TRUE(stub().Info(NewContext().get(), one, &single).ok());
  ASSERT_EQ(single.models_size(), 1);
  EXPECT_EQ(single.models(0).id(), "rerank");
  EXPECT_EQ(single.version(), kTestVersion);
}

// ---------------------------------------------------------------------------------------------
// 2. Batch invariance.
// ---------------------------------------------------------------------------------------------

TEST_F(ResultsTest, ResultDoesNotDependOnBatchMates) {
  const std::string target = "Batch invariance: this sentence scores the same in any company.";
  const Encoding target_encoding = demo().Encode(target);
  const std::vector<double> reference = ExpectedClassify(target);
  auto expect_target = [&](const v1::Classification& result, const std::vector<float>& alone) {
    for (const v1::LabelScore& score : result.scores()) {
      EXPECT_TRUE(Near(score.score(), alone[static_cast<size_t>(score.id())])) << "vs alone";
      EXPECT_TRUE(Near(score.score(), reference[static_cast<size_t>(score.id())]))
          << "vs reference";
    }
  };

  // Alone.
  v1::ClassifyRequest alone_request;
  alone_request.set_model("demo");
  alone_request.add_inputs()->set_text(target);
  v1::ClassifyResponse alone_response;
  ASSERT_TRUE(stub().Classify(NewContext().get(), alone_request, &alone_response).ok());
  std::vector<float> alone(3);
  for (const v1::LabelScore& score : alone_response.results(0).scores()) {
    alone[static_cast<size_t>(score.id())] = score.score();
  }

  // Among 19 other inputs of varied lengths in one request.
  v1::ClassifyRequest crowd;
  crowd.set_model("demo");
  for (int i = 0; i < 20; ++i) {
    v1::TextInput* input = crowd.add_inputs();
    if (i == 7) {
      input->set_text(target);
    } else {
      input->set_text(TextPool()[static_cast<size_t>(i) % TextPool().size()]);
      if (i % 3 == 0) input->set_text_pair(TextPool()[static_cast<size_t>(i + 1) % 7]);
    }
  }
  v1::ClassifyResponse crowd_response;
  ASSERT_TRUE(stub().Classify(NewContext().get(), crowd, &crowd_response).ok());
  ASSERT_EQ(crowd_response.results_size(), 20);
  expect_target(crowd_response.results(7), alone);

  // Concurrently with other clients' requests, all queued behind a held batch so that the next
  // batch mixes them: each client thread sends requests holding the target among other inputs.
  control().Close();
  const int batches_before = control().batches();
  v1::ClassifyRequest blocker;
  blocker.set_model("demo");
  blocker.add_inputs()->set_text("blocker");
  std::unique_ptr<AsyncClassify> held = StartClassify(stub(), blocker);
  ASSERT_TRUE(control().WaitForBatches(batches_before + 1));
  constexpr int kClients = 4;
  constexpr int kRequestsPerClient = 2;
  std::vector<std::unique_ptr<AsyncClassify>> calls(kClients * kRequestsPerClient);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int r = 0; r < kRequestsPerClient; ++r) {
        v1::ClassifyRequest request;
        request.set_model("demo");
        for (int i = 0; i < 4; ++i) {
          request.add_inputs()->set_text(
              i == (c + r) % 4 ? target : TextPool()[static_cast<size_t>(c + r + i) % 7]);
        }
        calls[static_cast<size_t>(c * kRequestsPerClient + r)] = StartClassify(stub(), request);
      }
    });
  }
  for (std::thread& client : clients) client.join();
  ASSERT_TRUE(server_->WaitForQueuedRequests("demo", kClients * kRequestsPerClient));
  control().Open();
  ASSERT_TRUE(held->Wait().ok());
  for (size_t k = 0; k < calls.size(); ++k) {
    ASSERT_TRUE(calls[k]->Wait().ok()) << k;
    const int c = static_cast<int>(k) / kRequestsPerClient;
    const int r = static_cast<int>(k) % kRequestsPerClient;
    ASSERT_EQ(calls[k]->response.results_size(), 4);
    expect_target(calls[k]->response.results((c + r) % 4), alone);
  }
  // The target did share a batch with other clients' requests (each request holds 4 inputs).
  EXPECT_GT(control().LargestBatchWith(target_encoding.ids), 4);

  // Embeddings likewise: alone and among others.
  v1::EmbedRequest embed_alone;
  embed_alone.set_model("embed");
  embed_alone.add_inputs(target);
  embed_alone.set_normalize(false);
  v1::EmbedRequest embed_crowd = embed_alone;
  embed_crowd.clear_inputs();
  for (int i = 0; i < 12; ++i) {
    embed_crowd.add_inputs(i == 5 ? target : TextPool()[static_cast<size_t>(i) % 8]);
  }
  v1::EmbedResponse single, many;
  ASSERT_TRUE(stub().Embed(NewContext().get(), embed_alone, &single).ok());
  ASSERT_TRUE(stub().Embed(NewContext().get(), embed_crowd, &many).ok());
  const std::vector<float> expected = embed().Embedding(embed().Encode(target));
  const double absolute = EmbeddingAbsoluteTolerance(expected);
  ASSERT_EQ(many.embeddings(5).float32_values_size(), 32);
  for (int d = 0; d < 32; ++d) {
    EXPECT_TRUE(Near(many.embeddings(5).float32_values(d), single.embeddings(0).float32_values(d),
                     1e-5, absolute));
    EXPECT_TRUE(Near(many.embeddings(5).float32_values(d), expected[static_cast<size_t>(d)], 1e-5,
                     absolute));
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Streams.
// ---------------------------------------------------------------------------------------------

// Writes `requests` on a bidirectional stream while a second thread reads every answer; then
// half-closes and returns the answers and the final status. `after_writes` runs once every
// request is written (before the half-close).
template <typename Request, typename StreamResponse>
grpc::Status RunStream(grpc::ClientReaderWriter<Request, StreamResponse>& stream,
                       const std::vector<Request>& requests, std::vector<StreamResponse>& responses,
                       const std::function<void()>& after_writes = {}) {
  std::thread reader([&] {
    StreamResponse response;
    while (stream.Read(&response)) responses.push_back(response);
  });
  for (const Request& request : requests) {
    if (!stream.Write(request)) break;
  }
  if (after_writes) after_writes();
  stream.WritesDone();
  reader.join();
  return stream.Finish();
}

TEST_F(ResultsTest, ClassifyStreamAnswersInRequestOrderWithErrorsInPlace) {
  constexpr int kMessages = 30;
  std::vector<v1::ClassifyRequest> requests(kMessages);
  std::map<int, std::pair<int, std::string>> errors;  // index -> (code, field in message)
  int64_t valid_sequences = 0;
  for (int i = 0; i < kMessages; ++i) {
    v1::ClassifyRequest& request = requests[static_cast<size_t>(i)];
    request.set_model("demo");
    request.set_request_id(absl::StrCat("c", i));
    request.set_priority(static_cast<v1::Priority>(1 + i % 3));  // LOW, NORMAL, HIGH.
    const int inputs = 1 + (i * 7) % 5;
    for (int k = 0; k < inputs; ++k) {
      v1::TextInput* input = request.add_inputs();
      input->set_text(TextPool()[static_cast<size_t>(i + k) % TextPool().size()]);
      if ((i + k) % 4 == 0) input->set_text_pair(TextPool()[static_cast<size_t>(k) % 3]);
    }
    if (i == 11) {
      request.clear_inputs();
      errors[i] = {3, "inputs"};
    } else if (i == 19) {
      request.set_model("no-such-model");
      errors[i] = {5, "model"};
    } else if (i == 25) {
      request.set_truncate(false);
      request.mutable_inputs(0)->set_text(kLongText);
      request.mutable_inputs(0)->clear_text_pair();
      errors[i] = {3, "inputs[0]"};
    } else {
      valid_sequences += inputs;
    }
  }
  // Hold the engine so that all messages queue (priorities reorder them, errors are answered at
  // once): completion order differs from request order.
  control().Close();
  const int64_t sequences_before = control().sequences();
  auto context = NewContext();
  auto stream = stub().ClassifyStream(context.get());
  std::vector<v1::ClassifyStreamResponse> responses;
  const grpc::Status status = RunStream(*stream, requests, responses, [&] {
    PollUntil(
        [&] {
          return control().sequences() - sequences_before + server_->WaitingSequences("demo") >=
                 valid_sequences;
        },
        absl::Milliseconds(2));
    control().Open();
  });
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    SCOPED_TRACE(absl::StrCat("message ", i));
    const v1::ClassifyStreamResponse& message = responses[static_cast<size_t>(i)];
    if (auto error = errors.find(i); error != errors.end()) {
      ASSERT_TRUE(message.has_error());
      EXPECT_EQ(message.error().code(), error->second.first);
      EXPECT_THAT(message.error().message(), HasSubstr(error->second.second));
      EXPECT_EQ(message.error().request_id(), absl::StrCat("c", i));
      continue;
    }
    ASSERT_TRUE(message.has_response());
    const v1::ClassifyResponse& response = message.response();
    EXPECT_EQ(response.metadata().request_id(), absl::StrCat("c", i));
    const v1::ClassifyRequest& request = requests[static_cast<size_t>(i)];
    ASSERT_EQ(response.results_size(), request.inputs_size());
    for (int k = 0; k < request.inputs_size(); ++k) {
      const v1::TextInput& input = request.inputs(k);
      ExpectClassification(response.results(k), input.text(),
                           input.has_text_pair() ? std::optional(input.text_pair()) : std::nullopt);
    }
  }
}

TEST_F(ResultsTest, RerankStreamAnswersInRequestOrderWithErrorsInPlace) {
  constexpr int kMessages = 12;
  std::vector<v1::RerankRequest> requests(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    v1::RerankRequest& request = requests[static_cast<size_t>(i)];
    request.set_model("rerank");
    request.set_request_id(absl::StrCat("r", i));
    request.set_query(TextPool()[static_cast<size_t>(i) % 3]);
    for (int d = 0; d < 1 + (i * 5) % 6; ++d) {
      request.add_documents(TextPool()[static_cast<size_t>(i + d) % TextPool().size()]);
    }
    request.set_top_n(static_cast<uint32_t>(i % 3));
  }
  requests[4].clear_documents();  // INVALID_ARGUMENT
  requests[8].set_model("demo");  // FAILED_PRECONDITION
  std::vector<v1::RerankStreamResponse> responses;
  auto context = NewContext();
  auto stream = stub().RerankStream(context.get());
  const grpc::Status status = RunStream(*stream, requests, responses);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    SCOPED_TRACE(absl::StrCat("message ", i));
    const v1::RerankStreamResponse& message = responses[static_cast<size_t>(i)];
    if (i == 4 || i == 8) {
      ASSERT_TRUE(message.has_error());
      EXPECT_EQ(message.error().code(), i == 4 ? 3 : 9);
      EXPECT_THAT(message.error().message(), HasSubstr(i == 4 ? "documents" : "cross-encoder"));
      EXPECT_EQ(message.error().request_id(), absl::StrCat("r", i));
      continue;
    }
    ASSERT_TRUE(message.has_response());
    const v1::RerankRequest& request = requests[static_cast<size_t>(i)];
    const v1::RerankResponse& response = message.response();
    EXPECT_EQ(response.metadata().request_id(), absl::StrCat("r", i));
    const int expected_count = request.top_n() == 0
                                   ? request.documents_size()
                                   : std::min<int>(request.documents_size(), request.top_n());
    ASSERT_EQ(response.results_size(), expected_count);
    for (const v1::RerankResult& result : response.results()) {
      ASSERT_LT(result.index(), static_cast<uint32_t>(request.documents_size()));
      EXPECT_TRUE(Near(result.score(),
                       Sigmoid(ExpectedRerankLogit(
                           request.query(), request.documents(static_cast<int>(result.index()))))));
    }
  }
}

TEST_F(ResultsTest, EmbedStreamAnswersInRequestOrderWithErrorsInPlace) {
  constexpr int kMessages = 12;
  std::vector<v1::EmbedRequest> requests(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    v1::EmbedRequest& request = requests[static_cast<size_t>(i)];
    request.set_model(i % 2 == 0 ? "embed" : "embed-cls");
    request.set_request_id(absl::StrCat("e", i));
    for (int k = 0; k < 1 + (i * 3) % 7; ++k) {
      request.add_inputs(TextPool()[static_cast<size_t>(i + k) % TextPool().size()]);
    }
    request.set_dimensions(static_cast<uint32_t>(i % 3 == 0 ? 0 : 4 * i % 32 + 1));
    request.set_encoding(i % 4 == 1 ? v1::EMBEDDING_ENCODING_FLOAT16
                                    : v1::EMBEDDING_ENCODING_FLOAT32);
  }
  requests[3].set_dimensions(33);  // More than hidden: INVALID_ARGUMENT.
  requests[9].clear_inputs();      // INVALID_ARGUMENT.
  std::vector<v1::EmbedStreamResponse> responses;
  auto context = NewContext();
  auto stream = stub().EmbedStream(context.get());
  const grpc::Status status = RunStream(*stream, requests, responses);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    SCOPED_TRACE(absl::StrCat("message ", i));
    const v1::EmbedStreamResponse& message = responses[static_cast<size_t>(i)];
    if (i == 3 || i == 9) {
      ASSERT_TRUE(message.has_error());
      EXPECT_EQ(message.error().code(), 3);
      EXPECT_THAT(message.error().message(), HasSubstr(i == 3 ? "dimensions" : "inputs"));
      EXPECT_EQ(message.error().request_id(), absl::StrCat("e", i));
      continue;
    }
    ASSERT_TRUE(message.has_response());
    const v1::EmbedRequest& request = requests[static_cast<size_t>(i)];
    const v1::EmbedResponse& response = message.response();
    EXPECT_EQ(response.metadata().request_id(), absl::StrCat("e", i));
    EXPECT_EQ(response.metadata().model(), request.model());
    ASSERT_EQ(response.embeddings_size(), request.inputs_size());
    const Reference& reference = request.model() == "embed" ? embed() : embed_cls();
    const size_t dimensions = request.dimensions() == 0 ? 32 : request.dimensions();
    const bool half = request.encoding() == v1::EMBEDDING_ENCODING_FLOAT16;
    for (int k = 0; k < request.inputs_size(); ++k) {
      const v1::Embedding& embedding = response.embeddings(k);
      const std::vector<double> expected = PostprocessEmbedding(
          reference.Embedding(reference.Encode(request.inputs(k))), dimensions, true);
      const std::vector<float> values = half
                                            ? DecodeFloat16(embedding.float16_bytes())
                                            : std::vector<float>(embedding.float32_values().begin(),
                                                                 embedding.float32_values().end());
      ASSERT_EQ(values.size(), dimensions);
      const double absolute = EmbeddingAbsoluteTolerance(expected);
      for (size_t d = 0; d < dimensions; ++d) {
        EXPECT_TRUE(half ? Near(values[d], expected[d], 1.0 / 2048, absolute)
                         : Near(values[d], expected[d], 1e-5, absolute));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 5. Many clients, many models.
// ---------------------------------------------------------------------------------------------

TEST(ManyClientsTest, EveryCallOfEightClientsOnTwoModelsIsAnsweredCorrectly) {
  absl::StatusOr<std::unique_ptr<TinyModels>> models = WriteTinyModels();
  ASSERT_TRUE(models.ok()) << models.status();
  absl::StatusOr<std::unique_ptr<TestServer>> started = TestServer::Start(
      TestServerConfig({TestModelEntry("nli", DemoModelDir(), kBatchTokens),
                        TestModelEntry("xenc", (*models)->rerank, kBatchTokens)}));
  ASSERT_TRUE(started.ok()) << started.status();
  TestServer& server = **started;
  absl::StatusOr<std::unique_ptr<Reference>> nli = Reference::Load(DemoModelDir());
  absl::StatusOr<std::unique_ptr<Reference>> xenc = Reference::Load((*models)->rerank);
  ASSERT_TRUE(nli.ok() && xenc.ok());

  // The expected answers, computed before any client starts.
  const std::vector<std::string> texts = {TextPool()[0], TextPool()[2], TextPool()[4],
                                          TextPool()[6]};
  std::vector<std::vector<double>> nli_scores;
  std::vector<double> xenc_single;  // Classify on the cross-encoder: sigmoid of its one logit.
  std::vector<double> xenc_scores;  // Rerank against texts[0].
  for (const std::string& text : texts) {
    nli_scores.push_back(Softmax((*nli)->Logits((*nli)->Encode(text))));
    xenc_single.push_back(Sigmoid((*xenc)->Logits((*xenc)->Encode(text))[0]));
    xenc_scores.push_back(Sigmoid(
        (*xenc)->Logits((*xenc)->Encode(texts[0], text, TruncationStrategy::kOnlySecond))[0]));
  }
  std::vector<double> zero_shot_entailment;
  for (const char* label : {"family", "travel"}) {
    zero_shot_entailment.push_back(
        (*nli)->Logits((*nli)->Encode(texts[2], absl::StrCat("This example is ", label, "."),
                                      TruncationStrategy::kOnlyFirst))[1]);
  }
  const std::vector<double> zero_shot =
      Softmax(std::vector<float>(zero_shot_entailment.begin(), zero_shot_entailment.end()));
  const Encoding tokenized = (*nli)->Encode(texts[1]);

  constexpr int kClients = 8;
  constexpr int kCallsPerClient = 6;
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int n = 0; n < kCallsPerClient; ++n) {
        SCOPED_TRACE(absl::StrCat("client ", c, " call ", n));
        const int kind = (c + n) % 6;
        const std::string id = absl::StrCat("client", c, "-", n);
        if (kind == 0 || kind == 1) {  // Classify on either model.
          v1::ClassifyRequest request;
          request.set_model(kind == 0 ? "nli" : "xenc");
          request.set_request_id(id);
          for (const std::string& text : texts) request.add_inputs()->set_text(text);
          v1::ClassifyResponse response;
          const grpc::Status status =
              server.stub().Classify(NewContext().get(), request, &response);
          ASSERT_TRUE(status.ok()) << status.error_message();
          EXPECT_EQ(response.metadata().request_id(), id);
          ASSERT_EQ(response.results_size(), 4);
          for (size_t t = 0; t < texts.size(); ++t) {
            for (const v1::LabelScore& score : response.results(static_cast<int>(t)).scores()) {
              const double expected =
                  kind == 0 ? nli_scores[t][static_cast<size_t>(score.id())] : xenc_single[t];
              EXPECT_TRUE(Near(score.score(), expected));
            }
          }
        } else if (kind == 2) {
          v1::RerankRequest request;
          request.set_model("xenc");
          request.set_request_id(id);
          request.set_query(texts[0]);
          for (const std::string& text : texts) request.add_documents(text);
          v1::RerankResponse response;
          ASSERT_TRUE(server.stub().Rerank(NewContext().get(), request, &response).ok());
          ASSERT_EQ(response.results_size(), 4);
          for (const v1::RerankResult& result : response.results()) {
            EXPECT_TRUE(Near(result.score(), xenc_scores[result.index()]));
          }
        } else if (kind == 3) {
          v1::ZeroShotRequest request;
          request.set_model("nli");
          request.set_request_id(id);
          request.add_texts(texts[2]);
          request.add_candidate_labels("family");
          request.add_candidate_labels("travel");
          v1::ZeroShotResponse response;
          ASSERT_TRUE(server.stub().ZeroShot(NewContext().get(), request, &response).ok());
          ASSERT_EQ(response.results_size(), 1);
          for (const v1::LabelScore& score : response.results(0).scores()) {
            EXPECT_TRUE(Near(score.score(), zero_shot[static_cast<size_t>(score.id())]));
          }
        } else if (kind == 4) {
          v1::TokenizeRequest request;
          request.set_model(c % 2 == 0 ? "nli" : "xenc");  // Same tokenizer files.
          request.set_request_id(id);
          request.add_inputs()->set_text(texts[1]);
          v1::TokenizeResponse response;
          ASSERT_TRUE(server.stub().Tokenize(NewContext().get(), request, &response).ok());
          ASSERT_EQ(response.encodings(0).tokens_size(), static_cast<int>(tokenized.ids.size()));
          for (int t = 0; t < response.encodings(0).tokens_size(); ++t) {
            EXPECT_EQ(response.encodings(0).tokens(t).id(), tokenized.ids[static_cast<size_t>(t)]);
          }
        } else {
          v1::InfoResponse response;
          ASSERT_TRUE(server.stub().Info(NewContext().get(), v1::InfoRequest(), &response).ok());
          ASSERT_EQ(response.models_size(), 2);
          EXPECT_EQ(response.models(0).id(), "nli");
          EXPECT_EQ(response.models(1).id(), "xenc");
        }
        ++answered;
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(answered.load(), kClients * kCallsPerClient);

  // With two models served, a request must name one.
  v1::ClassifyRequest unnamed;
  unnamed.add_inputs()->set_text("which model?");
  v1::ClassifyResponse response;
  const grpc::Status status = server.stub().Classify(NewContext().get(), unnamed, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("model"));
  EXPECT_THAT(status.error_message(), HasSubstr("nli"));
}

}  // namespace
}  // namespace dflash::e2e
