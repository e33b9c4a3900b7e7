// The served models by id, in configuration order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/service/served_model.h"

namespace dflash::serving {

class ModelCatalog {
 public:
  // ALREADY_EXISTS for a second model with the same id.
  absl::Status Add(std::unique_ptr<ServedModel> model);

  // The model a request's `model` field names: empty picks the only model (INVALID_ARGUMENT when
  // several are served); an unknown id is NOT_FOUND listing the served ones.
  absl::StatusOr<ServedModel*> Resolve(absl::string_view requested) const;

  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }

  // Stops every model's batcher after it has answered all queued requests.
  void ShutdownAll();
  // BatchScheduler::AbortQueued on every model; the number of requests answered `status`.
  int64_t AbortQueuedAll(const absl::Status& status);

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;
};

}  // namespace dflash::serving
