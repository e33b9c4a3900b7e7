// The server on checkpoint directories whose tokenizer is a tokenizer.json: a transformers 5.17
// save_pretrained directory (tokenizer.json only), a 4.x-era directory (tokenizer.json and
// spm.model; auto takes tokenizer.json, the `tokenizer` key can name sentencepiece) and an
// mDeBERTa-shaped multilingual one. Tokenizer files from tests/golden/tokenizer_json, tiny random
// weights; Tokenize is checked against the `tokenizers` library's encodings recorded there,
// Classify against the tokenizer and CPU engine called directly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/e2e_harness.h"

namespace dflash::e2e {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtureDir = fs::path(DFLASH_SOURCE_DIR) / "tests/golden/tokenizer_json";

// A checkpoint directory: the fixture's tokenizer files and a tiny random sequence classifier
// whose vocabulary covers the tokenizer's.
absl::Status WriteCheckpoint(const fs::path& fixture, const fs::path& to, int vocab_size,
                             uint32_t seed) {
  std::error_code error;
  fs::create_directories(to, error);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                           "added_tokens.json", "spm.model"}) {
    if (!fs::exists(fixture / name)) continue;
    fs::copy_file(fixture / name, to / name, fs::copy_options::overwrite_existing, error);
    if (error) return absl::InternalError(absl::StrCat("copy ", name, ": ", error.message()));
  }
  nlohmann::json config = test::TinyConfigJson();
  config["vocab_size"] = vocab_size;
  config["hidden_size"] = 16;
  config["intermediate_size"] = 32;
  config["max_position_embeddings"] = 512;
  return test::WriteTinyCheckpoint(to, config, {}, seed).status();
}

// Single-text cases of a fixture that fit kMaxInputLength untruncated.
std::vector<nlohmann::json> ShortSingleCases(const fs::path& fixture, size_t count) {
  std::vector<nlohmann::json> cases;
  gzFile file = gzopen((fixture / "cases.jsonl.gz").c_str(), "rb");
  if (file == nullptr) return cases;
  std::string text;
  char buffer[1 << 16];
  int read = 0;
  while ((read = gzread(file, buffer, sizeof(buffer))) > 0) text.append(buffer, read);
  gzclose(file);
  for (const absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("pair") || record.contains("truncation") || record.contains("error") ||
        record.contains("add_special_tokens") ||
        record["input_ids"].size() > static_cast<size_t>(kMaxInputLength)) {
      continue;
    }
    cases.push_back(std::move(record));
    if (cases.size() == count) break;
  }
  return cases;
}

class TokenizerJsonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new test::ScopedTempDir();
    const fs::path root = directory_->path();
    ASSERT_TRUE(WriteCheckpoint(kFixtureDir / "v3_hf5", root / "hf5", 6016, 21).ok());
    ASSERT_TRUE(WriteCheckpoint(kFixtureDir / "v3_hf4", root / "hf4", 6016, 22).ok());
    ASSERT_TRUE(WriteCheckpoint(kFixtureDir / "mdeberta", root / "mdeberta", 8016, 23).ok());
    ModelEntry hf4_spm = TestModelEntry("hf4-spm", root / "hf4");
    hf4_spm.tokenizer = "sentencepiece";
    absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(
        TestServerConfig({TestModelEntry("hf5", root / "hf5"), TestModelEntry("hf4", root / "hf4"),
                          hf4_spm, TestModelEntry("mdeberta", root / "mdeberta")}));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete directory_;
    directory_ = nullptr;
  }

  static v1::InferenceService::Stub& stub() { return server_->stub(); }
  static fs::path ModelDir(const std::string& name) { return directory_->path() / name; }

  // Tokenize of the fixture's short single texts answers what tokenizers gave.
  static void ExpectTokenizeMatchesFixture(const std::string& model, const std::string& fixture) {
    const std::vector<nlohmann::json> cases = ShortSingleCases(kFixtureDir / fixture, 200);
    ASSERT_GE(cases.size(), 100u);
    v1::TokenizeRequest request;
    request.set_model(model);
    for (const nlohmann::json& record : cases) {
      request.add_inputs()->set_text(record["text"].get<std::string>());
    }
    v1::TokenizeResponse response;
    const grpc::Status status = stub().Tokenize(NewContext().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.encodings_size(), static_cast<int>(cases.size()));
    for (size_t i = 0; i < cases.size(); ++i) {
      const nlohmann::json& record = cases[i];
      const v1::Encoding& encoding = response.encodings(static_cast<int>(i));
      const nlohmann::json& offsets =
          record.contains("byte_offsets") ? record["byte_offsets"] : record["offsets"];
      SCOPED_TRACE(record.dump());
      ASSERT_EQ(encoding.tokens_size(), static_cast<int>(record["input_ids"].size()));
      for (int t = 0; t < encoding.tokens_size(); ++t) {
        const v1::Token& token = encoding.tokens(t);
        EXPECT_EQ(token.id(), record["input_ids"][static_cast<size_t>(t)].get<int32_t>());
        EXPECT_EQ(token.type_id(), record["token_type_ids"][static_cast<size_t>(t)].get<int32_t>());
        EXPECT_EQ(token.special(), record["special_tokens_mask"][static_cast<size_t>(t)] == 1);
        EXPECT_EQ(token.start(), offsets[static_cast<size_t>(t)][0].get<uint32_t>());
        EXPECT_EQ(token.end(), offsets[static_cast<size_t>(t)][1].get<uint32_t>());
      }
    }
  }

  // Classify (raw logits) equals the model's tokenizer and the CPU engine called directly.
  static void ExpectClassifyMatchesReference(const std::string& model, const fs::path& dir,
                                             TokenizerChoice choice) {
    absl::StatusOr<std::unique_ptr<Reference>> reference = Reference::Load(dir, choice);
    ASSERT_TRUE(reference.ok()) << reference.status();
    const std::vector<std::pair<std::string, std::optional<std::string>>> inputs = {
        {"The license grants permission to copy, modify and distribute.", std::nullopt},
        {"  Whitespace\tand [MASK] tokens\n", "a second text"},
        {"Grüße aus Köln — ﬁnance, ｆｕｌｌｗｉｄｔｈ, 日本語, مرحبا", std::nullopt},
    };
    v1::ClassifyRequest request;
    request.set_model(model);
    request.set_score_function(v1::SCORE_FUNCTION_RAW);
    for (const auto& [text, pair] : inputs) {
      v1::TextInput* input = request.add_inputs();
      input->set_text(text);
      if (pair) input->set_text_pair(*pair);
    }
    v1::ClassifyResponse response;
    const grpc::Status status = stub().Classify(NewContext().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.results_size(), static_cast<int>(inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      SCOPED_TRACE(inputs[i].first);
      const auto& [text, pair] = inputs[i];
      const Encoding encoding =
          (*reference)->Encode(text, pair ? std::optional<absl::string_view>(*pair) : std::nullopt);
      const std::vector<float> logits = (*reference)->Logits(encoding);
      const v1::Classification& result = response.results(static_cast<int>(i));
      EXPECT_EQ(result.tokens(), encoding.ids.size());
      ASSERT_EQ(result.scores_size(), static_cast<int>(logits.size()));
      for (const v1::LabelScore& score : result.scores()) {
        const float expected = logits[static_cast<size_t>(score.id())];
        EXPECT_NEAR(score.score(), expected, 1e-4 * (1 + std::fabs(expected)));
      }
    }
  }

  static inline test::ScopedTempDir* directory_ = nullptr;
  static inline TestServer* server_ = nullptr;
};

TEST_F(TokenizerJsonTest, InfoNamesTheTokenizerSource) {
  v1::InfoResponse response;
  ASSERT_TRUE(stub().Info(NewContext().get(), v1::InfoRequest(), &response).ok());
  std::map<std::string, std::string> sources;
  for (const v1::ModelInfo& model : response.models()) sources[model.id()] = model.tokenizer();
  EXPECT_THAT(sources, ::testing::ElementsAre(::testing::Pair("hf4", "tokenizer_json"),
                                              ::testing::Pair("hf4-spm", "sentencepiece"),
                                              ::testing::Pair("hf5", "tokenizer_json"),
                                              ::testing::Pair("mdeberta", "tokenizer_json")));
}

TEST_F(TokenizerJsonTest, Transformers5DirectoryWithOnlyTokenizerJson) {
  ASSERT_FALSE(fs::exists(ModelDir("hf5") / "spm.model"));
  ExpectTokenizeMatchesFixture("hf5", "v3_hf5");
  ExpectClassifyMatchesReference("hf5", ModelDir("hf5"), TokenizerChoice::kAuto);
}

TEST_F(TokenizerJsonTest, Transformers4DirectoryUsesTokenizerJsonUnderAuto) {
  ASSERT_TRUE(fs::exists(ModelDir("hf4") / "spm.model"));
  ExpectTokenizeMatchesFixture("hf4", "v3_hf4");
  ExpectClassifyMatchesReference("hf4", ModelDir("hf4"), TokenizerChoice::kTokenizerJson);
}

TEST_F(TokenizerJsonTest, ConfiguredSentencepieceUsesSpmModel) {
  ExpectClassifyMatchesReference("hf4-spm", ModelDir("hf4"), TokenizerChoice::kSentencePiece);
  // The two sources differ where tokenizers' Precompiled normalizer maps a whole grapheme by its
  // first character ("ﬁ" + U+0301 becomes "fi") and sentencepiece keeps the accent.
  const std::string text = "\xEF\xAC\x81\xCC\x81x";
  std::map<std::string, std::vector<int32_t>> answers;
  for (const auto& [model, choice] :
       {std::pair<std::string, TokenizerChoice>{"hf4", TokenizerChoice::kTokenizerJson},
        std::pair<std::string, TokenizerChoice>{"hf4-spm", TokenizerChoice::kSentencePiece}}) {
    v1::TokenizeRequest request;
    request.set_model(model);
    request.add_inputs()->set_text(text);
    v1::TokenizeResponse response;
    ASSERT_TRUE(stub().Tokenize(NewContext().get(), request, &response).ok());
    ASSERT_EQ(response.encodings_size(), 1);
    for (const v1::Token& token : response.encodings(0).tokens()) {
      answers[model].push_back(token.id());
    }
    absl::StatusOr<std::unique_ptr<Reference>> reference = Reference::Load(ModelDir("hf4"), choice);
    ASSERT_TRUE(reference.ok()) << reference.status();
    EXPECT_EQ(answers[model], (*reference)->Encode(text).ids) << model;
  }
  EXPECT_NE(answers["hf4"], answers["hf4-spm"]);
}

TEST_F(TokenizerJsonTest, MultilingualDirectory) {
  ExpectTokenizeMatchesFixture("mdeberta", "mdeberta");
  ExpectClassifyMatchesReference("mdeberta", ModelDir("mdeberta"), TokenizerChoice::kAuto);
}

}  // namespace
}  // namespace dflash::e2e
