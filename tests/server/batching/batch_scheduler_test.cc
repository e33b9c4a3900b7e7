// The dynamic batcher against fake engines: batch shapes and budgets, priorities, splitting,
// deadlines, cancellation, engine failures, admission, shutdown, parallel workers and a concurrency
// stress. Engines block on gates instead of the tests sleeping, so every check is about behaviour,
// never timing. Run it under TSan too (-DDFLASH_SANITIZE=thread).
#include "server/batching/batch_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"

namespace dflash::serving {
namespace {

constexpr int kNumLabels = 3;
constexpr int kHidden = 4;
constexpr int kVocab = 100000;
constexpr int32_t kFailToken = kVocab - 1;  // A batch holding this token fails in the fake engine.
// Bounds every wait of a test so that a bug shows as a failure, not a hung test binary.
constexpr std::chrono::seconds kHangGuard(60);

ModelConfig FakeConfig(HeadKind head = HeadKind::kSequenceClassification) {
  ModelConfig config;
  config.head = head;
  config.vocab_size = kVocab;
  config.hidden_size = kHidden;
  config.embedding_size = kHidden;
  config.pooler_hidden_size = kHidden;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 1;
  config.attention_head_size = kHidden;
  config.intermediate_size = 2 * kHidden;
  config.type_vocab_size = 2;
  config.relative_attention = true;
  config.position_biased_input = false;
  config.id2label = {"negative", "neutral", "positive"};
  return config;
}

// The fake model: outputs are a deterministic function of a sequence's tokens, so any mix-up in
// packing or scattering shows as a wrong value. Empty `types` means all zeros.
float SequenceSignature(std::span<const int32_t> ids, std::span<const int32_t> types) {
  float signature = 0.0f;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t type = types.empty() ? 0 : types[i];
    signature += static_cast<float>(ids[i]) * static_cast<float>(i % 7 + 1) +
                 static_cast<float>(type) * 0.5f * static_cast<float>(i + 1);
  }
  return signature;
}

std::vector<float> FakeLogits(std::span<const int32_t> ids, std::span<const int32_t> types) {
  const float signature = SequenceSignature(ids, types);
  return {signature, signature + 0.25f, -signature};
}

// [length, 3]: each token's logits from its id and its position in its own sequence, so a row
// scattered to the wrong sequence or position shows.
std::vector<float> FakeTokenLogits(std::span<const int32_t> ids) {
  std::vector<float> logits;
  for (size_t i = 0; i < ids.size(); ++i) {
    const float value = static_cast<float>(ids[i]) + 0.125f * static_cast<float>(i);
    logits.insert(logits.end(), {value, -value, value * 0.5f});
  }
  return logits;
}

std::vector<float> FakeEmbedding(std::span<const int32_t> ids, std::span<const int32_t> types) {
  return {static_cast<float>(ids.size()), static_cast<float>(ids.front()),
          static_cast<float>(ids.back()), SequenceSignature(ids, types)};
}

struct RecordedBatch {
  int engine = 0;
  PackedBatch batch;
  RunOptions options;
  bool failed = false;
};

// Every batch the fake engines of one test received, in the order they entered Run.
class EngineLog {
 public:
  int Record(int engine, const PackedBatch& batch, const RunOptions& options) {
    std::lock_guard<std::mutex> lock(mutex_);
    batches_.push_back(RecordedBatch{engine, batch, options, false});
    changed_.notify_all();
    return static_cast<int>(batches_.size()) - 1;
  }
  void MarkFailed(int index) {
    std::lock_guard<std::mutex> lock(mutex_);
    batches_[index].failed = true;
  }
  // Until `count` batches have entered Run; false if that never happens.
  bool WaitForBatches(int count) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, kHangGuard,
                             [&] { return static_cast<int>(batches_.size()) >= count; });
  }
  std::vector<RecordedBatch> Batches() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return batches_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<RecordedBatch> batches_;
};

// Holds an engine inside Run (keeping its runner busy) until opened, or lets single runs through.
class Gate {
 public:
  explicit Gate(bool open) : open_(open) {}
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }
  // Lets `runs` more runs through a closed gate.
  void Allow(int runs) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      permits_ += runs;
    }
    opened_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    opened_.wait(lock, [&] { return open_ || permits_ > 0; });
    if (!open_) --permits_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_;
  int permits_ = 0;
};

struct FakeEngineOptions {
  HeadKind head = HeadKind::kSequenceClassification;
  int num_labels = kNumLabels;
  bool fail_every_batch = false;
  bool short_logits = false;  // Returns one logit too few: a malformed output.
  // An injected failure also breaks the engine for good: Health() turns UNAVAILABLE.
  bool failure_is_fatal = false;
  double device_seconds = -1;  // BatchOutput::device_seconds of every successful batch.
};

class FakeEngine : public Engine {
 public:
  FakeEngine(int index, std::shared_ptr<EngineLog> log, std::shared_ptr<Gate> gate,
             FakeEngineOptions options = {})
      : index_(index),
        log_(std::move(log)),
        gate_(std::move(gate)),
        options_(options),
        config_(FakeConfig(options.head)) {
    config_.id2label.resize(static_cast<size_t>(options.num_labels), "label");
  }

  absl::StatusOr<BatchOutput> Run(const PackedBatch& batch, const RunOptions& options) override {
    const int recorded = log_->Record(index_, batch, options);
    if (gate_ != nullptr) gate_->Wait();
    if (absl::Status status = ValidatePackedBatch(batch, options, config_); !status.ok()) {
      log_->MarkFailed(recorded);
      return status;
    }
    if (options_.fail_every_batch || std::find(batch.token_ids.begin(), batch.token_ids.end(),
                                               kFailToken) != batch.token_ids.end()) {
      log_->MarkFailed(recorded);
      if (options_.failure_is_fatal) {
        std::lock_guard<std::mutex> lock(health_mutex_);
        health_ = absl::UnavailableError("injected device loss");
      }
      return absl::InternalError("injected engine failure");
    }
    BatchOutput output;
    output.num_sequences = batch.num_sequences();
    output.total_tokens = batch.total_tokens();
    output.num_labels = config_.num_labels();
    output.hidden_size = kHidden;
    for (int s = 0; s < batch.num_sequences(); ++s) {
      std::span<const int32_t> ids(batch.token_ids.data() + batch.cu_seqlens[s],
                                   static_cast<size_t>(batch.sequence_length(s)));
      std::span<const int32_t> types;
      if (!batch.token_type_ids.empty()) {
        types =
            std::span<const int32_t>(batch.token_type_ids.data() + batch.cu_seqlens[s], ids.size());
      }
      if (options.outputs & kSequenceLogits) {
        for (float logit : FakeLogits(ids, types)) output.sequence_logits.push_back(logit);
      }
      if (options.outputs & kEmbeddings) {
        for (float value : FakeEmbedding(ids, types)) output.embeddings.push_back(value);
      }
      if (options.outputs & kTokenLogits) {
        for (float logit : FakeTokenLogits(ids)) output.token_logits.push_back(logit);
      }
    }
    if (options_.short_logits && !output.sequence_logits.empty()) {
      output.sequence_logits.pop_back();
    }
    output.device_seconds = options_.device_seconds;
    return output;
  }

  EngineInfo Info() const override {
    EngineInfo info;
    info.backend = "fake";
    info.device = "test double";
    info.dtype = "float32";
    return info;
  }
  const ModelConfig& config() const override { return config_; }
  absl::Status Health() const override {
    std::lock_guard<std::mutex> lock(health_mutex_);
    return health_;
  }

 private:
  mutable std::mutex health_mutex_;
  absl::Status health_;
  const int index_;
  const std::shared_ptr<EngineLog> log_;
  const std::shared_ptr<Gate> gate_;
  const FakeEngineOptions options_;
  ModelConfig config_;
};

// The answers `done` delivered, per request id; counts calls so that "exactly once" is checkable.
class Answers {
 public:
  absl::AnyInvocable<void(absl::StatusOr<InferenceResult>)> Callback(int id) {
    return [this, id](absl::StatusOr<InferenceResult> result) {
      std::lock_guard<std::mutex> lock(mutex_);
      Slot& slot = slots_[id];
      ++slot.calls;
      slot.result = std::move(result);
      ++total_calls_;
      order_.push_back(id);
      changed_.notify_all();
    };
  }
  bool WaitForCalls(int count) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, kHangGuard, [&] { return total_calls_ >= count; });
  }
  int calls(int id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = slots_.find(id);
    return it == slots_.end() ? 0 : it->second.calls;
  }
  int total_calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return total_calls_;
  }
  // The request ids in the order their answers came.
  std::vector<int> order() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_;
  }
  absl::StatusOr<InferenceResult> result(int id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = slots_.find(id);
    if (it == slots_.end()) return absl::NotFoundError("no answer");
    const absl::StatusOr<InferenceResult>& stored = it->second.result;
    if (!stored.ok()) return stored.status();
    InferenceResult copy;
    copy.outputs = stored->outputs;
    copy.queue_time = stored->queue_time;
    copy.inference_time = stored->inference_time;
    copy.tokens = stored->tokens;
    return copy;
  }

 private:
  struct Slot {
    int calls = 0;
    absl::StatusOr<InferenceResult> result = absl::UnknownError("unset");
  };
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, Slot> slots_;
  int total_calls_ = 0;
  std::vector<int> order_;
};

class RecordingObserver : public BatchObserver {
 public:
  struct Batch {
    int sequences;
    int tokens;
    absl::StatusCode code;
  };
  void OnBatch(int sequences, int tokens, absl::Duration engine_time,
               const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mutex_);
    EXPECT_GE(engine_time, absl::ZeroDuration());
    batches_.push_back(Batch{sequences, tokens, status.code()});
  }
  void OnQueueDepth(int requests, int64_t sequences, int64_t tokens) override {
    std::lock_guard<std::mutex> lock(mutex_);
    last_depth_ = {requests, sequences, tokens};
    max_requests_ = std::max(max_requests_, requests);
    ++depth_reports_;
    depth_changed_.notify_all();
  }
  // Until the last reported depth is `requests` requests; false if that never happens.
  bool WaitForQueuedRequests(int requests) {
    std::unique_lock<std::mutex> lock(mutex_);
    return depth_changed_.wait_for(
        lock, kHangGuard, [&] { return !last_depth_.empty() && last_depth_[0] == requests; });
  }
  void OnDropped(absl::StatusCode code) override {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped_.push_back(code);
  }
  void OnBatchStages(absl::Duration pack, absl::Duration run, std::optional<absl::Duration> device,
                     absl::Duration deliver) override {
    std::lock_guard<std::mutex> lock(mutex_);
    EXPECT_GE(pack, absl::ZeroDuration());
    EXPECT_GE(run, absl::ZeroDuration());
    EXPECT_GE(deliver, absl::ZeroDuration());
    device_times_.push_back(device);
    ++staged_batches_;
  }

  std::vector<Batch> batches() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return batches_;
  }
  std::vector<int64_t> last_depth() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_depth_;
  }
  int max_requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return max_requests_;
  }
  int depth_reports() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return depth_reports_;
  }
  std::vector<absl::StatusCode> dropped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
  }
  int staged_batches() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return staged_batches_;
  }
  std::vector<std::optional<absl::Duration>> device_times() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return device_times_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Batch> batches_;
  std::vector<int64_t> last_depth_;
  int max_requests_ = 0;
  int depth_reports_ = 0;
  std::vector<absl::StatusCode> dropped_;
  int staged_batches_ = 0;
  std::vector<std::optional<absl::Duration>> device_times_;
  std::condition_variable depth_changed_;
};

// A sequence whose first token is `tag` (unique per test, so a batch's sequences can be traced back
// to their requests) followed by `length - 1` tokens derived from it.
SequenceInput TaggedSequence(int32_t tag, int length, bool with_types = false) {
  SequenceInput sequence;
  for (int i = 0; i < length; ++i) {
    sequence.ids.push_back(i == 0 ? tag : (tag * 31 + i * 17) % (kVocab - 2) + 1);
    if (with_types) sequence.type_ids.push_back(i % 2);
  }
  return sequence;
}

// A tagged sequence that makes the fake engine fail its batch.
SequenceInput PoisonedSequence(int32_t tag, int length) {
  SequenceInput sequence = TaggedSequence(tag, length);
  sequence.ids[1] = kFailToken;
  return sequence;
}

InferenceRequest MakeRequest(std::vector<SequenceInput> sequences,
                             Priority priority = Priority::kNormal,
                             uint32_t outputs = kSequenceLogits) {
  InferenceRequest request;
  request.sequences = std::move(sequences);
  request.priority = priority;
  request.outputs = outputs;
  return request;
}

// One scheduler over `num_engines` fake engines sharing a log. Gated engines block in Run until
// the test opens their gate; the harness opens every gate before shutting down so that a failed
// assertion cannot hang the binary.
class Harness {
 public:
  explicit Harness(const BatchSchedulerOptions& options, int num_engines = 1, bool gated = false,
                   std::shared_ptr<BatchObserver> observer = nullptr,
                   FakeEngineOptions engine_options = {}) {
    std::vector<std::unique_ptr<Engine>> engines;
    for (int e = 0; e < num_engines; ++e) {
      gates_.push_back(std::make_shared<Gate>(!gated));
      engines.push_back(std::make_unique<FakeEngine>(e, log_, gates_.back(), engine_options));
    }
    absl::StatusOr<std::unique_ptr<BatchScheduler>> created =
        BatchScheduler::Create(std::move(engines), options, std::move(observer));
    EXPECT_TRUE(created.ok()) << created.status();
    if (created.ok()) scheduler_ = *std::move(created);
  }
  ~Harness() {
    OpenAllGates();
    scheduler_.reset();
  }

  BatchScheduler& scheduler() { return *scheduler_; }
  EngineLog& log() { return *log_; }
  Answers& answers() { return answers_; }
  Gate& gate(int engine = 0) { return *gates_[engine]; }
  void OpenAllGates() {
    for (const std::shared_ptr<Gate>& gate : gates_) gate->Open();
  }

  // Remembers the inputs of request `id` for the Expect* checks. Not thread-safe.
  void Remember(int id, const InferenceRequest& request) {
    inputs_[id] = request.sequences;
    outputs_[id] = request.outputs;
  }
  // Submits with `done` recording under `id`; thread-safe.
  absl::Status SubmitRemembered(int id, InferenceRequest request) {
    request.done = answers_.Callback(id);
    return scheduler_->Submit(std::move(request));
  }
  absl::Status Submit(int id, InferenceRequest request) {
    Remember(id, request);
    return SubmitRemembered(id, std::move(request));
  }

  // Holds the (single) gated engine busy with a one-token request so that what the test submits
  // next waits in the queue.
  void OccupyEngine(int id, int32_t tag) {
    ASSERT_TRUE(Submit(id, MakeRequest({TaggedSequence(tag, 1)})).ok());
    ASSERT_TRUE(log_->WaitForBatches(1));
  }

  // The answer of `id` is OK, came exactly once and holds exactly what the engine computed for
  // each of its sequences, in order.
  void ExpectCorrectAnswer(int id) {
    EXPECT_EQ(answers_.calls(id), 1) << "request " << id;
    absl::StatusOr<InferenceResult> result = answers_.result(id);
    ASSERT_TRUE(result.ok()) << "request " << id << ": " << result.status();
    const std::vector<SequenceInput>& inputs = inputs_.at(id);
    ASSERT_EQ(result->outputs.size(), inputs.size()) << "request " << id;
    int64_t tokens = 0;
    for (size_t s = 0; s < inputs.size(); ++s) {
      const SequenceInput& input = inputs[s];
      tokens += static_cast<int64_t>(input.ids.size());
      const SequenceOutput& output = result->outputs[s];
      if (outputs_.at(id) & kSequenceLogits) {
        EXPECT_EQ(output.logits, FakeLogits(input.ids, input.type_ids))
            << "request " << id << " sequence " << s;
      } else {
        EXPECT_TRUE(output.logits.empty());
      }
      if (outputs_.at(id) & kEmbeddings) {
        EXPECT_EQ(output.embedding, FakeEmbedding(input.ids, input.type_ids))
            << "request " << id << " sequence " << s;
      } else {
        EXPECT_TRUE(output.embedding.empty());
      }
      if (outputs_.at(id) & kTokenLogits) {
        EXPECT_EQ(output.token_logits, FakeTokenLogits(input.ids))
            << "request " << id << " sequence " << s;
      } else {
        EXPECT_TRUE(output.token_logits.empty());
      }
    }
    EXPECT_EQ(result->tokens, tokens);
    EXPECT_GE(result->queue_time, absl::ZeroDuration());
    EXPECT_GE(result->inference_time, absl::ZeroDuration());
  }

  void ExpectAnswerCode(int id, absl::StatusCode code) {
    EXPECT_EQ(answers_.calls(id), 1) << "request " << id;
    EXPECT_EQ(answers_.result(id).status().code(), code) << "request " << id;
  }

 private:
  std::shared_ptr<EngineLog> log_ = std::make_shared<EngineLog>();
  std::vector<std::shared_ptr<Gate>> gates_;
  Answers answers_;
  std::map<int, std::vector<SequenceInput>> inputs_;
  std::map<int, uint32_t> outputs_;
  std::unique_ptr<BatchScheduler> scheduler_;  // Last: destroyed (shut down) first.
};

// The first token of every sequence of a batch: the tags of TaggedSequence.
std::vector<int32_t> Tags(const PackedBatch& batch) {
  std::vector<int32_t> tags;
  for (int s = 0; s < batch.num_sequences(); ++s)
    tags.push_back(batch.token_ids[batch.cu_seqlens[s]]);
  return tags;
}

// cu_seqlens well formed, no padding, within both budgets.
void ExpectWellFormed(const PackedBatch& batch, const BatchSchedulerOptions& options) {
  ASSERT_GE(batch.cu_seqlens.size(), 2u);
  EXPECT_EQ(batch.cu_seqlens.front(), 0);
  int32_t longest = 0;
  for (int s = 0; s < batch.num_sequences(); ++s) {
    EXPECT_GT(batch.sequence_length(s), 0);
    longest = std::max(longest, batch.sequence_length(s));
  }
  EXPECT_EQ(batch.cu_seqlens.back(), batch.total_tokens());
  EXPECT_EQ(batch.max_seqlen, longest);
  EXPECT_TRUE(batch.token_type_ids.empty() ||
              batch.token_type_ids.size() == batch.token_ids.size());
  EXPECT_LE(batch.total_tokens(), options.max_batch_tokens);
  EXPECT_LE(batch.num_sequences(), options.max_batch_sequences);
}

BatchSchedulerOptions Budget(int tokens, int sequences) {
  BatchSchedulerOptions options;
  options.max_batch_tokens = tokens;
  options.max_batch_sequences = sequences;
  return options;
}

TEST(BatchSchedulerTest, CreateRejectsBadOptions) {
  auto make_engines = [](int count, FakeEngineOptions second = {}) {
    std::vector<std::unique_ptr<Engine>> engines;
    auto log = std::make_shared<EngineLog>();
    for (int e = 0; e < count; ++e) {
      engines.push_back(
          std::make_unique<FakeEngine>(e, log, nullptr, e == 1 ? second : FakeEngineOptions{}));
    }
    return engines;
  };
  auto code = [](std::vector<std::unique_ptr<Engine>> list, const BatchSchedulerOptions& options) {
    return BatchScheduler::Create(std::move(list), options).status().code();
  };
  const BatchSchedulerOptions good = Budget(64, 8);
  EXPECT_EQ(code(make_engines(1), good), absl::StatusCode::kOk);
  EXPECT_EQ(code(make_engines(0), good), absl::StatusCode::kInvalidArgument);
  std::vector<std::unique_ptr<Engine>> with_null = make_engines(1);
  with_null.push_back(nullptr);
  EXPECT_EQ(code(std::move(with_null), good), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(make_engines(2, FakeEngineOptions{.num_labels = 2}), good),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(make_engines(1), Budget(0, 8)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(make_engines(1), Budget(64, 0)), absl::StatusCode::kInvalidArgument);
  BatchSchedulerOptions negative_delay = good;
  negative_delay.max_queue_delay = absl::Milliseconds(-1);
  EXPECT_EQ(code(make_engines(1), negative_delay), absl::StatusCode::kInvalidArgument);
  BatchSchedulerOptions negative_limit = good;
  negative_limit.max_queued_tokens = -1;
  EXPECT_EQ(code(make_engines(1), negative_limit), absl::StatusCode::kInvalidArgument);
  BatchSchedulerOptions negative_estimate = good;
  negative_estimate.initial_seconds_per_token = -1;
  EXPECT_EQ(code(make_engines(1), negative_estimate), absl::StatusCode::kInvalidArgument);
  BatchSchedulerOptions negative_threads = good;
  negative_threads.host_threads = -1;
  EXPECT_EQ(code(make_engines(1), negative_threads), absl::StatusCode::kInvalidArgument);
}

TEST(BatchSchedulerTest, SubmitRejectsInvalidRequestsWithoutCallingDone) {
  Harness harness(Budget(16, 4));
  auto expect_code = [&](InferenceRequest request, absl::StatusCode expected) {
    absl::Status status = harness.Submit(0, std::move(request));
    EXPECT_EQ(status.code(), expected) << status;
  };
  expect_code(MakeRequest({}), absl::StatusCode::kInvalidArgument);
  expect_code(MakeRequest({TaggedSequence(1, 2), SequenceInput{}}),
              absl::StatusCode::kInvalidArgument);
  SequenceInput mismatched = TaggedSequence(1, 3);
  mismatched.type_ids = {0, 1};
  expect_code(MakeRequest({mismatched}), absl::StatusCode::kInvalidArgument);
  expect_code(MakeRequest({TaggedSequence(1, 17)}), absl::StatusCode::kInvalidArgument);
  expect_code(MakeRequest({TaggedSequence(1, 2)}, Priority::kNormal, 0),
              absl::StatusCode::kInvalidArgument);
  expect_code(MakeRequest({TaggedSequence(1, 2)}, Priority::kNormal, kHiddenStates),
              absl::StatusCode::kInvalidArgument);
  // Token logits exist only for a token-classification head.
  expect_code(MakeRequest({TaggedSequence(1, 2)}, Priority::kNormal, kTokenLogits),
              absl::StatusCode::kFailedPrecondition);
  SequenceInput out_of_vocabulary = TaggedSequence(1, 2);
  out_of_vocabulary.ids[1] = kVocab;
  expect_code(MakeRequest({out_of_vocabulary}), absl::StatusCode::kInvalidArgument);
  // The engine's per-sequence rule (ValidateSequence), naming the request's sequence and token.
  const absl::Status second_bad =
      harness.Submit(0, MakeRequest({TaggedSequence(1, 2), out_of_vocabulary}));
  EXPECT_TRUE(absl::StrContains(second_bad.message(),
                                absl::StrCat("sequence 1 has id ", kVocab, " at token 1")))
      << second_bad;
  SequenceInput bad_type = TaggedSequence(1, 2, /*with_types=*/true);
  bad_type.type_ids[0] = 2;
  expect_code(MakeRequest({bad_type}), absl::StatusCode::kInvalidArgument);
  InferenceRequest no_callback = MakeRequest({TaggedSequence(1, 2)});
  EXPECT_EQ(harness.scheduler().Submit(std::move(no_callback)).code(),
            absl::StatusCode::kInvalidArgument);

  harness.scheduler().Shutdown();
  EXPECT_EQ(harness.answers().total_calls(), 0);
  EXPECT_TRUE(harness.log().Batches().empty());
}

TEST(BatchSchedulerTest, SubmitRejectsOutputsTheModelLacks) {
  Harness harness(Budget(16, 4), 1, false, nullptr,
                  FakeEngineOptions{.head = HeadKind::kEncoderOnly});
  EXPECT_EQ(harness.Submit(0, MakeRequest({TaggedSequence(1, 2)})).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(
      harness.Submit(1, MakeRequest({TaggedSequence(2, 2)}, Priority::kNormal, kEmbeddings)).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(1));
  EXPECT_EQ(harness.answers().calls(0), 0);
  harness.ExpectCorrectAnswer(1);
}

TEST(BatchSchedulerTest, ScattersTokenLogitsToTheirSequences) {
  // Requests of several sequences share batches and one is split over two: every sequence gets
  // its own tokens' rows.
  Harness harness(Budget(16, 8), 1, /*gated=*/true, nullptr,
                  FakeEngineOptions{.head = HeadKind::kTokenClassification});
  ASSERT_TRUE(
      harness.Submit(0, MakeRequest({TaggedSequence(1, 1)}, Priority::kNormal, kTokenLogits)).ok());
  ASSERT_TRUE(harness.log().WaitForBatches(1));
  const std::vector<std::vector<int>> lengths = {{3, 5}, {1}, {4, 6, 2}, {7}};
  int32_t tag = 200;
  for (size_t r = 0; r < lengths.size(); ++r) {
    std::vector<SequenceInput> sequences;
    for (int length : lengths[r]) sequences.push_back(TaggedSequence(tag++, length));
    ASSERT_TRUE(harness
                    .Submit(static_cast<int>(r) + 1,
                            MakeRequest(std::move(sequences), Priority::kNormal, kTokenLogits))
                    .ok());
  }
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(static_cast<int>(lengths.size()) + 1));
  for (size_t r = 0; r < lengths.size(); ++r) harness.ExpectCorrectAnswer(static_cast<int>(r) + 1);
}

TEST(BatchSchedulerTest, PacksQueuedRequestsGreedilyWithinBudgetsWithoutPadding) {
  const BatchSchedulerOptions options = Budget(16, 3);
  Harness harness(options, 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  // Sequence lengths per request; every request is normal priority, so the flattened batches are
  // the submit order, except that the rest of a request split by a full batch (the third 6, tag
  // 113) goes behind the requests queued after it.
  const std::vector<std::vector<int>> lengths = {{5},    {3, 7}, {1, 1, 1}, {8},        {16},
                                                 {2, 9}, {4},    {6, 6, 6}, {3, 2, 10}, {1}};
  std::vector<int32_t> expected_tags;
  std::map<int32_t, int> length_of_tag;
  std::map<int32_t, size_t> request_of_tag;
  int32_t tag = 100;
  for (size_t r = 0; r < lengths.size(); ++r) {
    std::vector<SequenceInput> sequences;
    for (int length : lengths[r]) {
      sequences.push_back(TaggedSequence(tag, length, /*with_types=*/r % 2 == 1));
      if (tag != 113) expected_tags.push_back(tag);  // Inserted below, where it is computed.
      length_of_tag[tag] = length;
      request_of_tag[tag] = r;
      ++tag;
    }
    ASSERT_TRUE(harness.Submit(static_cast<int>(r) + 1, MakeRequest(std::move(sequences))).ok());
  }
  expected_tags.push_back(113);  // Behind requests 9 and 10 (in the last batch, beside 10).
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(static_cast<int>(lengths.size()) + 1));

  const std::vector<RecordedBatch> batches = harness.log().Batches();
  std::vector<int32_t> computed_tags;
  for (size_t b = 1; b < batches.size(); ++b) {
    const PackedBatch& batch = batches[b].batch;
    ExpectWellFormed(batch, options);
    int sum_of_lengths = 0;
    for (int32_t batch_tag : Tags(batch)) {
      computed_tags.push_back(batch_tag);
      sum_of_lengths += length_of_tag.at(batch_tag);
    }
    EXPECT_EQ(batch.total_tokens(), sum_of_lengths);
    // Greedy: a batch stops only where the next queued sequence (of the request it split, if it
    // split one) would break a budget.
    if (computed_tags.size() < expected_tags.size()) {
      const int32_t last = computed_tags.back();
      const bool split = request_of_tag.count(last + 1) == 1 &&
                         request_of_tag.at(last + 1) == request_of_tag.at(last);
      const int next_length =
          length_of_tag.at(split ? last + 1 : expected_tags[computed_tags.size()]);
      EXPECT_TRUE(batch.num_sequences() == options.max_batch_sequences ||
                  batch.total_tokens() + next_length > options.max_batch_tokens)
          << "batch " << b << " stopped early";
    }
  }
  EXPECT_EQ(computed_tags, expected_tags);
  for (size_t r = 0; r < lengths.size(); ++r) harness.ExpectCorrectAnswer(static_cast<int>(r) + 1);
}

TEST(BatchSchedulerTest, ContinuousBatchingBatchesEverythingQueuedWhileTheEngineWasBusy) {
  BatchSchedulerOptions options = Budget(64, 8);
  options.max_queue_delay = absl::ZeroDuration();
  Harness harness(options, 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  for (int r = 1; r <= 3; ++r) {
    ASSERT_TRUE(harness.Submit(r, MakeRequest({TaggedSequence(10 + r, 4)})).ok());
  }
  EXPECT_EQ(harness.scheduler().Stats().requests, 3);
  EXPECT_EQ(harness.scheduler().Stats().sequences, 3);
  EXPECT_EQ(harness.scheduler().Stats().tokens, 12);
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(Tags(batches[1].batch), (std::vector<int32_t>{11, 12, 13}));
  for (int r = 0; r <= 3; ++r) harness.ExpectCorrectAnswer(r);
  EXPECT_EQ(harness.scheduler().Stats().requests, 0);
}

TEST(BatchSchedulerTest, QueueDelayGathersRequestsSubmittedBackToBack) {
  BatchSchedulerOptions options = Budget(64, 8);
  // Generous so that the two Submits below cannot straddle it even on a loaded machine.
  options.max_queue_delay = absl::Seconds(1);
  Harness harness(options);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 3)})).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(12, 5)})).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(2));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(Tags(batches[0].batch), (std::vector<int32_t>{11, 12}));
  harness.ExpectCorrectAnswer(1);
  harness.ExpectCorrectAnswer(2);
}

TEST(BatchSchedulerTest, FullTokenBudgetDoesNotWaitForQueueDelay) {
  BatchSchedulerOptions options = Budget(8, 8);
  options.max_queue_delay = absl::Hours(1);
  Harness harness(options);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 5)})).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(12, 3)})).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(2)) << "the full batch waited for the delay";
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(Tags(batches[0].batch), (std::vector<int32_t>{11, 12}));
  harness.ExpectCorrectAnswer(1);
  harness.ExpectCorrectAnswer(2);
}

TEST(BatchSchedulerTest, FullSequenceBudgetDoesNotWaitForQueueDelay) {
  BatchSchedulerOptions options = Budget(64, 2);
  options.max_queue_delay = absl::Hours(1);
  Harness harness(options);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 2)})).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(12, 2)})).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(2)) << "the full batch waited for the delay";
  ASSERT_EQ(harness.log().Batches().size(), 1u);
  harness.ExpectCorrectAnswer(1);
  harness.ExpectCorrectAnswer(2);
}

TEST(BatchSchedulerTest, ShutdownDoesNotWaitForQueueDelay) {
  BatchSchedulerOptions options = Budget(64, 8);
  options.max_queue_delay = absl::Hours(1);
  Harness harness(options);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 2)})).ok());
  harness.scheduler().Shutdown();  // Returns once drained, not in an hour.
  harness.ExpectCorrectAnswer(1);
}

TEST(BatchSchedulerTest, HigherPrioritiesFirstAndFifoWithinALevel) {
  Harness harness(Budget(64, 4), 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  const std::vector<std::pair<int32_t, Priority>> submitted = {
      {11, Priority::kLow}, {21, Priority::kNormal}, {31, Priority::kHigh},
      {12, Priority::kLow}, {22, Priority::kNormal}, {32, Priority::kHigh}};
  for (const auto& [tag, priority] : submitted) {
    ASSERT_TRUE(harness.Submit(tag, MakeRequest({TaggedSequence(tag, 2)}, priority)).ok());
  }
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(7));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 3u);
  // A batch is filled from the highest level down, so one batch may mix levels.
  EXPECT_EQ(Tags(batches[1].batch), (std::vector<int32_t>{31, 32, 21, 22}));
  EXPECT_EQ(Tags(batches[2].batch), (std::vector<int32_t>{11, 12}));
  for (const auto& [tag, priority] : submitted) harness.ExpectCorrectAnswer(tag);
}

TEST(BatchSchedulerTest, SplitsARequestLargerThanTheTokenBudget) {
  const BatchSchedulerOptions options = Budget(10, 8);
  Harness harness(options, 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  std::vector<SequenceInput> large;
  for (int32_t tag = 11; tag <= 15; ++tag) large.push_back(TaggedSequence(tag, 4));
  ASSERT_TRUE(harness.Submit(1, MakeRequest(std::move(large))).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 2)})).ok());
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(3));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(Tags(batches[1].batch), (std::vector<int32_t>{11, 12}));
  // The rest of the split request queues behind the later request, which goes first.
  EXPECT_EQ(Tags(batches[2].batch), (std::vector<int32_t>{21, 13, 14}));
  EXPECT_EQ(Tags(batches[3].batch), (std::vector<int32_t>{15}));
  for (const RecordedBatch& batch : batches) ExpectWellFormed(batch.batch, options);
  harness.ExpectCorrectAnswer(1);  // Once, all five outputs, in the original order.
  harness.ExpectCorrectAnswer(2);
}

// One large request does not hold up the requests queued behind it until all of its parts are
// done: they get into the batch after its first part, and are answered before it.
TEST(BatchSchedulerTest, SplitRequestTakesTurnsWithTheRequestsBehindIt) {
  BatchSchedulerOptions options = Budget(8, 8);
  options.host_threads = 1;  // One host thread answers in batch order.
  Harness harness(options, 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  std::vector<SequenceInput> large;
  for (int32_t tag = 11; tag <= 16; ++tag) large.push_back(TaggedSequence(tag, 4));
  ASSERT_TRUE(harness.Submit(1, MakeRequest(std::move(large))).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 2)})).ok());
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 2)})).ok());
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 5u);
  EXPECT_EQ(Tags(batches[1].batch), (std::vector<int32_t>{11, 12}));
  // The small requests fill the second batch, the large one's next part what is left of it.
  EXPECT_EQ(Tags(batches[2].batch), (std::vector<int32_t>{21, 31, 13}));
  EXPECT_EQ(Tags(batches[3].batch), (std::vector<int32_t>{14, 15}));
  EXPECT_EQ(Tags(batches[4].batch), (std::vector<int32_t>{16}));
  for (const RecordedBatch& batch : batches) ExpectWellFormed(batch.batch, options);
  EXPECT_EQ(harness.answers().order(), (std::vector<int>{0, 2, 3, 1}));
  for (int id = 0; id <= 3; ++id) harness.ExpectCorrectAnswer(id);
}

// Two requests larger than the budget take turns, one part each (round robin).
TEST(BatchSchedulerTest, SplitRequestsTakeTurnsPartByPart) {
  Harness harness(Budget(8, 8), 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(harness
                  .Submit(1, MakeRequest({TaggedSequence(11, 8), TaggedSequence(12, 8),
                                          TaggedSequence(13, 8)}))
                  .ok());
  ASSERT_TRUE(harness
                  .Submit(2, MakeRequest({TaggedSequence(21, 8), TaggedSequence(22, 8),
                                          TaggedSequence(23, 8)}))
                  .ok());
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(3));
  std::vector<int32_t> computed;
  for (const RecordedBatch& batch : harness.log().Batches()) {
    ASSERT_EQ(batch.batch.num_sequences(), 1);
    computed.push_back(Tags(batch.batch)[0]);
  }
  EXPECT_EQ(computed, (std::vector<int32_t>{1, 11, 21, 12, 22, 13, 23}));
  for (int id = 0; id <= 2; ++id) harness.ExpectCorrectAnswer(id);
}

// When a part of a split request fails, its rest is removed from wherever it waits in its level
// (here behind two later requests), never computed, and the totals stay right.
TEST(BatchSchedulerTest, FailedSplitRequestsRestIsRemovedFromBehindLaterRequests) {
  auto observer = std::make_shared<RecordingObserver>();
  Harness harness(Budget(8, 8), 1, /*gated=*/true, observer);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(harness
                  .Submit(1, MakeRequest({PoisonedSequence(11, 4), TaggedSequence(12, 4),
                                          TaggedSequence(13, 4)}))
                  .ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 2)})).ok());
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 2)})).ok());
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  harness.scheduler().Shutdown();
  harness.ExpectAnswerCode(1, absl::StatusCode::kInternal);
  harness.ExpectCorrectAnswer(2);
  harness.ExpectCorrectAnswer(3);
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(Tags(batches[1].batch), (std::vector<int32_t>{11, 12}));
  EXPECT_TRUE(batches[1].failed);
  EXPECT_EQ(Tags(batches[2].batch), (std::vector<int32_t>{21, 31}));
  EXPECT_EQ(observer->last_depth(), (std::vector<int64_t>{0, 0, 0}));
}

// With an estimate of one second per token, Submit refuses what would end after its deadline:
// the tokens queued at its priority and above, plus its own, against the time it has.
TEST(BatchSchedulerTest, SubmitRefusesARequestThatWouldEndAfterItsDeadline) {
  BatchSchedulerOptions options = Budget(64, 8);
  options.initial_seconds_per_token = 1.0;
  Harness harness(options, 1, /*gated=*/true);
  EXPECT_EQ(harness.scheduler().SecondsPerToken(), 1.0);
  harness.OccupyEngine(0, 1);  // In the engine, held: no batch has ended yet.
  auto with_deadline = [](std::vector<SequenceInput> sequences, Priority priority,
                          absl::Duration time_left) {
    InferenceRequest request = MakeRequest(std::move(sequences), priority);
    request.deadline = absl::Now() + time_left;
    return request;
  };
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 10)})).ok());  // No deadline.
  // The running token, 10 queued + 5 tokens: 16 s (20 s with the headroom) against an hour.
  ASSERT_TRUE(
      harness.Submit(2, with_deadline({TaggedSequence(21, 5)}, Priority::kNormal, absl::Hours(1)))
          .ok());
  // 1 + 15 + 5 tokens: 21 s against 10 s.
  const absl::Status refused = harness.Submit(
      3, with_deadline({TaggedSequence(31, 5)}, Priority::kNormal, absl::Seconds(10)));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "expected wait 21s")) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "retry later")) << refused;
  // Nothing queued at high priority, the running token: 4 s (5 s) against 10 s.
  ASSERT_TRUE(
      harness.Submit(4, with_deadline({TaggedSequence(41, 3)}, Priority::kHigh, absl::Seconds(10)))
          .ok());
  // The running token, 3 queued at high priority and 3 tokens: 7 s, within 8 s but not with the
  // headroom (8.75 s): refused.
  EXPECT_EQ(
      harness.Submit(6, with_deadline({TaggedSequence(61, 3)}, Priority::kHigh, absl::Seconds(8)))
          .code(),
      absl::StatusCode::kResourceExhausted);
  // Everything queued is ahead of a low one: 1 + 18 + 5 tokens against 20 s.
  EXPECT_EQ(
      harness.Submit(5, with_deadline({TaggedSequence(51, 5)}, Priority::kLow, absl::Seconds(20)))
          .code(),
      absl::StatusCode::kResourceExhausted);
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  harness.scheduler().Shutdown();
  EXPECT_EQ(harness.answers().calls(3), 0);
  EXPECT_EQ(harness.answers().calls(5), 0);
  EXPECT_EQ(harness.answers().calls(6), 0);
  for (int id : {0, 1, 2, 4}) harness.ExpectCorrectAnswer(id);
}

// Before any batch has run there is no estimate, and a deadline alone refuses nothing; the
// estimate comes from the batches run.
TEST(BatchSchedulerTest, WithoutAnEstimateSubmitAdmitsWhateverTheDeadline) {
  auto tight = [] {
    std::vector<SequenceInput> sequences;
    for (int32_t tag = 11; tag <= 14; ++tag) sequences.push_back(TaggedSequence(tag, 25));
    InferenceRequest request = MakeRequest(std::move(sequences));
    request.deadline = absl::Now() + absl::Minutes(1);
    return request;
  };
  BatchSchedulerOptions estimated = Budget(64, 8);
  estimated.initial_seconds_per_token = 1.0;
  Harness refusing(estimated);
  EXPECT_EQ(refusing.Submit(1, tight()).code(), absl::StatusCode::kResourceExhausted);

  Harness harness(Budget(64, 8));
  EXPECT_EQ(harness.scheduler().SecondsPerToken(), 0.0);
  ASSERT_TRUE(harness.Submit(1, tight()).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(1));
  harness.ExpectCorrectAnswer(1);
  harness.scheduler().Shutdown();
  EXPECT_GT(harness.scheduler().SecondsPerToken(), 0.0);
}

// A request admitted in time can still fall behind (here: a high-priority request arrives after
// it); when even the batch being cut would end after its deadline, it is answered
// DEADLINE_EXCEEDED and never computed.
TEST(BatchSchedulerTest, RequestThatCannotMeetItsDeadlineIsDroppedWhenItsBatchIsCut) {
  auto observer = std::make_shared<RecordingObserver>();
  BatchSchedulerOptions options = Budget(64, 8);
  options.initial_seconds_per_token = 1.0;
  Harness harness(options, 1, /*gated=*/true, observer);
  harness.OccupyEngine(0, 1);
  // The running token and 5 tokens: 6 s (7.5 s with the headroom) against 8 s, admitted.
  InferenceRequest low = MakeRequest({TaggedSequence(11, 5)}, Priority::kLow);
  low.deadline = absl::Now() + absl::Seconds(8);
  ASSERT_TRUE(harness.Submit(1, std::move(low)).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 5)}, Priority::kHigh)).ok());
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 2)}, Priority::kLow)).ok());
  // The one-token batch that ends now barely moves the estimate: the next batch, the high request
  // and then the low one, takes about 10 s.
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  harness.scheduler().Shutdown();
  harness.ExpectAnswerCode(1, absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(harness.answers().result(1).status().message(), "deadline"));
  harness.ExpectCorrectAnswer(2);
  harness.ExpectCorrectAnswer(3);
  for (const RecordedBatch& batch : harness.log().Batches()) {
    const std::vector<int32_t> tags = Tags(batch.batch);
    EXPECT_EQ(std::count(tags.begin(), tags.end(), 11), 0) << "a request too late was computed";
  }
  EXPECT_EQ(observer->dropped(),
            (std::vector<absl::StatusCode>{absl::StatusCode::kDeadlineExceeded}));
}

TEST(BatchSchedulerTest, SplitsARequestWithMoreSequencesThanTheSequenceBudget) {
  Harness harness(Budget(64, 2), 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  std::vector<SequenceInput> many;
  for (int32_t tag = 11; tag <= 15; ++tag) many.push_back(TaggedSequence(tag, 1));
  ASSERT_TRUE(
      harness
          .Submit(1, MakeRequest(std::move(many), Priority::kNormal, kSequenceLogits | kEmbeddings))
          .ok());
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(2));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(Tags(batches[1].batch), (std::vector<int32_t>{11, 12}));
  EXPECT_EQ(Tags(batches[2].batch), (std::vector<int32_t>{13, 14}));
  EXPECT_EQ(Tags(batches[3].batch), (std::vector<int32_t>{15}));
  harness.ExpectCorrectAnswer(1);
}

TEST(BatchSchedulerTest, DeadlinePassedWhileQueuedIsAnsweredWithoutCompute) {
  auto observer = std::make_shared<RecordingObserver>();
  Harness harness(Budget(64, 8), 1, /*gated=*/true, observer);
  harness.OccupyEngine(0, 1);
  InferenceRequest late = MakeRequest({TaggedSequence(11, 3)});
  late.deadline = absl::Now() + absl::Milliseconds(20);
  const absl::Time deadline = late.deadline;
  ASSERT_TRUE(harness.Submit(1, std::move(late)).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(12, 3)})).ok());
  // Let the deadline pass while the request waits behind the busy engine.
  while (absl::Now() <= deadline) absl::SleepFor(absl::Milliseconds(5));
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(3));
  harness.ExpectAnswerCode(1, absl::StatusCode::kDeadlineExceeded);
  harness.ExpectCorrectAnswer(2);
  for (const RecordedBatch& batch : harness.log().Batches()) {
    const std::vector<int32_t> tags = Tags(batch.batch);
    EXPECT_EQ(std::count(tags.begin(), tags.end(), 11), 0) << "expired request was computed";
  }
  harness.scheduler().Shutdown();
  EXPECT_EQ(observer->dropped(),
            (std::vector<absl::StatusCode>{absl::StatusCode::kDeadlineExceeded}));
}

TEST(BatchSchedulerTest, CancelledWhileQueuedIsAnsweredWithoutCompute) {
  auto observer = std::make_shared<RecordingObserver>();
  Harness harness(Budget(64, 8), 1, /*gated=*/true, observer);
  harness.OccupyEngine(0, 1);
  auto flag = std::make_shared<CancellationFlag>(false);
  InferenceRequest cancelled = MakeRequest({TaggedSequence(11, 3)});
  cancelled.cancelled = flag;
  ASSERT_TRUE(harness.Submit(1, std::move(cancelled)).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(12, 3)})).ok());
  EXPECT_EQ(harness.scheduler().CancelledQueuedRequests(), 0);
  flag->store(true);  // The client goes away while its request waits.
  EXPECT_EQ(harness.scheduler().CancelledQueuedRequests(), 1);
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(3));
  EXPECT_EQ(harness.scheduler().CancelledQueuedRequests(), 0) << "dropped from the queue";
  harness.ExpectAnswerCode(1, absl::StatusCode::kCancelled);
  harness.ExpectCorrectAnswer(2);
  for (const RecordedBatch& batch : harness.log().Batches()) {
    const std::vector<int32_t> tags = Tags(batch.batch);
    EXPECT_EQ(std::count(tags.begin(), tags.end(), 11), 0) << "cancelled request was computed";
  }
  harness.scheduler().Shutdown();
  EXPECT_EQ(observer->dropped(), (std::vector<absl::StatusCode>{absl::StatusCode::kCancelled}));
}

TEST(BatchSchedulerTest, EngineErrorFailsOnlyTheRequestsOfItsBatch) {
  auto observer = std::make_shared<RecordingObserver>();
  const BatchSchedulerOptions options = Budget(8, 8);
  Harness harness(options, 1, /*gated=*/true, observer);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 2)})).ok());
  // Three sequences of 6 tokens: the first shares a batch with request 1 and fails it; the other
  // two are still queued then and must be dropped.
  const SequenceInput poisoned = PoisonedSequence(21, 6);
  ASSERT_TRUE(
      harness.Submit(2, MakeRequest({poisoned, TaggedSequence(22, 6), TaggedSequence(23, 6)}))
          .ok());
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 2)})).ok());
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  harness.ExpectAnswerCode(1, absl::StatusCode::kInternal);
  harness.ExpectAnswerCode(2, absl::StatusCode::kInternal);
  harness.ExpectCorrectAnswer(3);

  // The scheduler keeps serving.
  ASSERT_TRUE(harness.Submit(4, MakeRequest({TaggedSequence(41, 2)})).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(5));
  harness.ExpectCorrectAnswer(4);

  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(Tags(batches[1].batch), (std::vector<int32_t>{11, 21}));
  EXPECT_TRUE(batches[1].failed);
  EXPECT_EQ(Tags(batches[2].batch), (std::vector<int32_t>{31}));
  EXPECT_EQ(Tags(batches[3].batch), (std::vector<int32_t>{41}));
  harness.scheduler().Shutdown();
  const std::vector<RecordingObserver::Batch> observed = observer->batches();
  ASSERT_EQ(observed.size(), 4u);
  EXPECT_EQ(observed[1].code, absl::StatusCode::kInternal);
  EXPECT_EQ(observed[2].code, absl::StatusCode::kOk);
  EXPECT_TRUE(observer->dropped().empty());
  EXPECT_EQ(observer->last_depth(), (std::vector<int64_t>{0, 0, 0}));
}

// An engine that fails for good stops getting batches; its healthy sibling serves the rest.
TEST(BatchSchedulerTest, UnhealthyEngineStopsTakingBatchesWhileAnotherServes) {
  FakeEngineOptions engine_options;
  engine_options.failure_is_fatal = true;
  Harness harness(Budget(8, 8), 2, /*gated=*/true, nullptr, engine_options);
  // Engine 0 takes the poisoned request and dies; engine 1 is held busy meanwhile.
  const SequenceInput poisoned = PoisonedSequence(11, 3);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({poisoned})).ok());
  ASSERT_TRUE(harness.log().WaitForBatches(1));
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 2)})).ok());
  ASSERT_TRUE(harness.log().WaitForBatches(2));
  const int poisoned_engine = harness.log().Batches()[0].engine;
  harness.gate(poisoned_engine).Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(1));
  harness.ExpectAnswerCode(1, absl::StatusCode::kInternal);
  // Queued while the healthy engine is still busy: only it may run them.
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 2)})).ok());
  ASSERT_TRUE(harness.Submit(4, MakeRequest({TaggedSequence(41, 2)})).ok());
  harness.OpenAllGates();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  harness.ExpectCorrectAnswer(2);
  harness.ExpectCorrectAnswer(3);
  harness.ExpectCorrectAnswer(4);
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  for (size_t i = 1; i < batches.size(); ++i) {
    EXPECT_NE(batches[i].engine, poisoned_engine) << "a failed engine got batch " << i;
  }
}

// When the last engine fails for good, queued and new requests get UNAVAILABLE, never a hang.
TEST(BatchSchedulerTest, NoHealthyEngineLeftAnswersUnavailable) {
  FakeEngineOptions engine_options;
  engine_options.failure_is_fatal = true;
  Harness harness(Budget(8, 8), 1, /*gated=*/true, nullptr, engine_options);
  const SequenceInput poisoned = PoisonedSequence(11, 3);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({poisoned})).ok());
  ASSERT_TRUE(harness.log().WaitForBatches(1));
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 2)})).ok());
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(2));
  harness.ExpectAnswerCode(1, absl::StatusCode::kInternal);
  harness.ExpectAnswerCode(2, absl::StatusCode::kUnavailable);
  const absl::Status refused = harness.Submit(3, MakeRequest({TaggedSequence(31, 2)}));
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_EQ(harness.log().Batches().size(), 1u) << "the failed engine ran again";
}

// A request split over two engines: when one part fails, the request is answered only after its
// other part (still running) ends, once, with the error; its queued rest is never computed.
TEST(BatchSchedulerTest, FailedPartOfASplitRequestWaitsForItsPartInFlight) {
  Harness harness(Budget(64, 1), 2, /*gated=*/true);
  const SequenceInput poisoned = PoisonedSequence(12, 3);
  ASSERT_TRUE(
      harness.Submit(1, MakeRequest({TaggedSequence(11, 3), poisoned, TaggedSequence(13, 3)}))
          .ok());
  ASSERT_TRUE(harness.log().WaitForBatches(2));  // Sequences 11 and 12, one on each engine.
  std::vector<RecordedBatch> batches = harness.log().Batches();
  const int failing_engine =
      Tags(batches[0].batch)[0] == 12 ? batches[0].engine : batches[1].engine;
  harness.gate(failing_engine).Open();
  // Request 2 can only run after the failing engine finished with request 1's part (the other
  // engine is held), so once it is answered, that failure has been handled.
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 2)})).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(1));
  harness.ExpectCorrectAnswer(2);
  EXPECT_EQ(harness.answers().calls(1), 0) << "answered while a part was still running";
  harness.gate(1 - failing_engine).Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(2));
  harness.ExpectAnswerCode(1, absl::StatusCode::kInternal);
  harness.scheduler().Shutdown();
  for (const RecordedBatch& batch : harness.log().Batches()) {
    EXPECT_NE(Tags(batch.batch)[0], 13) << "the rest of a failed request was computed";
  }
}

// The same for cancellation: the queued rest is dropped at the head of the queue, and the request
// is answered CANCELLED once its running part ends.
TEST(BatchSchedulerTest, CancellingASplitRequestDropsItsQueuedRest) {
  auto observer = std::make_shared<RecordingObserver>();
  Harness harness(Budget(64, 1), 2, /*gated=*/true, observer);
  auto flag = std::make_shared<CancellationFlag>(false);
  InferenceRequest split =
      MakeRequest({TaggedSequence(11, 3), TaggedSequence(12, 3), TaggedSequence(13, 3)});
  split.cancelled = flag;
  ASSERT_TRUE(harness.Submit(1, std::move(split)).ok());
  ASSERT_TRUE(harness.log().WaitForBatches(2));
  flag->store(true);
  harness.gate(0).Open();
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 2)})).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(1));
  harness.ExpectCorrectAnswer(2);
  EXPECT_EQ(harness.answers().calls(1), 0) << "answered while a part was still running";
  harness.gate(1).Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(2));
  harness.ExpectAnswerCode(1, absl::StatusCode::kCancelled);
  harness.scheduler().Shutdown();
  for (const RecordedBatch& batch : harness.log().Batches()) {
    EXPECT_NE(Tags(batch.batch)[0], 13) << "the rest of a cancelled request was computed";
  }
  EXPECT_EQ(observer->dropped(), (std::vector<absl::StatusCode>{absl::StatusCode::kCancelled}));
}

TEST(BatchSchedulerTest, MalformedEngineOutputFailsTheBatch) {
  Harness harness(Budget(64, 8), 1, false, nullptr, FakeEngineOptions{.short_logits = true});
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 2)})).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(1));
  harness.ExpectAnswerCode(1, absl::StatusCode::kInternal);
}

TEST(BatchSchedulerTest, AdmissionLimitOnRequests) {
  BatchSchedulerOptions options = Budget(64, 8);
  options.max_queued_requests = 2;
  Harness harness(options, 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);  // Taken from the queue: it holds nothing now.
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 2)})).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(12, 2)})).ok());
  const absl::Status refused = harness.Submit(3, MakeRequest({TaggedSequence(13, 2)}));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "backoff")) << refused;
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(3));
  EXPECT_EQ(harness.answers().calls(3), 0);
  // Room again once the queue drained.
  ASSERT_TRUE(harness.Submit(4, MakeRequest({TaggedSequence(14, 2)})).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  harness.scheduler().Shutdown();
  EXPECT_EQ(harness.answers().calls(3), 0);
  for (int id : {0, 1, 2, 4}) harness.ExpectCorrectAnswer(id);
}

TEST(BatchSchedulerTest, AdmissionLimitOnSequences) {
  BatchSchedulerOptions options = Budget(64, 8);
  options.max_queued_requests = 0;
  options.max_queued_sequences = 3;
  Harness harness(options, 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 2), TaggedSequence(12, 2)})).ok());
  EXPECT_EQ(harness.Submit(2, MakeRequest({TaggedSequence(21, 2), TaggedSequence(22, 2)})).code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 2)})).ok());
  std::vector<SequenceInput> too_many;
  for (int32_t tag = 41; tag <= 44; ++tag) too_many.push_back(TaggedSequence(tag, 1));
  // Never admissible, so retrying would not help.
  EXPECT_EQ(harness.Submit(4, MakeRequest(std::move(too_many))).code(),
            absl::StatusCode::kInvalidArgument);
  harness.gate().Open();
  harness.scheduler().Shutdown();
  EXPECT_EQ(harness.answers().calls(2), 0);
  EXPECT_EQ(harness.answers().calls(4), 0);
  for (int id : {0, 1, 3}) harness.ExpectCorrectAnswer(id);
}

TEST(BatchSchedulerTest, AdmissionLimitOnTokens) {
  BatchSchedulerOptions options = Budget(64, 8);
  options.max_queued_requests = 0;
  options.max_queued_tokens = 10;
  Harness harness(options, 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 6)})).ok());
  EXPECT_EQ(harness.Submit(2, MakeRequest({TaggedSequence(21, 5)})).code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 4)})).ok());
  EXPECT_EQ(harness.Submit(4, MakeRequest({TaggedSequence(41, 11)})).code(),
            absl::StatusCode::kInvalidArgument);
  harness.gate().Open();
  harness.scheduler().Shutdown();
  EXPECT_EQ(harness.answers().calls(2), 0);
  EXPECT_EQ(harness.answers().calls(4), 0);
  for (int id : {0, 1, 3}) harness.ExpectCorrectAnswer(id);
}

TEST(BatchSchedulerTest, ShutdownAnswersEveryAcceptedRequestThenRefusesNewOnes) {
  BatchSchedulerOptions options = Budget(8, 2);
  options.max_queued_requests = 0;  // The probes below may be many.
  Harness harness(options, 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  for (int r = 1; r <= 5; ++r) {
    ASSERT_TRUE(harness.Submit(r, MakeRequest({TaggedSequence(10 + r, 3)})).ok());
  }
  std::thread stopper([&] { harness.scheduler().Shutdown(); });
  // Probes are accepted until Shutdown has begun (the engine is still held, so it cannot have
  // finished); every accepted one must still be answered.
  int probes = 0;
  absl::Status status;
  while ((status = harness.Submit(100 + probes, MakeRequest({TaggedSequence(100, 2)}))).ok()) {
    ++probes;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  harness.gate().Open();
  stopper.join();
  EXPECT_EQ(harness.answers().total_calls(), 6 + probes);
  for (int r = 0; r <= 5; ++r) harness.ExpectCorrectAnswer(r);
  for (int p = 0; p < probes; ++p) harness.ExpectCorrectAnswer(100 + p);
  EXPECT_EQ(harness.answers().calls(100 + probes), 0);
  EXPECT_EQ(harness.Submit(-1, MakeRequest({TaggedSequence(99, 2)})).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(harness.scheduler().WarmUp(4, kSequenceLogits).code(), absl::StatusCode::kUnavailable);
  harness.scheduler().Shutdown();  // Idempotent.
  EXPECT_EQ(harness.answers().calls(-1), 0);
  EXPECT_EQ(harness.answers().total_calls(), 6 + probes);
}

// A drain whose grace period ended: the queue is answered with the given status on the calling
// thread, never computed; the batch on the engine ends as usual, and the split request it holds a
// part of gets the status once that part ends; Submit refuses from then on.
TEST(BatchSchedulerTest, AbortQueuedAnswersTheQueueWithoutComputeAndLetsTheEngineFinish) {
  auto observer = std::make_shared<RecordingObserver>();
  Harness harness(Budget(8, 1), 1, /*gated=*/true, observer);
  // Request 1 is split: its first sequence is held on the engine, its second waits in the queue.
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 3), TaggedSequence(12, 3)})).ok());
  ASSERT_TRUE(harness.log().WaitForBatches(1));
  for (int r = 2; r <= 4; ++r) {
    ASSERT_TRUE(harness.Submit(r, MakeRequest({TaggedSequence(10 * r + 1, 3)})).ok());
  }
  EXPECT_EQ(harness.scheduler().AbortQueued(absl::UnavailableError("shutting down")), 4);
  EXPECT_EQ(harness.answers().total_calls(), 3);
  for (int r = 2; r <= 4; ++r) harness.ExpectAnswerCode(r, absl::StatusCode::kUnavailable);
  EXPECT_EQ(harness.answers().calls(1), 0) << "answered while a part was still running";
  EXPECT_EQ(harness.scheduler().Stats().requests, 0);
  EXPECT_EQ(harness.Submit(5, MakeRequest({TaggedSequence(51, 2)})).code(),
            absl::StatusCode::kUnavailable);

  harness.gate().Open();
  harness.scheduler().Shutdown();
  harness.ExpectAnswerCode(1, absl::StatusCode::kUnavailable);
  EXPECT_EQ(harness.answers().total_calls(), 4);
  EXPECT_EQ(harness.log().Batches().size(), 1u) << "a queued request was computed";
  EXPECT_EQ(observer->dropped(), std::vector<absl::StatusCode>(4, absl::StatusCode::kUnavailable));
}

TEST(BatchSchedulerTest, EachEngineRunsBatchesInParallel) {
  constexpr int kEngines = 3;
  Harness harness(Budget(64, 1), kEngines, /*gated=*/true);
  for (int r = 0; r < kEngines; ++r) {
    ASSERT_TRUE(harness.Submit(r, MakeRequest({TaggedSequence(10 + r, 2)})).ok());
  }
  // Every engine is held inside Run, so three batches in flight means three engines busy at once.
  ASSERT_TRUE(harness.log().WaitForBatches(kEngines));
  std::set<int> engines;
  for (const RecordedBatch& batch : harness.log().Batches()) engines.insert(batch.engine);
  EXPECT_EQ(engines, (std::set<int>{0, 1, 2}));
  harness.OpenAllGates();
  ASSERT_TRUE(harness.answers().WaitForCalls(kEngines));
  for (int r = 0; r < kEngines; ++r) harness.ExpectCorrectAnswer(r);
  EXPECT_EQ(harness.scheduler().num_engines(), kEngines);
  EXPECT_EQ(harness.scheduler().engine(2).Info().backend, "fake");
}

// Under continuous batching, engines idle at the same time divide what is queued: a request of
// four sequences, queued while both engines wait, runs as two batches on two engines at once (half
// the tokens each) rather than whole on one while the other waits; it is answered once, whole.
TEST(BatchSchedulerTest, IdleEnginesDivideWhatIsQueued) {
  Harness harness(Budget(64, 8), 2, /*gated=*/true);
  ASSERT_TRUE(harness
                  .Submit(1, MakeRequest({TaggedSequence(11, 5), TaggedSequence(12, 5),
                                          TaggedSequence(13, 5), TaggedSequence(14, 5)}))
                  .ok());
  // Both engines are held inside Run: two batches in flight means both took a share.
  ASSERT_TRUE(harness.log().WaitForBatches(2));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_NE(batches[0].engine, batches[1].engine);
  // The engines may enter Run in either order.
  std::set<std::vector<int32_t>> shares = {Tags(batches[0].batch), Tags(batches[1].batch)};
  EXPECT_EQ(shares, (std::set<std::vector<int32_t>>{{11, 12}, {13, 14}}));
  harness.OpenAllGates();
  ASSERT_TRUE(harness.answers().WaitForCalls(1));
  harness.ExpectCorrectAnswer(1);
}

// With a queue delay the rest of a divided queue would wait for its own delay: a due batch takes
// everything queued, idle engines or not.
TEST(BatchSchedulerTest, IdleEnginesDoNotDivideUnderAQueueDelay) {
  BatchSchedulerOptions options = Budget(64, 8);
  options.max_queue_delay = absl::Milliseconds(1);
  Harness harness(options, 2);
  ASSERT_TRUE(harness
                  .Submit(1, MakeRequest({TaggedSequence(11, 5), TaggedSequence(12, 5),
                                          TaggedSequence(13, 5), TaggedSequence(14, 5)}))
                  .ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(1));
  harness.scheduler().Shutdown();
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(Tags(batches[0].batch), (std::vector<int32_t>{11, 12, 13, 14}));
  harness.ExpectCorrectAnswer(1);
}

TEST(BatchSchedulerTest, RunOptionsAreTheUnionOfTheBatchsOutputs) {
  BatchSchedulerOptions options = Budget(64, 8);
  options.run_options.pooling = PoolingMode::kCls;
  options.run_options.normalize = true;  // The scheduler never normalizes.
  Harness harness(options, 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(
      harness.Submit(1, MakeRequest({TaggedSequence(11, 3)}, Priority::kNormal, kSequenceLogits))
          .ok());
  ASSERT_TRUE(harness
                  .Submit(2, MakeRequest({TaggedSequence(12, 4, /*with_types=*/true)},
                                         Priority::kNormal, kEmbeddings))
                  .ok());
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(3));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].options.outputs, kSequenceLogits);
  EXPECT_EQ(batches[1].options.outputs, kSequenceLogits | kEmbeddings);
  for (const RecordedBatch& batch : batches) {
    EXPECT_EQ(batch.options.pooling, PoolingMode::kCls);
    EXPECT_FALSE(batch.options.normalize);
  }
  EXPECT_FALSE(harness.scheduler().options().run_options.normalize);
  // Request 1 gets logits only and request 2 an embedding only, each its own.
  harness.ExpectCorrectAnswer(1);
  harness.ExpectCorrectAnswer(2);
}

TEST(BatchSchedulerTest, WarmUpRunsAFullBudgetBatchOnEveryEngine) {
  BatchSchedulerOptions options = Budget(10, 8);
  Harness harness(options, 2);
  ASSERT_TRUE(harness.scheduler().WarmUp(4, kSequenceLogits | kEmbeddings).ok());
  std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 2u);
  std::set<int> engines;
  for (const RecordedBatch& batch : batches) {
    engines.insert(batch.engine);
    EXPECT_EQ(batch.batch.cu_seqlens, (std::vector<int32_t>{0, 4, 8, 10}));
    EXPECT_EQ(batch.options.outputs, kSequenceLogits | kEmbeddings);
    EXPECT_FALSE(batch.options.normalize);
  }
  EXPECT_EQ(engines, (std::set<int>{0, 1}));
  // Longer than the budget: one sequence of the whole budget.
  ASSERT_TRUE(harness.scheduler().WarmUp(25, kSequenceLogits).ok());
  batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[3].batch.cu_seqlens, (std::vector<int32_t>{0, 10}));
  EXPECT_EQ(harness.scheduler().WarmUp(0, kSequenceLogits).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BatchSchedulerTest, WarmUpCapsSequencesAtTheSequenceBudget) {
  Harness harness(Budget(10, 2), 1);
  ASSERT_TRUE(harness.scheduler().WarmUp(3, kSequenceLogits).ok());
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].batch.cu_seqlens, (std::vector<int32_t>{0, 3, 6}));
}

TEST(BatchSchedulerTest, WarmUpReportsAnEngineFailure) {
  Harness harness(Budget(10, 8), 1, false, nullptr, FakeEngineOptions{.fail_every_batch = true});
  const absl::Status status = harness.scheduler().WarmUp(4, kSequenceLogits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "engine 0")) << status;
  // Outputs the model lacks fail the same way, at boot.
  Harness encoder(Budget(10, 8), 1, false, nullptr,
                  FakeEngineOptions{.head = HeadKind::kEncoderOnly});
  EXPECT_EQ(encoder.scheduler().WarmUp(4, kSequenceLogits).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(BatchSchedulerTest, ObserverSeesBatchesAndQueueDepth) {
  auto observer = std::make_shared<RecordingObserver>();
  Harness harness(Budget(64, 8), 1, /*gated=*/true, observer);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 3), TaggedSequence(12, 5)})).ok());
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 4)})).ok());
  EXPECT_EQ(observer->last_depth(), (std::vector<int64_t>{2, 3, 12}));
  harness.gate().Open();
  harness.scheduler().Shutdown();
  EXPECT_EQ(observer->max_requests(), 2);
  EXPECT_EQ(observer->last_depth(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_GE(observer->depth_reports(), 5);  // Three submits and two takes.
  const std::vector<RecordingObserver::Batch> observed = observer->batches();
  ASSERT_EQ(observed.size(), 2u);
  EXPECT_EQ(observed[0].sequences, 1);
  EXPECT_EQ(observed[0].tokens, 1);
  EXPECT_EQ(observed[1].sequences, 3);
  EXPECT_EQ(observed[1].tokens, 12);
  EXPECT_EQ(observed[1].code, absl::StatusCode::kOk);
  EXPECT_TRUE(observer->dropped().empty());
  EXPECT_EQ(observer->staged_batches(), 2);  // Reported once each batch was answered.
  // The fake engine measures no device time.
  EXPECT_EQ(observer->device_times(),
            (std::vector<std::optional<absl::Duration>>{std::nullopt, std::nullopt}));
}

// An engine that measures its device span (BatchOutput::device_seconds) has it reported as a
// stage of the batch, beside the run it is part of; a failed batch has none.
TEST(BatchSchedulerTest, ObserverSeesTheEnginesDeviceTime) {
  auto observer = std::make_shared<RecordingObserver>();
  Harness harness(Budget(64, 8), 1, /*gated=*/false, observer,
                  FakeEngineOptions{.device_seconds = 0.0025});
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 3)})).ok());
  ASSERT_TRUE(harness.answers().WaitForCalls(1));
  ASSERT_TRUE(harness.Submit(2, MakeRequest({PoisonedSequence(21, 3)})).ok());
  harness.scheduler().Shutdown();
  harness.ExpectCorrectAnswer(1);
  EXPECT_EQ(harness.answers().result(2).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(observer->device_times(),
            (std::vector<std::optional<absl::Duration>>{absl::Microseconds(2500), std::nullopt}));
}

// The pipeline: when the engine starts a batch and a full batch is queued, the next batch is cut
// (and packed, on a host thread when it is large, as here) while the engine runs, so that the
// engine does not wait for host work. The queue empties while the engine is held inside Run, and a
// request submitted after that cut waits for the batch after it.
TEST(BatchSchedulerTest, NextBatchIsCutWhileTheEngineRuns) {
  auto observer = std::make_shared<RecordingObserver>();
  Harness harness(Budget(8192, 8), 1, /*gated=*/true, observer);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 8192)})).ok());  // A full batch.
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 4096, true)})).ok());
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 4096)})).ok());
  EXPECT_EQ(harness.scheduler().Stats().requests, 3);
  harness.gate().Allow(1);  // Batch 0 ends; batch 1 (request 1) starts and is held.
  ASSERT_TRUE(harness.log().WaitForBatches(2));
  // Requests 2 and 3 leave the queue while batch 1 is still inside Run.
  ASSERT_TRUE(observer->WaitForQueuedRequests(0)) << "the next batch was not cut during the run";
  const BatchScheduler::QueueStats held = harness.scheduler().Stats();
  EXPECT_EQ(held.requests, 0);
  EXPECT_EQ(held.cut_requests, 2);  // Requests 2 and 3 wait in the batch cut ahead.
  EXPECT_EQ(held.cut_sequences, 2);
  EXPECT_EQ(harness.log().Batches().size(), 2u);
  ASSERT_TRUE(harness.Submit(4, MakeRequest({TaggedSequence(41, 3)})).ok());
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(5));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(Tags(batches[1].batch), (std::vector<int32_t>{11}));
  EXPECT_EQ(Tags(batches[2].batch), (std::vector<int32_t>{21, 31}));
  ExpectWellFormed(batches[2].batch, harness.scheduler().options());
  EXPECT_EQ(Tags(batches[3].batch), (std::vector<int32_t>{41}));
  for (int id = 0; id <= 4; ++id) harness.ExpectCorrectAnswer(id);
  EXPECT_EQ(harness.scheduler().Stats().cut_requests, 0);
  EXPECT_EQ(harness.scheduler().Stats().cut_sequences, 0);
}

// A batch that is not full is not cut ahead: requests arriving while the engine runs still join
// it, as without the pipeline.
TEST(BatchSchedulerTest, BatchThatIsNotFullIsNotCutAhead) {
  Harness harness(Budget(64, 8), 1, /*gated=*/true);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 3)})).ok());
  harness.gate().Allow(1);  // Batch 0 ends; batch 1 (request 1) starts and is held.
  ASSERT_TRUE(harness.log().WaitForBatches(2));
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 3)})).ok());
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 3)})).ok());
  EXPECT_EQ(harness.scheduler().Stats().requests, 2);
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(Tags(batches[2].batch), (std::vector<int32_t>{21, 31}));
  for (int id = 0; id <= 3; ++id) harness.ExpectCorrectAnswer(id);
}

// A request cancelled after the batch holding it was cut, before that batch starts, is still
// never computed: the batch drops it when it starts.
TEST(BatchSchedulerTest, CancelledAfterItsBatchWasCutIsNotComputed) {
  auto observer = std::make_shared<RecordingObserver>();
  Harness harness(Budget(16, 8), 1, /*gated=*/true, observer);
  harness.OccupyEngine(0, 1);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 16)})).ok());
  auto flag = std::make_shared<CancellationFlag>(false);
  InferenceRequest cancelled = MakeRequest({TaggedSequence(21, 3)});
  cancelled.cancelled = flag;
  ASSERT_TRUE(harness.Submit(2, std::move(cancelled)).ok());
  ASSERT_TRUE(harness.Submit(3, MakeRequest({TaggedSequence(31, 13)})).ok());
  harness.gate().Allow(1);
  ASSERT_TRUE(harness.log().WaitForBatches(2));
  ASSERT_TRUE(observer->WaitForQueuedRequests(0));  // Requests 2 and 3, a full batch, are cut.
  flag->store(true);
  harness.gate().Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  harness.scheduler().Shutdown();
  harness.ExpectAnswerCode(2, absl::StatusCode::kCancelled);
  for (int id : {0, 1, 3}) harness.ExpectCorrectAnswer(id);
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(Tags(batches[2].batch), (std::vector<int32_t>{31}));
  EXPECT_EQ(observer->dropped(), (std::vector<absl::StatusCode>{absl::StatusCode::kCancelled}));
}

// Answers are delivered off the engine's runner: a `done` that blocks does not keep the engine
// from running the next batch, nor the next batch's requests from being answered.
TEST(BatchSchedulerTest, BlockedCallbackDoesNotStopTheEngine) {
  BatchSchedulerOptions options = Budget(64, 8);
  options.host_threads = 2;  // One is blocked below.
  Harness harness(options, 1);
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false;
  bool released = false;
  InferenceRequest blocking = MakeRequest({TaggedSequence(11, 3)});
  harness.Remember(1, blocking);
  auto record = harness.answers().Callback(1);
  blocking.done = [&, record = std::move(record)](absl::StatusOr<InferenceResult> result) mutable {
    std::unique_lock<std::mutex> lock(mutex);
    entered = true;
    changed.notify_all();
    changed.wait(lock, [&] { return released; });
    record(std::move(result));
  };
  ASSERT_TRUE(harness.scheduler().Submit(std::move(blocking)).ok());
  {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, kHangGuard, [&] { return entered; }));
  }
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 3)})).ok());
  const bool answered = harness.answers().WaitForCalls(1);
  const int blocked_calls = harness.answers().calls(1);
  {
    std::lock_guard<std::mutex> lock(mutex);
    released = true;
  }
  changed.notify_all();
  ASSERT_TRUE(answered) << "a blocked callback held up the engine";
  EXPECT_EQ(blocked_calls, 0);
  harness.ExpectCorrectAnswer(2);
  ASSERT_TRUE(harness.answers().WaitForCalls(2));
  harness.ExpectCorrectAnswer(1);
}

// An engine that fails for good while it holds a batch cut ahead hands that batch to a healthy
// engine, which computes it.
TEST(BatchSchedulerTest, RetiringEngineHandsItsNextBatchToAHealthyOne) {
  FakeEngineOptions engine_options;
  engine_options.failure_is_fatal = true;
  Harness harness(Budget(64, 1), 2, /*gated=*/true, nullptr, engine_options);
  ASSERT_TRUE(harness.Submit(1, MakeRequest({TaggedSequence(11, 2)})).ok());
  ASSERT_TRUE(harness.log().WaitForBatches(1));
  ASSERT_TRUE(harness.Submit(2, MakeRequest({TaggedSequence(21, 2)})).ok());
  ASSERT_TRUE(harness.log().WaitForBatches(2));
  // Both engines are busy; these two wait.
  ASSERT_TRUE(harness.Submit(3, MakeRequest({PoisonedSequence(31, 3)})).ok());
  ASSERT_TRUE(harness.Submit(4, MakeRequest({TaggedSequence(41, 2)})).ok());
  const int dying = harness.log().Batches()[0].engine;
  // The dying engine ends request 1, takes request 3 and, the other engine being busy, cuts
  // request 4 ahead; request 3 kills it.
  harness.gate(dying).Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(2));
  harness.ExpectCorrectAnswer(1);
  harness.ExpectAnswerCode(3, absl::StatusCode::kInternal);
  EXPECT_EQ(harness.scheduler().Stats().requests, 0) << "request 4 was not cut ahead";
  EXPECT_EQ(harness.answers().calls(4), 0);
  harness.gate(1 - dying).Open();
  ASSERT_TRUE(harness.answers().WaitForCalls(4));
  harness.ExpectCorrectAnswer(2);
  harness.ExpectCorrectAnswer(4);
  const std::vector<RecordedBatch> batches = harness.log().Batches();
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(Tags(batches[3].batch), (std::vector<int32_t>{41}));
  EXPECT_EQ(batches[3].engine, 1 - dying);
}

// Submits, cancellations, AbortQueued and Shutdown race; whatever wins, every accepted request is
// answered exactly once and nothing else is.
TEST(BatchSchedulerTest, StressEveryAcceptedRequestAnsweredOnceUnderAbortAndShutdown) {
  constexpr int kThreads = 6;
  constexpr int kRequestsPerThread = 200;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    BatchSchedulerOptions options = Budget(48, 4);
    options.max_queued_requests = 0;
    Harness harness(options, 2);
    std::vector<std::thread> threads;
    std::vector<std::vector<int>> accepted(kThreads);
    std::vector<std::shared_ptr<CancellationFlag>> flags(kThreads * kRequestsPerThread);
    // Built up front: Harness::Remember is not thread-safe.
    std::vector<InferenceRequest> requests;
    std::mt19937 shapes(static_cast<uint32_t>(round));
    for (int id = 0; id < kThreads * kRequestsPerThread; ++id) {
      flags[id] = std::make_shared<CancellationFlag>(false);
      std::vector<SequenceInput> inputs;
      const int sequences = std::uniform_int_distribution<int>(1, 6)(shapes);
      for (int s = 0; s < sequences; ++s) {
        inputs.push_back(TaggedSequence(id + 1, std::uniform_int_distribution<int>(1, 20)(shapes)));
      }
      requests.push_back(MakeRequest(std::move(inputs)));
      requests.back().cancelled = flags[id];
      harness.Remember(id, requests.back());
    }
    std::atomic<int> submitted{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 random(static_cast<uint32_t>(round * 100 + t));
        for (int i = 0; i < kRequestsPerThread; ++i) {
          const int id = t * kRequestsPerThread + i;
          if (harness.SubmitRemembered(id, std::move(requests[id])).ok()) accepted[t].push_back(id);
          submitted.fetch_add(1);
          // Cancel an earlier request of this thread, whatever stage it is in.
          if (i >= 3 && random() % 4 == 0) flags[id - 3]->store(true);
        }
      });
    }
    threads.emplace_back([&] {
      while (submitted.load() < kThreads * kRequestsPerThread / 2) std::this_thread::yield();
      if (round % 2 == 0) {
        harness.scheduler().AbortQueued(absl::UnavailableError("draining"));
      } else {
        harness.scheduler().Shutdown();
      }
    });
    for (std::thread& thread : threads) thread.join();
    harness.scheduler().Shutdown();
    int total = 0;
    for (const std::vector<int>& ids : accepted) {
      for (int id : ids) {
        EXPECT_EQ(harness.answers().calls(id), 1) << "request " << id;
        const absl::StatusOr<InferenceResult> result = harness.answers().result(id);
        if (result.ok()) harness.ExpectCorrectAnswer(id);
      }
      total += static_cast<int>(ids.size());
    }
    EXPECT_EQ(harness.answers().total_calls(), total);
  }
}

// Many threads submit random requests (sizes, priorities, outputs, some cancelled, some that make
// their batch fail) to four engines; every `done` must come exactly once with the right answer.
TEST(BatchSchedulerTest, StressEveryRequestAnsweredExactlyOnce) {
  constexpr int kThreads = 8;
  constexpr int kRequestsPerThread = 150;
  constexpr int kEngines = 4;
  for (absl::Duration delay : {absl::ZeroDuration(), absl::Microseconds(300)}) {
    SCOPED_TRACE(absl::FormatDuration(delay));
    BatchSchedulerOptions options = Budget(64, 6);
    options.max_queue_delay = delay;
    options.max_queued_requests = 0;
    auto observer = std::make_shared<RecordingObserver>();
    Harness harness(options, kEngines, /*gated=*/false, observer);

    struct Plan {
      InferenceRequest request;
      bool cancelled = false;
      bool poisoned = false;
    };
    // Built up front (single-threaded) so that tags are unique and Harness's maps are filled
    // before the threads start submitting.
    std::vector<std::vector<Plan>> plans(kThreads);
    std::map<int32_t, int> request_of_tag;
    int32_t next_tag = 1;
    std::mt19937 random(12345);
    for (int t = 0; t < kThreads; ++t) {
      for (int i = 0; i < kRequestsPerThread; ++i) {
        const int id = t * kRequestsPerThread + i;
        Plan plan;
        const int sequences = std::uniform_int_distribution<int>(1, 12)(random);
        const bool with_types = random() % 2 == 0;
        std::vector<SequenceInput> inputs;
        for (int s = 0; s < sequences; ++s) {
          request_of_tag[next_tag] = id;
          inputs.push_back(TaggedSequence(
              next_tag++, std::uniform_int_distribution<int>(2, 40)(random), with_types));
        }
        plan.poisoned = random() % 40 == 0;
        if (plan.poisoned) inputs.back().ids[1] = kFailToken;
        const uint32_t outputs_choice[] = {kSequenceLogits, kEmbeddings,
                                           kSequenceLogits | kEmbeddings};
        plan.request = MakeRequest(std::move(inputs), static_cast<Priority>(random() % 3),
                                   outputs_choice[random() % 3]);
        plan.cancelled = random() % 30 == 0;
        if (plan.cancelled) plan.request.cancelled = std::make_shared<CancellationFlag>(true);
        harness.Remember(id, plan.request);
        plans[t].push_back(std::move(plan));
      }
    }
    std::vector<bool> cancelled(kThreads * kRequestsPerThread);
    std::vector<bool> poisoned(kThreads * kRequestsPerThread);
    for (int t = 0; t < kThreads; ++t) {
      for (int i = 0; i < kRequestsPerThread; ++i) {
        const int id = t * kRequestsPerThread + i;
        cancelled[id] = plans[t][i].cancelled;
        poisoned[id] = plans[t][i].poisoned;
      }
    }

    std::vector<std::thread> threads;
    std::atomic<int> refused{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kRequestsPerThread; ++i) {
          if (!harness.SubmitRemembered(t * kRequestsPerThread + i, std::move(plans[t][i].request))
                   .ok()) {
            refused.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(refused.load(), 0);
    const int total = kThreads * kRequestsPerThread;
    ASSERT_TRUE(harness.answers().WaitForCalls(total));
    harness.scheduler().Shutdown();
    EXPECT_EQ(harness.answers().total_calls(), total);

    // Which sequences were computed, and in which batches that failed.
    std::map<int32_t, int> computed;
    std::set<int> in_failed_batch;
    for (const RecordedBatch& batch : harness.log().Batches()) {
      ExpectWellFormed(batch.batch, options);
      for (int32_t tag : Tags(batch.batch)) {
        ++computed[tag];
        if (batch.failed) in_failed_batch.insert(request_of_tag.at(tag));
      }
    }
    for (const auto& [tag, count] : computed) EXPECT_EQ(count, 1) << "sequence " << tag;
    for (int id = 0; id < total; ++id) {
      const absl::StatusCode code = harness.answers().result(id).status().code();
      if (cancelled[id]) {
        harness.ExpectAnswerCode(id, absl::StatusCode::kCancelled);
        for (const auto& [tag, owner] : request_of_tag) {
          if (owner == id) {
            EXPECT_EQ(computed.count(tag), 0u) << "cancelled request computed";
          }
        }
      } else if (poisoned[id]) {
        harness.ExpectAnswerCode(id, absl::StatusCode::kInternal);
      } else if (code == absl::StatusCode::kInternal) {
        // Only by sharing a batch with a poisoned request.
        EXPECT_EQ(in_failed_batch.count(id), 1u) << "request " << id;
      } else {
        harness.ExpectCorrectAnswer(id);
      }
    }
    int dropped = 0;
    for (bool is_cancelled : cancelled) dropped += is_cancelled ? 1 : 0;
    EXPECT_EQ(static_cast<int>(observer->dropped().size()), dropped);
    EXPECT_EQ(observer->last_depth(), (std::vector<int64_t>{0, 0, 0}));
  }
}

}  // namespace
}  // namespace dflash::serving
