// libFuzzer target: arbitrary bytes as a dflash.v1 request message, through the server's own
// parsing (ParseWireMessage) and, when they parse, the whole request pipeline on the demo model
// with the null engine (TokenClassify: on the token-classification golden model with the demo
// tokenizer). The first byte picks the RPC. Whatever the bytes, the pipeline must answer
// exactly once, with OK or a client error (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION,
// RESOURCE_EXHAUSTED), never an internal one, and an OK answer must fit the send limit.
// Violations abort so the fuzzer reports them.
#include <grpcpp/support/byte_buffer.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "server/service/wire_message.h"
#include "tests/fuzz/fuzzed_pipeline.h"

namespace {

namespace fuzz = dflash::fuzz;
namespace serving = dflash::serving;
namespace v1 = dflash::v1;
using fuzz::FuzzedPipeline;
using fuzz::Violation;

// Small enough that the answers of limit-sized requests pass it, so the refusal path runs too.
constexpr size_t kMaxResponseBytes = 64 << 10;

FuzzedPipeline& TheServer() {
  static FuzzedPipeline* server = fuzz::ServeOnNullEngine(DFLASH_DEMO_MODEL_DIR, kMaxResponseBytes);
  return *server;
}

// The token-classification golden model's config and weights with the demo tokenizer, whose ids
// fit its vocabulary; the files are read at load, so the directory goes at once.
FuzzedPipeline& TheTokenServer() {
  static FuzzedPipeline* server = [] {
    namespace fs = std::filesystem;
    const fs::path directory =
        fs::temp_directory_path() / ("request_message_fuzz." + std::to_string(::getpid()));
    fs::create_directories(directory);
    const fs::path golden = fs::path(DFLASH_SOURCE_DIR) / "tests/golden/models/ner";
    fs::copy_file(golden / "config.json", directory / "config.json");
    fs::copy_file(golden / "model.safetensors", directory / "model.safetensors");
    for (const char* name : {"spm.model", "tokenizer_config.json"}) {
      fs::copy_file(fs::path(DFLASH_DEMO_MODEL_DIR) / name, directory / name);
    }
    FuzzedPipeline* created = fuzz::ServeOnNullEngine(directory, kMaxResponseBytes);
    fs::remove_all(directory);
    return created;
  }();
  return *server;
}

void CheckAnswer(const absl::Status& status, size_t response_bytes) {
  if (!status.ok()) {
    fuzz::CheckClientError(status);
  } else if (response_bytes > kMaxResponseBytes) {
    Violation("an OK answer over the send limit");
  }
}

// Parses `bytes` as Request and, when that succeeds, runs it through `method` and checks the one
// answer.
template <typename Request, typename Response, typename Method>
void Run(const grpc::ByteBuffer& bytes, Method method, FuzzedPipeline& (*which)() = TheServer) {
  Request request;
  const absl::Status parsed = serving::ParseWireMessage(bytes, request);
  if (!parsed.ok()) {
    if (parsed.code() != absl::StatusCode::kInvalidArgument) Violation("parse error code");
    return;
  }
  FuzzedPipeline& server = which();
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
  switch (data[0] % 6) {
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
    case 4:
      Run<v1::TokenizeRequest, v1::TokenizeResponse>(bytes, &serving::InferencePipeline::Tokenize);
      break;
    default:
      Run<v1::TokenClassifyRequest, v1::TokenClassifyResponse>(
          bytes, &serving::InferencePipeline::TokenClassify, TheTokenServer);
      break;
  }
  return 0;
}
