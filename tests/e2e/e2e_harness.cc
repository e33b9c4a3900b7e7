#include "tests/e2e/e2e_harness.h"

#include <arpa/inet.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/model/checkpoint.h"
#include "engine/model/half_precision.h"
#include "engine/null/null_engine.h"
#include "gtest/gtest.h"
#include "server/metrics/text_exposition.h"
#include "server/service/served_model.h"

namespace dflash::e2e {
namespace {

namespace fs = std::filesystem;

// The tiny models' shape: big enough vocabulary for the demo tokenizer, small everything else.
nlohmann::json TinyModelConfig() {
  nlohmann::json config = test::TinyConfigJson();
  config["vocab_size"] = 4096;
  config["hidden_size"] = 32;
  config["num_attention_heads"] = 2;
  config["intermediate_size"] = 64;
  config["num_hidden_layers"] = 2;
  config["max_position_embeddings"] = 512;
  return config;
}

absl::Status CopyTokenizer(const fs::path& to) {
  std::error_code error;
  fs::create_directories(to, error);
  for (const char* name : {"spm.model", "tokenizer_config.json"}) {
    fs::copy_file(DemoModelDir() / name, to / name, fs::copy_options::overwrite_existing, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("copy ", name, " to ", to.string(), ": ", error.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

fs::path DemoModelDir() { return fs::path(DFLASH_DEMO_MODEL_DIR); }
fs::path CertsDir() { return fs::path(DFLASH_SOURCE_DIR) / "tests/e2e/certs"; }

absl::StatusOr<std::unique_ptr<TinyModels>> WriteTinyModels() {
  auto models = std::make_unique<TinyModels>();
  models->rerank = models->directory.path() / "rerank";
  models->embed = models->directory.path() / "embed";
  models->embed_cls = models->directory.path() / "embed-cls";

  nlohmann::json rerank = TinyModelConfig();
  rerank["id2label"] = {{"0", "LABEL_0"}};
  rerank["label2id"] = {{"LABEL_0", 0}};
  DFLASH_RETURN_IF_ERROR(CopyTokenizer(models->rerank));
  DFLASH_RETURN_IF_ERROR(
      test::WriteTinyCheckpoint(models->rerank, rerank, {}, /*seed=*/11).status());

  nlohmann::json encoder = TinyModelConfig();
  encoder["architectures"] = {"DebertaV2Model"};
  encoder.erase("id2label");
  encoder.erase("label2id");
  DFLASH_RETURN_IF_ERROR(CopyTokenizer(models->embed));
  DFLASH_RETURN_IF_ERROR(
      test::WriteTinyCheckpoint(models->embed, encoder, {}, /*seed=*/12).status());

  DFLASH_RETURN_IF_ERROR(CopyTokenizer(models->embed_cls));
  DFLASH_RETURN_IF_ERROR(
      test::WriteTinyCheckpoint(models->embed_cls, encoder, {}, /*seed=*/13).status());
  std::error_code error;
  fs::create_directories(models->embed_cls / "1_Pooling", error);
  DFLASH_RETURN_IF_ERROR(
      test::WriteTextFile(models->embed_cls / "1_Pooling" / "config.json",
                          R"({"word_embedding_dimension": 32, "pooling_mode_cls_token": true,
          "pooling_mode_mean_tokens": false})"));
  return models;
}

ModelEntry TestModelEntry(std::string name, fs::path path, int max_batch_tokens) {
  ModelEntry entry;
  entry.name = std::move(name);
  entry.path = std::move(path);
  entry.backend = EngineBackend::kCpu;
  entry.cpu_threads = 1;
  entry.max_input_length = kMaxInputLength;
  entry.batching.max_batch_tokens = max_batch_tokens;
  entry.batching.max_batch_sequences = 64;
  return entry;
}

ServerConfig TestServerConfig(std::vector<ModelEntry> models, bool metrics_endpoint) {
  ServerConfig config;
  config.listen = "127.0.0.1:0";
  config.metrics_listen = metrics_endpoint ? "127.0.0.1:0" : "";
  config.worker_threads = 2;
  config.drain_grace_period = absl::Seconds(5);
  config.models = std::move(models);
  return config;
}

// ---------------------------------------------------------------------------------------------

void EngineControl::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = false;
}

void EngineControl::Open() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    ++openings_;
  }
  changed_.notify_all();
}

void EngineControl::FailNextBatch(absl::Status status) {
  std::lock_guard<std::mutex> lock(mutex_);
  fault_ = std::move(status);
}

void EngineControl::SetDelayPerToken(absl::Duration delay) {
  std::lock_guard<std::mutex> lock(mutex_);
  delay_per_token_ = delay;
}

absl::Duration EngineControl::DelayPerToken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return delay_per_token_;
}

int EngineControl::batches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(log_.size());
}

int64_t EngineControl::sequences() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sequences_;
}

bool EngineControl::WaitForBatches(int count) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, absl::ToChronoSeconds(kWaitLimit),
                           [&] { return static_cast<int>(log_.size()) >= count; });
}

std::vector<std::vector<std::vector<int32_t>>> EngineControl::BatchLog() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return log_;
}

bool EngineControl::Saw(const std::vector<int32_t>& ids) const { return LargestBatchWith(ids) > 0; }

int EngineControl::LargestBatchWith(const std::vector<int32_t>& ids) const {
  std::lock_guard<std::mutex> lock(mutex_);
  int largest = 0;
  for (const auto& batch : log_) {
    for (const auto& sequence : batch) {
      if (sequence == ids) largest = std::max(largest, static_cast<int>(batch.size()));
    }
  }
  return largest;
}

bool EngineControl::WaitUntilIdle() const {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, absl::ToChronoSeconds(kWaitLimit),
                           [&] { return in_engine_ == 0; });
}

void EngineControl::Leave() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --in_engine_;
  }
  changed_.notify_all();
}

absl::Status EngineControl::Enter(const PackedBatch& batch) {
  std::unique_lock<std::mutex> lock(mutex_);
  ++in_engine_;
  std::vector<std::vector<int32_t>> sequences;
  for (int s = 0; s < batch.num_sequences(); ++s) {
    sequences.emplace_back(batch.token_ids.begin() + batch.cu_seqlens[s],
                           batch.token_ids.begin() + batch.cu_seqlens[s + 1]);
  }
  sequences_ += batch.num_sequences();
  log_.push_back(std::move(sequences));
  changed_.notify_all();
  // Bounded, so that a test failing with the gate closed cannot hang the server's shutdown.
  const uint64_t openings = openings_;
  changed_.wait_for(lock, absl::ToChronoSeconds(kWaitLimit),
                    [&] { return open_ || openings_ != openings; });
  if (fault_.has_value()) {
    absl::Status fault = std::move(*fault_);
    fault_.reset();
    return fault;
  }
  return absl::OkStatus();
}

absl::StatusOr<BatchOutput> GatedEngine::Run(const PackedBatch& batch, const RunOptions& options) {
  const absl::Status entered = control_->Enter(batch);
  // Slept outside the control's lock, so the test can read the log meanwhile.
  if (entered.ok()) absl::SleepFor(control_->DelayPerToken() * batch.total_tokens());
  absl::StatusOr<BatchOutput> output =
      entered.ok() ? inner_->Run(batch, options) : absl::StatusOr<BatchOutput>(entered);
  control_->Leave();
  return output;
}

serving::ModelLoader GatedLoader(std::map<std::string, std::shared_ptr<EngineControl>> controls,
                                 InnerEngine inner) {
  return [controls = std::move(controls), inner](const ModelEntry& entry,
                                                 std::shared_ptr<serving::BatchObserver> observer)
             -> absl::StatusOr<std::unique_ptr<serving::ServedModel>> {
    TokenizerOptions options;
    if (entry.limits.max_text_bytes > 0) {
      options.max_input_bytes = static_cast<size_t>(entry.limits.max_text_bytes);
    }
    DFLASH_ASSIGN_OR_RETURN(const TokenizerChoice choice, ParseTokenizerChoice(entry.tokenizer));
    DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                            LoadTokenizer(entry.path, choice, options));
    DFLASH_ASSIGN_OR_RETURN(Checkpoint checkpoint, LoadCheckpoint(entry.path));
    ModelConfig config = checkpoint.config;
    const EmbeddingConfig embedding = checkpoint.embedding;
    std::unique_ptr<Engine> engine;
    if (inner == InnerEngine::kNull) {
      engine = std::make_unique<NullEngine>(config);
    } else {
      DFLASH_ASSIGN_OR_RETURN(
          engine, CpuEngine::Create(std::move(checkpoint), CpuEngine::Options{entry.cpu_threads}));
    }
    if (auto it = controls.find(entry.name); it != controls.end()) {
      engine = std::make_unique<GatedEngine>(std::move(engine), it->second);
    }
    std::vector<std::unique_ptr<Engine>> engines;
    engines.push_back(std::move(engine));
    return serving::ServedModel::Create(entry, std::move(config), embedding, std::move(tokenizer),
                                        std::move(engines), std::move(observer));
  };
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TestServer>> TestServer::Start(const ServerConfig& config,
                                                              serving::ModelLoader loader) {
  DFLASH_RETURN_IF_ERROR(serving::ValidateServerConfig(config));
  std::unique_ptr<TestServer> server(new TestServer());
  DFLASH_ASSIGN_OR_RETURN(
      server->runtime_,
      serving::ServingRuntime::Start(config, serving::ServerIdentity{kTestVersion, kTestRevision},
                                     std::move(loader)));
  server->channel_ = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  server->stub_ = v1::InferenceService::NewStub(server->channel_);
  server->health_ = grpc::health::v1::Health::NewStub(server->channel_);
  return server;
}

std::string TestServer::address() const { return absl::StrCat("127.0.0.1:", runtime_->port()); }

serving::BatchScheduler::QueueStats TestServer::QueueStats(absl::string_view model) const {
  absl::StatusOr<serving::ServedModel*> served = runtime_->catalog().Resolve(model);
  if (!served.ok()) return {};
  return (*served)->scheduler().Stats();
}

int64_t TestServer::WaitingSequences(absl::string_view model) const {
  const serving::BatchScheduler::QueueStats stats = QueueStats(model);
  return stats.sequences + stats.cut_sequences;
}

bool TestServer::WaitForQueuedRequests(absl::string_view model, int requests) const {
  return PollUntil([&] { return QueueStats(model).requests == requests; }, absl::Milliseconds(2));
}

bool TestServer::WaitForCancelledQueuedRequests(absl::string_view model, int requests) const {
  absl::StatusOr<serving::ServedModel*> served = runtime_->catalog().Resolve(model);
  if (!served.ok()) return false;
  return PollUntil([&] { return (*served)->scheduler().CancelledQueuedRequests() == requests; },
                   absl::Milliseconds(2));
}

bool PollUntil(absl::FunctionRef<bool()> condition, absl::Duration interval) {
  const absl::Time limit = absl::Now() + kWaitLimit;
  while (!condition()) {
    if (absl::Now() > limit) return false;
    absl::SleepFor(interval);
  }
  return true;
}

std::unique_ptr<grpc::ClientContext> NewContext() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + kWaitLimit));
  return context;
}

HealthResult CheckHealth(grpc::health::v1::Health::Stub& health, const std::string& service) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  HealthResult result;
  result.status = health.Check(NewContext().get(), request, &response);
  result.serving = response.status();
  return result;
}

bool WaitForHealth(grpc::health::v1::Health::Stub& health, const std::string& service,
                   grpc::health::v1::HealthCheckResponse::ServingStatus wanted) {
  return PollUntil(
      [&] {
        const HealthResult result = CheckHealth(health, service);
        return result.status.ok() && result.serving == wanted;
      },
      absl::Milliseconds(5));
}

namespace {

void AppendVarint(uint64_t value, std::string& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// A length-delimited field (wire type 2) of a hand-encoded message.
std::string StringField(int number, absl::string_view value) {
  std::string out;
  AppendVarint(static_cast<uint64_t>(number) << 3 | 2, out);
  AppendVarint(value.size(), out);
  out.append(value.data(), value.size());
  return out;
}

// One request and its one response over grpc.reflection.v1alpha.ServerReflection's bidi stream.
absl::StatusOr<std::string> ReflectionExchange(const std::shared_ptr<grpc::Channel>& channel,
                                               const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kWaitLimit));
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &queue);
  // Each step is awaited before the next, so tags come back in order.
  auto step = [&queue]() {
    void* tag = nullptr;
    bool ok = false;
    return queue.Next(&tag, &ok) && ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  bool ok = step();
  grpc::Slice slice(request);
  grpc::ByteBuffer outgoing(&slice, 1);
  if (ok) {
    call->Write(outgoing, reinterpret_cast<void*>(2));
    ok = step();
  }
  if (ok) {
    call->WritesDone(reinterpret_cast<void*>(3));
    ok = step();
  }
  grpc::ByteBuffer incoming;
  bool got_reply = false;
  if (ok) {
    call->Read(&incoming, reinterpret_cast<void*>(4));
    got_reply = step();
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step();
  queue.Shutdown();
  void* tag = nullptr;
  bool drained_ok = false;
  while (queue.Next(&tag, &drained_ok)) {
  }
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("reflection: ", status.error_message()));
  }
  if (!got_reply) return absl::InternalError("reflection: no response message");
  std::vector<grpc::Slice> slices;
  if (!incoming.Dump(&slices).ok()) return absl::InternalError("reflection: unreadable reply");
  std::string bytes;
  for (const grpc::Slice& part : slices) {
    bytes.append(reinterpret_cast<const char*>(part.begin()), part.size());
  }
  return bytes;
}

// The length-delimited values of field `number` in an encoded message.
absl::StatusOr<std::vector<std::string>> Fields(const std::string& message, int number) {
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(message)) return absl::InternalError("unparsable message");
  std::vector<std::string> values;
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& field = fields.field(i);
    if (field.number() == number &&
        field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      values.push_back(field.length_delimited());
    }
  }
  return values;
}

// The single sub-message `number` of a ServerReflectionResponse (an error_response, field 7,
// becomes the error).
absl::StatusOr<std::string> ResponsePart(const std::string& response, int number) {
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> error, Fields(response, 7));
  if (!error.empty()) {
    DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> message, Fields(error[0], 2));
    return absl::NotFoundError(
        absl::StrCat("reflection error: ", message.empty() ? "" : message[0]));
  }
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> parts, Fields(response, number));
  if (parts.size() != 1) {
    return absl::InternalError(absl::StrCat("reflection: ", parts.size(), " fields ", number));
  }
  return parts[0];
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReflectionListServices(
    const std::shared_ptr<grpc::Channel>& channel) {
  // ServerReflectionRequest.list_services = 7.
  DFLASH_ASSIGN_OR_RETURN(std::string response, ReflectionExchange(channel, StringField(7, "*")));
  // ServerReflectionResponse.list_services_response = 6; ListServiceResponse.service = 1;
  // ServiceResponse.name = 1.
  DFLASH_ASSIGN_OR_RETURN(std::string list, ResponsePart(response, 6));
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> services, Fields(list, 1));
  std::vector<std::string> names;
  for (const std::string& service : services) {
    DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> name, Fields(service, 1));
    if (name.size() != 1) return absl::InternalError("reflection: a service without a name");
    names.push_back(name[0]);
  }
  return names;
}

absl::StatusOr<std::string> ReflectionFileContainingSymbol(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& symbol) {
  // ServerReflectionRequest.file_containing_symbol = 4.
  DFLASH_ASSIGN_OR_RETURN(std::string response,
                          ReflectionExchange(channel, StringField(4, symbol)));
  // ServerReflectionResponse.file_descriptor_response = 4;
  // FileDescriptorResponse.file_descriptor_proto = 1 (the first is the file defining `symbol`).
  DFLASH_ASSIGN_OR_RETURN(std::string files, ResponsePart(response, 4));
  DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> protos, Fields(files, 1));
  if (protos.empty()) return absl::InternalError("reflection: no file descriptor");
  return protos[0];
}

std::unique_ptr<AsyncClassify> StartClassify(v1::InferenceService::Stub& stub,
                                             v1::ClassifyRequest request, absl::Duration timeout) {
  auto call = std::make_unique<AsyncClassify>();
  call->request = std::move(request);
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  AsyncClassify* raw = call.get();
  raw->started = true;
  stub.async()->Classify(&raw->context, &raw->request, &raw->response,
                         [raw](grpc::Status status) { raw->Finish(std::move(status)); });
  return call;
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Reference>> Reference::Load(const fs::path& directory,
                                                           TokenizerChoice tokenizer) {
  auto reference = std::make_unique<Reference>();
  DFLASH_ASSIGN_OR_RETURN(reference->tokenizer_, LoadTokenizer(directory, tokenizer));
  DFLASH_ASSIGN_OR_RETURN(Checkpoint checkpoint, LoadCheckpoint(directory));
  reference->pooling_ = checkpoint.embedding.pooling;
  DFLASH_ASSIGN_OR_RETURN(reference->engine_,
                          CpuEngine::Create(std::move(checkpoint), CpuEngine::Options{1}));
  return reference;
}

Encoding Reference::Encode(absl::string_view text, std::optional<absl::string_view> pair,
                           TruncationStrategy strategy) const {
  TruncationOptions truncation;
  truncation.strategy = pair.has_value() ? strategy : TruncationStrategy::kLongestFirst;
  truncation.side = TruncationSide::kRight;
  truncation.max_length = kMaxInputLength;
  absl::StatusOr<Encoding> encoding = tokenizer_->Encode(text, pair, truncation);
  if (!encoding.ok()) {
    ADD_FAILURE() << "reference tokenizer: " << encoding.status();
    return Encoding{};
  }
  return *std::move(encoding);
}

std::vector<float> Reference::Logits(const Encoding& encoding) const {
  PackedBatch batch;
  batch.Append(encoding.ids, encoding.token_type_ids);
  RunOptions options;
  options.outputs = kSequenceLogits;
  std::lock_guard<std::mutex> lock(engine_mutex_);
  absl::StatusOr<BatchOutput> output = engine_->Run(batch, options);
  if (!output.ok()) {
    ADD_FAILURE() << "reference engine: " << output.status();
    return {};
  }
  return output->sequence_logits;
}

std::vector<float> Reference::Embedding(const Encoding& encoding) const {
  PackedBatch batch;
  batch.Append(encoding.ids, encoding.token_type_ids);
  RunOptions options;
  options.outputs = kEmbeddings;
  options.pooling = pooling_;
  options.normalize = false;
  std::lock_guard<std::mutex> lock(engine_mutex_);
  absl::StatusOr<BatchOutput> output = engine_->Run(batch, options);
  if (!output.ok()) {
    ADD_FAILURE() << "reference engine: " << output.status();
    return {};
  }
  return output->embeddings;
}

std::vector<double> Softmax(const std::vector<float>& logits) {
  double max = -INFINITY;
  for (float logit : logits) max = std::max(max, static_cast<double>(logit));
  std::vector<double> scores(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += scores[i] = std::exp(logits[i] - max);
  for (double& score : scores) score /= sum;
  return scores;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::vector<double> PostprocessEmbedding(const std::vector<float>& values, size_t dimensions,
                                         bool normalize) {
  std::vector<double> out(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(dimensions));
  if (!normalize) return out;
  double squares = 0;
  for (double v : out) squares += v * v;
  for (double& v : out) v /= std::sqrt(squares);
  return out;
}

std::vector<float> DecodeFloat16(const std::string& bytes) {
  std::vector<float> values(bytes.size() / 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const auto low = static_cast<uint16_t>(static_cast<uint8_t>(bytes[2 * i]));
    const auto high = static_cast<uint16_t>(static_cast<uint8_t>(bytes[2 * i + 1]));
    values[i] = HalfToFloat(static_cast<uint16_t>(low | (high << 8)));
  }
  return values;
}

::testing::AssertionResult Near(double actual, double expected, double relative, double absolute) {
  const double bound = relative * std::fabs(expected) + absolute;
  if (std::fabs(actual - expected) <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual << " differs from " << expected << " by "
                                       << std::fabs(actual - expected) << " > " << bound;
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  bool sent = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    sent = send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size());
    char buffer[4096];
    ssize_t n = 0;
    while (sent && (n = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
      response.append(buffer, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (!sent) return absl::UnavailableError(absl::StrCat("cannot reach 127.0.0.1:", port));
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.") || response.size() < 12 ||
      response.compare(9, 3, "200") != 0 || body == std::string::npos) {
    return absl::InternalError(absl::StrCat("GET ", path, ": ", response.substr(0, 200)));
  }
  return response.substr(body + 4);
}

absl::StatusOr<std::vector<Sample>> ParseExposition(absl::string_view text) {
  std::vector<Sample> samples;
  size_t line_start = 0;
  while (line_start < text.size()) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == absl::string_view::npos) line_end = text.size();
    const absl::string_view line = text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (line.empty() || line[0] == '#') continue;
    Sample sample;
    size_t at = line.find_first_of("{ ");
    if (at == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("no value: ", line));
    }
    sample.name = std::string(line.substr(0, at));
    if (line[at] == '{') {
      ++at;
      while (at < line.size() && line[at] != '}') {
        const size_t equals = line.find("=\"", at);
        if (equals == absl::string_view::npos) {
          return absl::InvalidArgumentError(absl::StrCat("bad labels: ", line));
        }
        std::string name(line.substr(at, equals - at));
        std::string value;
        at = equals + 2;
        while (at < line.size() && line[at] != '"') {
          if (line[at] == '\\' && at + 1 < line.size()) {
            ++at;
            value.push_back(line[at] == 'n' ? '\n' : line[at]);
          } else {
            value.push_back(line[at]);
          }
          ++at;
        }
        ++at;  // The closing quote.
        if (at < line.size() && line[at] == ',') ++at;
        sample.labels[name] = value;
      }
      ++at;  // '}'
    }
    const std::string value(absl::StripLeadingAsciiWhitespace(line.substr(at)));
    char* end = nullptr;
    sample.value = std::strtod(value.c_str(), &end);
    if (end == value.c_str()) {
      return absl::InvalidArgumentError(absl::StrCat("bad value: ", line));
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

double ScrapeRegistry(serving::ServingRuntime& runtime, absl::string_view name,
                      const std::map<std::string, std::string>& labels) {
  absl::StatusOr<std::vector<Sample>> samples =
      ParseExposition(metrics::SerializeTextExposition(runtime.registry()));
  if (!samples.ok()) {
    ADD_FAILURE() << samples.status();
    return -1;
  }
  return SumSamples(*samples, name, labels);
}

double SumSamples(const std::vector<Sample>& samples, absl::string_view name,
                  const std::map<std::string, std::string>& labels) {
  double sum = 0;
  for (const Sample& sample : samples) {
    if (sample.name != name) continue;
    bool match = true;
    for (const auto& [key, value] : labels) {
      auto it = sample.labels.find(key);
      if (it == sample.labels.end() || it->second != value) match = false;
    }
    if (match) sum += sample.value;
  }
  return sum;
}

int RunPython(const std::string& script, const std::string& argument, std::string& output) {
  static std::atomic<int> counter{0};
  const fs::path script_path =
      fs::temp_directory_path() / absl::StrCat("dflash_e2e_", getpid(), "_", counter++, ".py");
  std::ofstream(script_path) << script;
  const std::string command =
      absl::StrCat("/usr/bin/python3 ", script_path.string(), " ", argument, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  std::error_code ignored;
  fs::remove(script_path, ignored);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace dflash::e2e
