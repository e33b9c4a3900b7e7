// The end-to-end test harness: a ServingRuntime started in-process on 127.0.0.1:0 (metrics on
// 127.0.0.1:0) and reached over real gRPC channels, the models it serves (the bundled demo NLI
// model and tiny cross-encoder / encoder checkpoints written next to a copy of its tokenizer),
// engines the tests control (a gate that holds batches, a log of what ran, injected faults), the
// reference the answers are checked against (the tokenizer and the CPU engine called directly,
// one sequence at a time), and clients for health, reflection and the metrics endpoint.
#pragma once

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dflash/v1/dflash.grpc.pb.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/engine.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/config/server_config.h"
#include "server/service/serving_runtime.h"
#include "server/tokenizer/tokenizer_loader.h"
#include "tests/engine/tiny_checkpoint.h"

namespace dflash::e2e {

namespace v1 = ::dflash::v1;
using serving::ModelEntry;
using serving::ServerConfig;

// Generous bound of every wait in the tests: reached only when something is broken (a hang).
inline constexpr absl::Duration kWaitLimit = absl::Seconds(60);

// Polls `condition` every `interval` until it holds (true) or kWaitLimit passes (false). Polls a
// condition; no timing is asserted.
bool PollUntil(absl::FunctionRef<bool()> condition, absl::Duration interval);

// Longest input of every served test model, in tokens (keeps the engine runs small).
inline constexpr int kMaxInputLength = 64;

std::filesystem::path DemoModelDir();  // <build>/demo-model: 3-label NLI, hidden 256.
std::filesystem::path CertsDir();      // tests/e2e/certs.

// Tiny checkpoints sharing the demo model's tokenizer (spm.model, 4000 pieces; vocab 4096),
// written into a temporary directory that lives as long as this object.
struct TinyModels {
  test::ScopedTempDir directory;
  std::filesystem::path rerank;     // A cross-encoder: DebertaV2ForSequenceClassification, 1 label.
  std::filesystem::path embed;      // An encoder (DebertaV2Model): mean pooling, hidden 32.
  std::filesystem::path embed_cls;  // An encoder with a sentence-transformers CLS pooling config.
};
absl::StatusOr<std::unique_ptr<TinyModels>> WriteTinyModels();

// A model entry with test-sized settings: CPU backend with one BLAS thread, max_input_length
// kMaxInputLength, batches of at most `max_batch_tokens` tokens and 64 sequences. (Loading runs a
// warm-up batch of max_batch_tokens tokens.)
ModelEntry TestModelEntry(std::string name, std::filesystem::path path, int max_batch_tokens = 512);
// Listens on 127.0.0.1:0, 2 worker threads. The metrics endpoint (127.0.0.1:0) only when asked
// for: tests read the metrics registry directly (ScrapeRegistry), and metrics_test scrapes the
// endpoint.
ServerConfig TestServerConfig(std::vector<ModelEntry> models, bool metrics_endpoint = false);

// ---------------------------------------------------------------------------------------------
// Engines under the test's control.
// ---------------------------------------------------------------------------------------------

// Shared by a GatedEngine and the test. The gate starts open. While it is closed, every batch
// arriving at the engine waits; it is logged on arrival, before it waits.
class EngineControl {
 public:
  void Close();
  // Lets every waiting batch through, even if Close() follows at once, and all later ones until
  // the next Close().
  void Open();
  // The next batch (and only that one) fails with `status` instead of running.
  void FailNextBatch(absl::Status status);
  // A slow engine: from now on every batch passing the gate takes `delay` per token longer, as on
  // a slower device (0: no delay, the default). Its time is the engine time the server measures.
  void SetDelayPerToken(absl::Duration delay);

  // Batches that arrived at the engine so far (the warm-up batch included).
  int batches() const;
  // Sequences of all batches that arrived so far.
  int64_t sequences() const;
  // Waits until at least `count` batches have arrived; false after kWaitLimit.
  bool WaitForBatches(int count) const;
  // The token ids of every sequence that arrived, per batch, in arrival order.
  std::vector<std::vector<std::vector<int32_t>>> BatchLog() const;
  // Whether any batch so far held a sequence with exactly these ids.
  bool Saw(const std::vector<int32_t>& ids) const;
  // The largest number of sequences of a batch holding a sequence with these ids (0: none).
  int LargestBatchWith(const std::vector<int32_t>& ids) const;
  // Waits until no batch is in the engine (waiting at the gate or running); false after
  // kWaitLimit.
  bool WaitUntilIdle() const;

 private:
  friend class GatedEngine;
  // Logs `batch`, waits while the gate is closed, then returns the injected fault, if any. Every
  // Enter is followed by one Leave, when the batch is done.
  absl::Status Enter(const PackedBatch& batch);
  void Leave();
  absl::Duration DelayPerToken() const;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  bool open_ = true;
  uint64_t openings_ = 0;  // Open() calls so far.
  int in_engine_ = 0;
  std::optional<absl::Status> fault_;
  absl::Duration delay_per_token_ = absl::ZeroDuration();
  std::vector<std::vector<std::vector<int32_t>>> log_;
  int64_t sequences_ = 0;
};

// Runs `inner` after EngineControl::Enter (and its delay per token).
class GatedEngine final : public Engine {
 public:
  GatedEngine(std::unique_ptr<Engine> inner, std::shared_ptr<EngineControl> control)
      : inner_(std::move(inner)), control_(std::move(control)) {}

  absl::StatusOr<BatchOutput> Run(const PackedBatch& batch, const RunOptions& options) override;
  EngineInfo Info() const override { return inner_->Info(); }
  const ModelConfig& config() const override { return inner_->config(); }

 private:
  std::unique_ptr<Engine> inner_;
  std::shared_ptr<EngineControl> control_;
};

enum class InnerEngine { kCpu, kNull };

// A ModelLoader like ServedModel::Load (tokenizer with the entry's max_text_bytes, CPU engine with
// the entry's cpu_threads, or the null engine) that wraps the engine of every model named in
// `controls` in a GatedEngine.
serving::ModelLoader GatedLoader(std::map<std::string, std::shared_ptr<EngineControl>> controls,
                                 InnerEngine inner = InnerEngine::kCpu);

// ---------------------------------------------------------------------------------------------
// The server and its clients.
// ---------------------------------------------------------------------------------------------

inline constexpr char kTestVersion[] = "0.1.0-e2e";
inline constexpr char kTestRevision[] = "e2e0revision";

class TestServer {
 public:
  static absl::StatusOr<std::unique_ptr<TestServer>> Start(const ServerConfig& config,
                                                           serving::ModelLoader loader = nullptr);

  serving::ServingRuntime& runtime() { return *runtime_; }
  std::string address() const;  // "127.0.0.1:<port>"
  // A plaintext channel and stubs on it (one channel, created at Start).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  v1::InferenceService::Stub& stub() { return *stub_; }
  grpc::health::v1::Health::Stub& health() { return *health_; }
  // Queue totals of a served model's batcher.
  serving::BatchScheduler::QueueStats QueueStats(absl::string_view model) const;
  // Sequences of `model` that wait for an engine: queued, or in a batch cut ahead that has not
  // started.
  int64_t WaitingSequences(absl::string_view model) const;
  // Waits until `model`'s queue holds `requests` requests; false after kWaitLimit.
  bool WaitForQueuedRequests(absl::string_view model, int requests) const;
  // Polls until `requests` of the model's queued requests carry their caller's cancellation;
  // false after kWaitLimit.
  bool WaitForCancelledQueuedRequests(absl::string_view model, int requests) const;

 private:
  std::unique_ptr<serving::ServingRuntime> runtime_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::InferenceService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// A client context with a deadline of kWaitLimit (no call of a test may hang).
std::unique_ptr<grpc::ClientContext> NewContext();

// grpc.health.v1.Health/Check of `service` on `channel`.
struct HealthResult {
  grpc::Status status;
  grpc::health::v1::HealthCheckResponse::ServingStatus serving =
      grpc::health::v1::HealthCheckResponse::UNKNOWN;
};
HealthResult CheckHealth(grpc::health::v1::Health::Stub& health, const std::string& service);
// Polls Check until it reports `wanted`; false after kWaitLimit.
bool WaitForHealth(grpc::health::v1::Health::Stub& health, const std::string& service,
                   grpc::health::v1::HealthCheckResponse::ServingStatus wanted);

// Server reflection (grpc.reflection.v1alpha, the version grpc 1.51 serves) through a generic
// stub, since Debian packages no generated reflection client: the services the server lists, and
// the file descriptor that defines `symbol`.
absl::StatusOr<std::vector<std::string>> ReflectionListServices(
    const std::shared_ptr<grpc::Channel>& channel);
absl::StatusOr<std::string> ReflectionFileContainingSymbol(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& symbol);

// One unary call started with the stub's callback API; Wait() returns its status.
template <typename Request, typename Response>
struct AsyncCall {
  AsyncCall() = default;
  AsyncCall(const AsyncCall&) = delete;
  AsyncCall& operator=(const AsyncCall&) = delete;
  // A call still running when a test gives up is cancelled and awaited: gRPC must be done with
  // the context before it is destroyed.
  ~AsyncCall() {
    if (!started) return;
    context.TryCancel();
    (void)Wait();
  }

  grpc::ClientContext context;
  Request request;
  Response response;
  grpc::Status status;

  bool done() const {
    std::lock_guard<std::mutex> lock(mutex);
    return finished;
  }
  // Waits for the answer; a call not answered within kWaitLimit fails the test with DEADLINE.
  grpc::Status Wait() {
    std::unique_lock<std::mutex> lock(mutex);
    if (!cv.wait_for(lock, absl::ToChronoSeconds(kWaitLimit), [this] { return finished; })) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "test: no answer in time");
    }
    return status;
  }
  void Finish(grpc::Status result) {
    std::lock_guard<std::mutex> lock(mutex);
    status = std::move(result);
    finished = true;
    cv.notify_all();
  }

  bool started = false;  // Set by the function that starts the call.
  mutable std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
};
using AsyncClassify = AsyncCall<v1::ClassifyRequest, v1::ClassifyResponse>;

// Starts a Classify call; the returned object must outlive the call (use Wait()).
std::unique_ptr<AsyncClassify> StartClassify(v1::InferenceService::Stub& stub,
                                             v1::ClassifyRequest request,
                                             absl::Duration timeout = kWaitLimit);

// ---------------------------------------------------------------------------------------------
// The reference: the tokenizer and the CPU engine of a checkpoint, called directly.
// ---------------------------------------------------------------------------------------------

class Reference {
 public:
  static absl::StatusOr<std::unique_ptr<Reference>> Load(
      const std::filesystem::path& directory, TokenizerChoice tokenizer = TokenizerChoice::kAuto);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelConfig& config() const { return engine_->config(); }
  PoolingMode pooling() const { return pooling_; }

  // Tokenizes with truncation to kMaxInputLength (`strategy` for pairs; single texts longest
  // first, right side); dies on a tokenizer error (tests only pass valid text).
  Encoding Encode(absl::string_view text, std::optional<absl::string_view> pair = std::nullopt,
                  TruncationStrategy strategy = TruncationStrategy::kLongestFirst) const;
  // The sequence's logits / pooled (unnormalized) embedding, run alone.
  std::vector<float> Logits(const Encoding& encoding) const;
  std::vector<float> Embedding(const Encoding& encoding) const;

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CpuEngine> engine_;
  PoolingMode pooling_ = PoolingMode::kMean;
  mutable std::mutex engine_mutex_;  // The engine is not thread-safe.
};

// Scores in double precision, independent of the server's code.
std::vector<double> Softmax(const std::vector<float>& logits);
double Sigmoid(double x);
// `values` truncated to `dimensions`, then L2-normalized when `normalize`.
std::vector<double> PostprocessEmbedding(const std::vector<float>& values, size_t dimensions,
                                         bool normalize);
// IEEE binary16 little-endian bytes -> floats.
std::vector<float> DecodeFloat16(const std::string& bytes);

// |actual - expected| <= relative * |expected| + absolute.
::testing::AssertionResult Near(double actual, double expected, double relative = 1e-5,
                                double absolute = 1e-6);

// The absolute bound for comparing the components of a float32 embedding computed in one batch
// with the same one computed in another (the server batches inputs, the reference runs each
// alone): BLAS sums in a batch-dependent order, so components near zero differ by more than
// 1e-5 of themselves (seen: 1.1e-6 on a component of 2.9e-3, OpenBLAS on an AVX-512 host). It
// scales with the vector's largest component: max(1e-6, 1e-5 * max |expected|).
template <typename T>
double EmbeddingAbsoluteTolerance(const std::vector<T>& expected) {
  double largest = 0.0;
  for (const T value : expected) {
    largest = std::max(largest, std::fabs(static_cast<double>(value)));
  }
  return std::max(1e-6, 1e-5 * largest);
}

// ---------------------------------------------------------------------------------------------
// The metrics endpoint.
// ---------------------------------------------------------------------------------------------

// GET http://127.0.0.1:<port><path> (HTTP/1.0); the body, or an error for a non-200 answer.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// One sample of the text exposition.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
// Parses the sample lines (comments skipped); labels unescaped.
absl::StatusOr<std::vector<Sample>> ParseExposition(absl::string_view text);
// The sum of the samples called `name` whose labels include every pair of `labels`, in the
// text exposition of the runtime's registry (what /metrics serves).
double ScrapeRegistry(serving::ServingRuntime& runtime, absl::string_view name,
                      const std::map<std::string, std::string>& labels = {});
// The sum of the samples called `name` whose labels include every pair of `labels`.
double SumSamples(const std::vector<Sample>& samples, absl::string_view name,
                  const std::map<std::string, std::string>& labels = {});

// Runs `/usr/bin/python3 <script file> <argument>`; the exit status, output in `output`. -1 when
// it cannot run.
int RunPython(const std::string& script, const std::string& argument, std::string& output);

}  // namespace dflash::e2e
