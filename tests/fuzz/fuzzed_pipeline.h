// What the fuzz targets that drive the request pipeline (request_message_fuzz, kserve_infer_fuzz)
// share: a checkpoint served as "demo" (the seed corpora's requests name it) on the null engine,
// with limits small enough that the fuzzer reaches them, and the rule that a refusal is a client
// error with a message.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/service/inference_pipeline.h"
#include "server/service/model_catalog.h"
#include "server/service/worker_pool.h"

namespace dflash::fuzz {

// Prints "<program>: invariant violated: <what>" and aborts, so that the fuzzer reports it.
[[noreturn]] void Violation(const std::string& what);

struct FuzzedPipeline {
  serving::ModelCatalog catalog;
  std::unique_ptr<serving::WorkerPool> pool;
  std::unique_ptr<serving::InferencePipeline> pipeline;
};

// Serves the checkpoint in `model_dir` as "demo" with two workers, and turns logging off. Lives
// until the process ends; a checkpoint that does not load is a Violation.
FuzzedPipeline* ServeOnNullEngine(
    const std::filesystem::path& model_dir,
    size_t max_response_bytes = serving::InferencePipeline::kDefaultMaxResponseBytes);

// A refusal must be INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION or RESOURCE_EXHAUSTED, with
// a message; anything else (an internal error, an OK) is a Violation.
void CheckClientError(const absl::Status& status);

}  // namespace dflash::fuzz
