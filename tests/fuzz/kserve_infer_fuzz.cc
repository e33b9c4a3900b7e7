// libFuzzer target: arbitrary bytes as a KServe v2 ModelInferRequest, through the server's own
// parsing, the tensor codec and the mapping to a dflash.v1 request (PlanInference) and, when they
// accept it, the request pipeline on the demo model (classify and zero-shot) with the null engine
// and the mapping of its answer back. Whatever the bytes, the answer must be OK or a client error
// with a message, and an OK answer must hold the outputs asked for, each with as many values as
// its shape says. Violations abort so the fuzzer reports them.
#include <grpcpp/support/byte_buffer.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/common/logging.h"
#include "server/kserve/infer_request_mapping.h"
#include "server/kserve/infer_response_mapping.h"
#include "server/kserve/tensor_codec.h"
#include "server/service/inference_pipeline.h"
#include "server/service/model_catalog.h"
#include "server/service/served_model.h"
#include "server/service/wire_message.h"
#include "server/service/worker_pool.h"

namespace {

namespace kserve = dflash::kserve;
namespace serving = dflash::serving;
namespace v1 = dflash::v1;

[[noreturn]] void Violation(const std::string& what) {
  std::fprintf(stderr, "kserve_infer_fuzz: invariant violated: %s\n", what.c_str());
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
        created->catalog, *created->pool, nullptr, serving::ServerIdentity{"fuzz", "fuzz"});
    return created;
  }();
  return *server;
}

void CheckError(const absl::Status& status) {
  switch (status.code()) {
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

void CheckResponse(const kserve::InferPlan& plan, const inference::ModelInferResponse& response) {
  if (response.outputs_size() != static_cast<int>(plan.outputs.size())) {
    Violation("not every output asked for was answered");
  }
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& shape = response.outputs(i).shape();
    absl::StatusOr<int64_t> elements = kserve::ShapeElements(
        std::span<const int64_t>(shape.data(), static_cast<size_t>(shape.size())), "output");
    absl::StatusOr<std::vector<float>> values = kserve::DecodeFp32Output(response, i);
    if (!elements.ok() || !values.ok() || static_cast<int64_t>(values->size()) != *elements) {
      Violation("an output whose values do not fill its shape");
    }
  }
}

// Runs the plan's dflash.v1 request through `method` and maps the answer back.
template <typename Request, typename Response, typename Method, typename Map>
void Run(const kserve::InferPlan& plan, Method method, Map map) {
  std::promise<void> answered;
  std::invoke(method, *TheServer().pipeline, std::get<Request>(plan.request),
              serving::CallContext{}, [&](absl::StatusOr<Response> response) {
                if (response.ok()) {
                  CheckResponse(plan, map(*response));
                } else {
                  CheckError(kserve::WithTensorNames(plan, response.status()));
                }
                answered.set_value();
              });
  answered.get_future().get();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  grpc::Slice slice(data, size);
  const grpc::ByteBuffer bytes(&slice, 1);
  inference::ModelInferRequest request;
  const absl::Status parsed = serving::ParseWireMessage(bytes, request);
  if (!parsed.ok()) {
    if (parsed.code() != absl::StatusCode::kInvalidArgument) Violation("parse error code");
    return 0;
  }
  absl::StatusOr<serving::ServedModel*> model = TheServer().catalog.Resolve(request.model_name());
  if (!model.ok()) {
    CheckError(model.status());
    return 0;
  }
  absl::StatusOr<kserve::InferPlan> plan = kserve::PlanInference(**model, request);
  if (!plan.ok()) {
    CheckError(plan.status());
    return 0;
  }
  const int labels = (*model)->config().num_labels();
  switch (plan->task) {
    case serving::ServedTask::kClassify:
      Run<v1::ClassifyRequest, v1::ClassifyResponse>(
          *plan, &serving::InferencePipeline::Classify,
          [&](const v1::ClassifyResponse& r) { return kserve::ClassifyAnswer(*plan, labels, r); });
      break;
    case serving::ServedTask::kZeroShot:
      Run<v1::ZeroShotRequest, v1::ZeroShotResponse>(
          *plan, &serving::InferencePipeline::ZeroShot,
          [&](const v1::ZeroShotResponse& r) { return kserve::ZeroShotAnswer(*plan, r); });
      break;
    case serving::ServedTask::kRerank:
    case serving::ServedTask::kEmbed:
    case serving::ServedTask::kTokenClassify:
      Violation("a task the demo model does not serve was planned");
  }
  return 0;
}
