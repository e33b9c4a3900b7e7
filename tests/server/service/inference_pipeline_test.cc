// InferencePipeline on its own: the demo model's tokenizer and a scripted engine (no gRPC, no
// server), driven through Classify. Checks what reaches the engine, how its logits become the
// answer, and the codes of the failure paths (unknown model, bad text, engine failure, cancelled
// and late calls, an answer over the send limit) and their metrics.
#include "server/service/inference_pipeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "server/metrics/metric_registry.h"
#include "server/metrics/text_exposition.h"
#include "server/service/model_catalog.h"
#include "server/service/served_model.h"
#include "server/service/service_metrics.h"
#include "server/service/worker_pool.h"
#include "server/tokenizer/deberta_tokenizer.h"

namespace dflash::serving {
namespace {

const std::vector<std::string> kLabels = {"contradiction", "entailment", "neutral"};
// limits.max_text_bytes of the fixture's model, given to its tokenizer as ServedModel::Load does.
constexpr int kMaxTextBytes = 100;

ModelConfig ScriptedConfig() {
  ModelConfig config;
  config.vocab_size = 4096;  // The demo tokenizer's ids are below 4001.
  config.hidden_size = 8;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 1;
  config.attention_head_size = 8;
  config.embedding_size = 8;
  config.pooler_hidden_size = 8;
  config.type_vocab_size = 0;
  config.head = HeadKind::kSequenceClassification;
  config.id2label = kLabels;
  return config;
}

// The logits the scripted engine gives a sequence: label j gets 0.1 * j * length + first id/1000,
// so every label order and every input differ.
std::vector<float> ScriptedLogits(const std::vector<int32_t>& ids) {
  std::vector<float> logits;
  for (size_t j = 0; j < kLabels.size(); ++j) {
    logits.push_back(0.1f * static_cast<float>(j * ids.size()) +
                     static_cast<float>(ids.front()) / 1000.0f);
  }
  return logits;
}

// Records every sequence it runs and answers ScriptedLogits, or a scripted failure.
class ScriptedEngine final : public Engine {
 public:
  struct Log {
    std::mutex mutex;
    std::vector<std::vector<int32_t>> sequences;
    std::optional<absl::Status> fail_next;
  };

  ScriptedEngine(ModelConfig config, std::shared_ptr<Log> log)
      : config_(std::move(config)), log_(std::move(log)) {}

  absl::StatusOr<BatchOutput> Run(const PackedBatch& batch, const RunOptions& options) override {
    if (absl::Status valid = ValidatePackedBatch(batch, options, config_); !valid.ok()) {
      return valid;
    }
    std::lock_guard<std::mutex> lock(log_->mutex);
    if (log_->fail_next.has_value()) {
      absl::Status failure = *std::exchange(log_->fail_next, std::nullopt);
      return failure;
    }
    BatchOutput output;
    output.num_sequences = batch.num_sequences();
    output.total_tokens = batch.total_tokens();
    output.num_labels = config_.num_labels();
    for (int s = 0; s < batch.num_sequences(); ++s) {
      std::vector<int32_t> ids(batch.token_ids.begin() + batch.cu_seqlens[s],
                               batch.token_ids.begin() + batch.cu_seqlens[s + 1]);
      const std::vector<float> logits = ScriptedLogits(ids);
      output.sequence_logits.insert(output.sequence_logits.end(), logits.begin(), logits.end());
      log_->sequences.push_back(std::move(ids));
    }
    return output;
  }
  EngineInfo Info() const override {
    EngineInfo info;
    info.backend = "scripted";
    info.dtype = "float32";
    return info;
  }
  const ModelConfig& config() const override { return config_; }

 private:
  ModelConfig config_;
  std::shared_ptr<Log> log_;
};

std::filesystem::path DemoModelDir() { return DFLASH_DEMO_MODEL_DIR; }

// The lengths of the warm-up batch's sequences for a model of `max_input_length` with this
// budget.
std::vector<size_t> WarmUpLengths(int max_input_length, int max_batch_tokens,
                                  int max_batch_sequences) {
  absl::StatusOr<std::unique_ptr<DebertaTokenizer>> tokenizer =
      DebertaTokenizer::Load(DemoModelDir());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (!tokenizer.ok()) return {};
  ModelEntry entry;
  entry.name = "nli";
  entry.path = DemoModelDir();
  entry.max_input_length = max_input_length;
  entry.batching.max_batch_tokens = max_batch_tokens;
  entry.batching.max_batch_sequences = max_batch_sequences;
  ModelConfig config = ScriptedConfig();
  config.position_biased_input = false;  // Relative positions only: any input length.
  auto log = std::make_shared<ScriptedEngine::Log>();
  std::vector<std::unique_ptr<Engine>> engines;
  engines.push_back(std::make_unique<ScriptedEngine>(config, log));
  absl::StatusOr<std::unique_ptr<ServedModel>> model = ServedModel::Create(
      entry, config, EmbeddingConfig{}, std::move(*tokenizer), std::move(engines), nullptr);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  (*model)->scheduler().Shutdown();
  std::lock_guard<std::mutex> lock(log->mutex);
  std::vector<size_t> lengths;
  for (const std::vector<int32_t>& sequence : log->sequences) lengths.push_back(sequence.size());
  return lengths;
}

// The warm-up runs the whole token budget, in sequences no longer than 512 tokens unless the
// sequence budget needs longer ones: its attention time does not grow with max_input_length.
TEST(ServedModelWarmUpTest, FullTokenBudgetInBoundedSequences) {
  EXPECT_EQ(WarmUpLengths(64, 256, 16), std::vector<size_t>(4, 64));
  EXPECT_EQ(WarmUpLengths(32768, 32768, 256), std::vector<size_t>(64, 512));
  EXPECT_EQ(WarmUpLengths(16384, 16384, 8), std::vector<size_t>(8, 2048));
  EXPECT_EQ(WarmUpLengths(700, 1000, 256), (std::vector<size_t>{512, 488}));
}

class InferencePipelineTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(InferencePipeline::kDefaultMaxResponseBytes); }

  void Build(size_t max_response_bytes) {
    StopServing();
    pool_ = std::make_unique<WorkerPool>(2);
    catalog_ = std::make_unique<ModelCatalog>();
    TokenizerOptions tokenizer_options;
    tokenizer_options.max_input_bytes = kMaxTextBytes;
    absl::StatusOr<std::unique_ptr<DebertaTokenizer>> tokenizer =
        DebertaTokenizer::Load(DemoModelDir(), tokenizer_options);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    absl::StatusOr<std::unique_ptr<DebertaTokenizer>> reference =
        DebertaTokenizer::Load(DemoModelDir());
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = std::move(*reference);

    ModelEntry entry;
    entry.name = "nli";
    entry.path = DemoModelDir();
    entry.max_input_length = 64;
    entry.batching.max_batch_tokens = 256;
    entry.batching.max_batch_sequences = 16;
    entry.limits.max_text_bytes = kMaxTextBytes;
    std::vector<std::unique_ptr<Engine>> engines;
    engines.push_back(std::make_unique<ScriptedEngine>(ScriptedConfig(), log_));
    absl::StatusOr<std::unique_ptr<ServedModel>> model =
        ServedModel::Create(entry, ScriptedConfig(), EmbeddingConfig{}, std::move(*tokenizer),
                            std::move(engines), metrics_->ObserverFor("nli"));
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE(catalog_->Add(std::move(*model)).ok());
    {
      std::lock_guard<std::mutex> lock(log_->mutex);
      log_->sequences.clear();  // The warm-up batch.
    }
    pipeline_ = std::make_unique<InferencePipeline>(
        *catalog_, *pool_, metrics_.get(), ServerIdentity{"test", "r"}, max_response_bytes);
  }

  void TearDown() override { StopServing(); }

  // In the server's order: the tokenization pool finishes its tasks (which submit to the batchers)
  // before the batchers stop, and both before the models go.
  void StopServing() {
    pipeline_.reset();
    pool_.reset();
    if (catalog_ != nullptr) catalog_->ShutdownAll();
    catalog_.reset();
  }

  // Runs Classify and waits for its one answer; counts the answers. std::mutex and
  // std::condition_variable (not absl::Notification): ThreadSanitizer sees through them with
  // Debian's uninstrumented Abseil.
  absl::StatusOr<v1::ClassifyResponse> Classify(const v1::ClassifyRequest& request,
                                                CallContext call = {}) {
    std::mutex mutex;
    std::condition_variable answered;
    std::optional<absl::StatusOr<v1::ClassifyResponse>> answer;
    pipeline_->Classify(request, std::move(call),
                        [&](absl::StatusOr<v1::ClassifyResponse> response) {
                          std::lock_guard<std::mutex> lock(mutex);
                          answer = std::move(response);
                          ++answers_;
                          answered.notify_all();
                        });
    std::unique_lock<std::mutex> lock(mutex);
    const bool got =
        answered.wait_for(lock, std::chrono::seconds(60), [&] { return answer.has_value(); });
    EXPECT_TRUE(got) << "no answer";
    if (!got) return absl::UnknownError("no answer");
    return *std::move(answer);
  }

  std::vector<std::vector<int32_t>> EngineSequences() {
    std::lock_guard<std::mutex> lock(log_->mutex);
    return log_->sequences;
  }

  // dflash_requests_total for `protocol`, `rpc` and `code`, read from the exposition text.
  double RequestCount(absl::string_view protocol, absl::string_view rpc, absl::string_view code) {
    const std::string text = metrics::SerializeTextExposition(registry_);
    const std::string series =
        absl::StrCat("dflash_requests_total{protocol=\"", protocol, "\",rpc=\"", rpc,
                     "\",model=\"nli\",code=\"", code, "\"} ");
    const size_t at = text.find(series);
    if (at == std::string::npos) return 0;
    return std::stod(text.substr(at + series.size()));
  }

  static v1::ClassifyRequest Request(std::vector<std::pair<std::string, std::string>> inputs) {
    v1::ClassifyRequest request;
    request.set_model("nli");
    for (const auto& [text, pair] : inputs) {
      v1::TextInput* input = request.add_inputs();
      input->set_text(text);
      if (!pair.empty()) input->set_text_pair(pair);
    }
    return request;
  }

  metrics::Registry registry_;
  std::unique_ptr<ServiceMetrics> metrics_ = *ServiceMetrics::Create(registry_, "test", "r");
  std::shared_ptr<ScriptedEngine::Log> log_ = std::make_shared<ScriptedEngine::Log>();
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<ModelCatalog> catalog_;
  std::unique_ptr<InferencePipeline> pipeline_;
  std::unique_ptr<DebertaTokenizer> reference_;
  int answers_ = 0;  // Written under Classify's mutex, read after its answer.
};

TEST_F(InferencePipelineTest, ClassifyRunsTheTokenizedInputsAndScoresTheEngineLogits) {
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"A man plays a guitar.", "Someone makes music."},
      {"Short.", ""},
      {"The cat sat on the mat while it rained outside.", "It was dry."}};
  absl::StatusOr<v1::ClassifyResponse> response = Classify(Request(inputs));
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->results_size(), 3);
  EXPECT_EQ(answers_, 1);

  // The engine saw exactly the tokenizer's sequences, one per input.
  std::vector<std::vector<int32_t>> expected_ids;
  for (const auto& [text, pair] : inputs) {
    absl::StatusOr<Encoding> encoding = reference_->Encode(
        text, pair.empty() ? std::nullopt : std::optional(pair), reference_->DefaultTruncation());
    ASSERT_TRUE(encoding.ok()) << encoding.status();
    expected_ids.push_back(encoding->ids);
  }
  std::vector<std::vector<int32_t>> seen = EngineSequences();
  std::sort(seen.begin(), seen.end());
  std::vector<std::vector<int32_t>> sorted_expected = expected_ids;
  std::sort(sorted_expected.begin(), sorted_expected.end());
  EXPECT_EQ(seen, sorted_expected);

  uint64_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const v1::Classification& result = response->results(static_cast<int>(i));
    EXPECT_EQ(result.tokens(), expected_ids[i].size());
    tokens += expected_ids[i].size();
    // Softmax of the scripted logits, highest first, every label.
    const std::vector<float> logits = ScriptedLogits(expected_ids[i]);
    double sum = 0;
    for (float logit : logits) sum += std::exp(static_cast<double>(logit));
    ASSERT_EQ(result.scores_size(), 3);
    for (int rank = 0; rank < 3; ++rank) {
      const v1::LabelScore& score = result.scores(rank);
      const int label = 2 - rank;  // Logits grow with the label index.
      EXPECT_EQ(score.id(), label);
      EXPECT_EQ(score.label(), kLabels[static_cast<size_t>(label)]);
      EXPECT_NEAR(score.score(), std::exp(static_cast<double>(logits[label])) / sum, 1e-6);
    }
  }
  EXPECT_EQ(response->metadata().tokens(), tokens);
  EXPECT_EQ(response->metadata().model(), "nli");
  EXPECT_EQ(RequestCount("dflash_grpc", "Classify", "OK"), 1);
}

TEST_F(InferencePipelineTest, UnknownModelIsNotFoundAndNothingRuns) {
  v1::ClassifyRequest request = Request({{"hello", ""}});
  request.set_model("missing");
  absl::StatusOr<v1::ClassifyResponse> response = Classify(request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kNotFound) << response.status();
  EXPECT_TRUE(absl::StrContains(response.status().message(), "nli")) << "lists the served models";
  EXPECT_TRUE(EngineSequences().empty());
}

TEST_F(InferencePipelineTest, InvalidTextIsInvalidArgumentNamingTheFieldAndNothingRuns) {
  absl::StatusOr<v1::ClassifyResponse> response =
      Classify(Request({{"fine", ""}, {"bad \xff byte", ""}}));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_TRUE(absl::StrContains(response.status().message(), "inputs[1]")) << response.status();
  EXPECT_TRUE(EngineSequences().empty());
  EXPECT_EQ(RequestCount("dflash_grpc", "Classify", "INVALID_ARGUMENT"), 1);
}

// The tokenizer checks each text once and names its field; nothing else prefixes the message.
TEST_F(InferencePipelineTest, TextOverTheLimitOrNotUtf8IsNamedByItsFieldAndNothingRuns) {
  const std::string over(kMaxTextBytes + 1, 'a');
  const std::string limit = absl::StrCat(" bytes, more than the limit of ", kMaxTextBytes);
  const struct {
    std::string text;
    std::string pair;
    std::string message;
  } cases[] = {
      {over, "", absl::StrCat("inputs[1].text: 101", limit, " bytes per text")},
      {over, "fine", absl::StrCat("inputs[1].text: 101", limit, " bytes per text")},
      {"fine", over, absl::StrCat("inputs[1].text_pair: 101", limit, " bytes per text")},
      {"bad \xff", "fine",
       "inputs[1].text is not valid UTF-8: bad byte sequence at byte offset 4 (byte 0xff)"},
      {"fine", "bad \xff",
       "inputs[1].text_pair is not valid UTF-8: bad byte sequence at byte offset 4 (byte 0xff)"},
  };
  for (const auto& test : cases) {
    absl::StatusOr<v1::ClassifyResponse> response =
        Classify(Request({{"fine", ""}, {test.text, test.pair}}));
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
    EXPECT_EQ(std::string(response.status().message()), test.message);
  }
  EXPECT_TRUE(EngineSequences().empty());
  // At the limit: accepted.
  const std::string at_limit(kMaxTextBytes, 'a');
  EXPECT_TRUE(Classify(Request({{at_limit, at_limit}})).ok());
}

TEST_F(InferencePipelineTest, EngineFailureIsInternalForTheRequestAndTheNextOneRuns) {
  {
    std::lock_guard<std::mutex> lock(log_->mutex);
    log_->fail_next = absl::InternalError("device fault");
  }
  absl::StatusOr<v1::ClassifyResponse> failed = Classify(Request({{"one", ""}}));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal) << failed.status();
  absl::StatusOr<v1::ClassifyResponse> next = Classify(Request({{"two", ""}}));
  EXPECT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(answers_, 2);
}

TEST_F(InferencePipelineTest, CancelledCallIsAnsweredCancelledAndNeverComputed) {
  CallContext call;
  auto flag = std::make_shared<CancellationFlag>(true);
  call.cancelled = flag;
  absl::StatusOr<v1::ClassifyResponse> response = Classify(Request({{"hello", ""}}), call);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kCancelled) << response.status();
  EXPECT_TRUE(EngineSequences().empty());
  EXPECT_EQ(RequestCount("dflash_grpc", "Classify", "CANCELLED"), 1);
}

TEST_F(InferencePipelineTest, CallPastItsDeadlineIsDeadlineExceeded) {
  CallContext call;
  call.deadline = absl::Now() - absl::Seconds(1);
  absl::StatusOr<v1::ClassifyResponse> response = Classify(Request({{"hello", ""}}), call);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded) << response.status();
  EXPECT_EQ(RequestCount("dflash_grpc", "Classify", "DEADLINE_EXCEEDED"), 1);
}

TEST_F(InferencePipelineTest, AnswerOverTheSendLimitIsRefusedWithoutRetryHint) {
  Build(/*max_response_bytes=*/40);
  absl::StatusOr<v1::ClassifyResponse> response =
      Classify(Request({{"one", ""}, {"two", ""}, {"three", ""}}));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kResourceExhausted) << response.status();
  EXPECT_FALSE(IsRetryable(response.status()));
}

TEST_F(InferencePipelineTest, MetricsCountTheFrontTheCallCameThrough) {
  CallContext call;
  call.protocol = Protocol::kHttp;
  ASSERT_TRUE(Classify(Request({{"hello", ""}}), call).ok());
  EXPECT_EQ(RequestCount("http", "Classify", "OK"), 1);
  EXPECT_EQ(RequestCount("dflash_grpc", "Classify", "OK"), 0);
}

}  // namespace
}  // namespace dflash::serving
