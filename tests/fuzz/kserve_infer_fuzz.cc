// libFuzzer target: arbitrary bytes as a KServe v2 ModelInferRequest, through the server's own
// parsing, the tensor codec and the mapping to a dflash.v1 request (PlanInference) and, when they
// accept it, the request pipeline on the demo model (classify and zero-shot) with the null engine
// and the mapping of its answer back. Whatever the bytes, the answer must be OK or a client error
// with a message, and an OK answer must hold the outputs asked for, each with as many values as
// its shape says. Violations abort so the fuzzer reports them.
#include <grpcpp/support/byte_buffer.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/kserve/infer_request_mapping.h"
#include "server/kserve/infer_response_mapping.h"
#include "server/kserve/tensor_codec.h"
#include "server/service/wire_message.h"
#include "tests/fuzz/fuzzed_pipeline.h"

namespace {

namespace fuzz = dflash::fuzz;
namespace kserve = dflash::kserve;
namespace serving = dflash::serving;
namespace v1 = dflash::v1;
using fuzz::Violation;

fuzz::FuzzedPipeline& TheServer() {
  static fuzz::FuzzedPipeline* server = fuzz::ServeOnNullEngine(DFLASH_DEMO_MODEL_DIR);
  return *server;
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
                  fuzz::CheckClientError(kserve::WithTensorNames(plan, response.status()));
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
    fuzz::CheckClientError(model.status());
    return 0;
  }
  absl::StatusOr<kserve::InferPlan> plan = kserve::PlanInference(**model, request);
  if (!plan.ok()) {
    fuzz::CheckClientError(plan.status());
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
