// The HTTP routes with the clients people run: tests/http/real_clients_check.py calls this server
// through the openai, cohere, huggingface_hub and requests packages (pinned in
// scripts/install-deps.sh, installed into the deploy tools' venv) and compares each answer with
// the dflash.v1 answer computed here over gRPC for the same input. Without the packages the test
// fails in CI (CI=true) and is skipped elsewhere, saying so.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e_harness.h"

namespace dflash::e2e {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The Python that has the client packages: $DFLASH_HTTP_CLIENTS_PYTHON, else the deploy venv
// ($DFLASH_DEPLOY_VENV, default .venv-deploy at the repository root).
fs::path ClientsPython() {
  if (const char* python = std::getenv("DFLASH_HTTP_CLIENTS_PYTHON")) return python;
  const char* venv = std::getenv("DFLASH_DEPLOY_VENV");
  fs::path root = venv != nullptr ? fs::path(venv) : fs::path(DFLASH_SOURCE_DIR) / ".venv-deploy";
  if (root.is_relative()) root = fs::path(DFLASH_SOURCE_DIR) / root;
  return root / "bin" / "python";
}

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

TEST(HttpClientsTest, RealClientsGetTheDflashAnswers) {
  absl::StatusOr<std::unique_ptr<TinyModels>> models = WriteTinyModels();
  ASSERT_TRUE(models.ok()) << models.status();
  ServerConfig config = TestServerConfig({TestModelEntry("demo", DemoModelDir()),
                                          TestModelEntry("rerank", (*models)->rerank),
                                          TestModelEntry("embed", (*models)->embed)});
  config.http_listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  v1::InferenceService::Stub& stub = (*server)->stub();

  json expected;
  expected["models"] = {"demo", "rerank", "embed"};
  {
    v1::EmbedRequest request;
    request.set_model("embed");
    request.add_inputs("the first text to embed");
    request.add_inputs("and a second one");
    v1::EmbedResponse response;
    ASSERT_TRUE(stub.Embed(NewContext().get(), request, &response).ok());
    json vectors = json::array();
    for (const v1::Embedding& embedding : response.embeddings()) {
      vectors.push_back(
          std::vector<float>(embedding.float32_values().begin(), embedding.float32_values().end()));
    }
    // The model input ids of each text ([CLS]/[SEP] included), for the token-id inputs.
    v1::TokenizeRequest tokenize;
    tokenize.set_model("embed");
    for (const std::string& text : request.inputs()) tokenize.add_inputs()->set_text(text);
    v1::TokenizeResponse tokenized;
    ASSERT_TRUE(stub.Tokenize(NewContext().get(), tokenize, &tokenized).ok());
    json ids = json::array();
    for (const v1::Encoding& encoding : tokenized.encodings()) {
      std::vector<int32_t> list;
      for (const v1::Token& token : encoding.tokens()) list.push_back(token.id());
      ids.push_back(list);
    }
    expected["embed"] = {{"inputs", {request.inputs(0), request.inputs(1)}},
                         {"ids", ids},
                         {"vectors", vectors},
                         {"tokens", response.metadata().tokens()}};
  }
  {
    v1::ClassifyRequest request;
    request.set_model("demo");
    request.add_inputs()->set_text("a man is playing a guitar on stage");
    v1::ClassifyResponse response;
    ASSERT_TRUE(stub.Classify(NewContext().get(), request, &response).ok());
    json scores = json::array();
    for (const v1::LabelScore& score : response.results(0).scores()) {
      scores.push_back({{"label", score.label()}, {"score", score.score()}});
    }
    expected["classify"] = {{"text", request.inputs(0).text()}, {"scores", scores}};
  }
  {
    v1::RerankRequest request;
    request.set_model("rerank");
    request.set_query("how do plants make food");
    for (const char* document : {"photosynthesis turns light into sugar", "cars need fuel",
                                 "leaves hold chlorophyll", "the stock market fell"}) {
      request.add_documents(document);
    }
    request.set_return_documents(true);
    v1::RerankResponse response;
    ASSERT_TRUE(stub.Rerank(NewContext().get(), request, &response).ok());
    json results = json::array();
    for (const v1::RerankResult& result : response.results()) {
      results.push_back(
          {{"index", result.index()}, {"score", result.score()}, {"document", result.document()}});
    }
    expected["rerank"] = {{"query", request.query()},
                          {"documents", std::vector<std::string>(request.documents().begin(),
                                                                 request.documents().end())},
                          {"results", results}};
  }
  {
    v1::TokenizeRequest request;
    request.set_model("demo");
    request.add_inputs()->set_text("Tokenize this, please.");
    v1::TokenizeResponse response;
    ASSERT_TRUE(stub.Tokenize(NewContext().get(), request, &response).ok());
    json tokens = json::array();
    for (const v1::Token& token : response.encodings(0).tokens()) {
      tokens.push_back({{"id", token.id()},
                        {"special", token.special()},
                        {"start", token.start()},
                        {"end", token.end()}});
    }
    expected["tokenize"] = {{"text", request.inputs(0).text()}, {"tokens", tokens}};
  }
  const fs::path expected_file = models.value()->directory.path() / "expected.json";
  std::ofstream(expected_file) << expected.dump();

  const fs::path python = ClientsPython();
  if (!fs::exists(python)) {
    const std::string message =
        absl::StrCat(python.string(), " does not exist: run scripts/install-deps.sh");
    if (InCi()) FAIL() << message;
    GTEST_SKIP() << message;
  }
  const std::string command = absl::StrCat(
      python.string(), " ", DFLASH_SOURCE_DIR,
      "/tests/http/real_clients_check.py http://127.0.0.1:", (*server)->runtime().http_port(), " ",
      expected_file.string(), " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (exit_code == 3) {
    const std::string message =
        absl::StrCat("the HTTP client packages are missing from ", python.string(),
                     " (run scripts/install-deps.sh): ", output);
    if (InCi()) FAIL() << message;
    GTEST_SKIP() << message;
  }
  EXPECT_EQ(exit_code, 0) << output;
}

}  // namespace
}  // namespace dflash::e2e
