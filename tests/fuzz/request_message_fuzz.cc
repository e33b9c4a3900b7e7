// libFuzzer target: arbitrary bytes as a dflash.v1 request message, through the server's own
// parsing (ParseWireMessage) and, when they parse, the whole request pipeline on the demo model
// with the null engine. The first byte picks the RPC. Whatever the bytes, the pipeline must answer
// exactly once, with OK or a client error (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION,
// RESOURCE_EXHAUSTED), never an internal one, and an OK answer must fit the send limit.
// Violations abort so the fuzzer reports them.
#include <grpcpp/support/byte_buffer.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/common/logging.h"
#include "server/service/inference_pipeline.h"
#include "server/service/model_catalog.h"
#include "server/service/served_model.h"
#include "server/service/wire_message.h"
#include "server/service/worker_pool.h"

namespace {

namespace serving = dflash::serving;
namespace v1 = dflash::v1;

// Small enough that the answers of limit-sized requests pass it, so the refusal path runs too.
constexpr size_t kMaxResponseBytes = 64 << 10;

[[noreturn]] void Violation(const std::string& what) {
  std::fprintf(stderr, "request_message_fuzz: invariant violated: %s\n", what.c_str());
  std::abort();
}

struct Server {
  serving::ModelCatalog catalog;
  std::unique_ptr<serving::WorkerPool> pool;
  std::unique_ptr<serving::InferencePipeline> pipeline;
};

Server& TheServer() {
  static Server* server = [] {
    dflash::Log().set_level(spdlog::level::off);
    auto* created = new Server();
    serving::ModelEntry entry;
    entry.name = "demo";
    entry.path = DFLASH_DEMO_MODEL_DIR;
    entry.backend = serving::BackendChoice::kNull;
    entry.max_input_length = 64;
    entry.batching.max_batch_tokens = 512;
    entry.limits.max_inputs = 8;
    entry.limits.max_candidate_labels = 4;
    entry.limits.max_sequences = 16;
    entry.limits.max_text_bytes = 2000;
    absl::StatusOr<std::unique_ptr<serving::ServedModel>> model =
        serving::ServedModel::Load(entry, nullptr);
    if (!model.ok()) Violation("cannot load the demo model: " + model.status().ToString());
    if (!created->catalog.Add(std::move(*model)).ok()) Violation("cannot add the demo model");
    created->pool = std::make_unique<serving::WorkerPool>(2);
    created->pipeline = std::make_unique<serving::InferencePipeline>(
        created->catalog, *created->pool, nullptr, serving::ServerIdentity{"fuzz", "fuzz"},
        kMaxResponseBytes);
    return created;
  }();
  return *server;
}

void CheckAnswer(const absl::Status& status, size_t response_bytes) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      if (response_bytes > kMaxResponseBytes) Violation("an OK answer over the send limit");
      return;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
      if (status.message().empty()) Violation("an error without a message");
      return;
    default:
      Violation("unexpected answer: " + status.ToString());
  }
}

// Parses `bytes` as Request and, when that succeeds, runs it through `method` and checks the one
// answer.
template <typename Request, typename Response, typename Method>
void Run(const grpc::ByteBuffer& bytes, Method method) {
  Request request;
  const absl::Status parsed = serving::ParseWireMessage(bytes, request);
  if (!parsed.ok()) {
    if (parsed.code() != absl::StatusCode::kInvalidArgument) Violation("parse error code");
    return;
  }
  Server& server = TheServer();
  std::promise<std::pair<absl::Status, size_t>> answered;
  std::future<std::pair<absl::Status, size_t>> answer = answered.get_future();
  // std::invoke, not (pipeline->*method)(...): GCC 12's ASan/UBSan build miscompiles that call
  // (see InferenceService::Stream).
  std::invoke(method, *server.pipeline, request, serving::CallContext{},
              [&answered](absl::StatusOr<Response> response) {
                const size_t size = response.ok() ? response->ByteSizeLong() : 0;
                answered.set_value({response.status(), size});
              });
  const auto [status, size] = answer.get();
  CheckAnswer(status, size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  grpc::Slice slice(data + 1, size - 1);
  const grpc::ByteBuffer bytes(&slice, 1);
  switch (data[0] % 5) {
    case 0:
      Run<v1::ClassifyRequest, v1::ClassifyResponse>(bytes, &serving::InferencePipeline::Classify);
      break;
    case 1:
      Run<v1::ZeroShotRequest, v1::ZeroShotResponse>(bytes, &serving::InferencePipeline::ZeroShot);
      break;
    case 2:
      Run<v1::RerankRequest, v1::RerankResponse>(bytes, &serving::InferencePipeline::Rerank);
      break;
    case 3:
      Run<v1::EmbedRequest, v1::EmbedResponse>(bytes, &serving::InferencePipeline::Embed);
      break;
    default:
      Run<v1::TokenizeRequest, v1::TokenizeResponse>(bytes, &serving::InferencePipeline::Tokenize);
      break;
  }
  return 0;
}
