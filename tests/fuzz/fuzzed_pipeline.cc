#include "tests/fuzz/fuzzed_pipeline.h"

#include <errno.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "server/service/served_model.h"

namespace dflash::fuzz {

void Violation(const std::string& what) {
  std::fprintf(stderr, "%s: invariant violated: %s\n", program_invocation_short_name, what.c_str());
  std::abort();
}

FuzzedPipeline* ServeOnNullEngine(const std::filesystem::path& model_dir,
                                  size_t max_response_bytes) {
  dflash::Log().set_level(spdlog::level::off);
  auto* served = new FuzzedPipeline();
  serving::ModelEntry entry;
  entry.name = "demo";
  entry.path = model_dir;
  entry.backend = EngineBackend::kNull;
  entry.max_input_length = 64;
  entry.batching.max_batch_tokens = 512;
  entry.limits.max_inputs = 8;
  entry.limits.max_candidate_labels = 4;
  entry.limits.max_sequences = 16;
  entry.limits.max_text_bytes = 2000;
  absl::StatusOr<std::unique_ptr<serving::ServedModel>> model =
      serving::ServedModel::Load(entry, nullptr);
  if (!model.ok())
    Violation("cannot load " + model_dir.string() + ": " + model.status().ToString());
  if (!served->catalog.Add(std::move(*model)).ok()) Violation("cannot add the model");
  served->pool = std::make_unique<serving::WorkerPool>(2);
  served->pipeline = std::make_unique<serving::InferencePipeline>(
      served->catalog, *served->pool, nullptr, serving::ServerIdentity{"fuzz", "fuzz"},
      max_response_bytes);
  return served;
}

void CheckClientError(const absl::Status& status) {
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

}  // namespace dflash::fuzz
