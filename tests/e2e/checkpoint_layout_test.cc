// Checkpoint layouts end to end: the server starts on a directory holding pytorch_model.bin only
// (no safetensors), written here in torch.save's format, and answers exactly as it does for the
// same weights stored as model.safetensors.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/e2e_harness.h"
#include "tests/engine/tiny_checkpoint.h"

namespace dflash::e2e {
namespace {

namespace fs = std::filesystem;

// A sequence classifier sized for the demo tokenizer, written with `options` next to a copy of
// that tokenizer.
void WriteClassifier(const fs::path& directory, const test::TinyWriteOptions& options) {
  fs::create_directories(directory);
  for (const char* name : {"spm.model", "tokenizer_config.json"}) {
    fs::copy_file(DemoModelDir() / name, directory / name);
  }
  nlohmann::json config = test::TinyConfigJson();
  config["vocab_size"] = 4096;
  config["hidden_size"] = 32;
  config["num_attention_heads"] = 2;
  config["intermediate_size"] = 64;
  config["num_hidden_layers"] = 2;
  config["max_position_embeddings"] = 512;
  ASSERT_TRUE(test::WriteTinyCheckpoint(directory, config, options, /*seed=*/21).ok());
}

TEST(CheckpointLayoutTest, PytorchBinOnlyDirectoryServesAsSafetensorsDoes) {
  test::ScopedTempDir models;
  WriteClassifier(models.path() / "safetensors", {});
  test::TinyWriteOptions bin;
  bin.pytorch_bin = true;
  WriteClassifier(models.path() / "bin", bin);
  ASSERT_TRUE(fs::exists(models.path() / "bin" / "pytorch_model.bin"));
  for (const auto& file : fs::directory_iterator(models.path() / "bin")) {
    EXPECT_NE(file.path().extension(), ".safetensors") << file.path();
  }

  absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(
      TestServerConfig({TestModelEntry("safetensors", models.path() / "safetensors"),
                        TestModelEntry("bin", models.path() / "bin")}));
  ASSERT_TRUE(server.ok()) << server.status();

  const std::vector<std::string> texts = {"A short text.", "Another one, somewhat longer than it.",
                                          "x"};
  std::vector<v1::ClassifyResponse> answers;
  for (const char* model : {"safetensors", "bin"}) {
    v1::ClassifyRequest request;
    request.set_model(model);
    request.set_score_function(v1::SCORE_FUNCTION_RAW);
    for (const std::string& text : texts) request.add_inputs()->set_text(text);
    v1::ClassifyResponse response;
    const grpc::Status status = (*server)->stub().Classify(NewContext().get(), request, &response);
    ASSERT_TRUE(status.ok()) << model << ": " << status.error_message();
    answers.push_back(response);
  }
  ASSERT_EQ(answers[0].results_size(), static_cast<int>(texts.size()));
  ASSERT_EQ(answers[1].results_size(), static_cast<int>(texts.size()));
  for (int i = 0; i < answers[0].results_size(); ++i) {
    const v1::Classification& expected = answers[0].results(i);
    const v1::Classification& got = answers[1].results(i);
    ASSERT_EQ(got.scores_size(), expected.scores_size());
    EXPECT_EQ(got.tokens(), expected.tokens());
    for (int s = 0; s < got.scores_size(); ++s) {
      EXPECT_EQ(got.scores(s).id(), expected.scores(s).id());
      // Same float32 weights, same engine, same sequence run alone: the same logits.
      EXPECT_FLOAT_EQ(got.scores(s).score(), expected.scores(s).score()) << i << " " << s;
    }
  }
  // And both are the model: logits as the reference engine computes them from the safetensors.
  absl::StatusOr<std::unique_ptr<Reference>> reference =
      Reference::Load(models.path() / "safetensors");
  ASSERT_TRUE(reference.ok()) << reference.status();
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<float> logits = (*reference)->Logits((*reference)->Encode(texts[i]));
    for (const v1::LabelScore& score : answers[1].results(static_cast<int>(i)).scores()) {
      EXPECT_TRUE(Near(score.score(), logits[static_cast<size_t>(score.id())], 1e-4, 1e-5));
    }
  }
}

}  // namespace
}  // namespace dflash::e2e
