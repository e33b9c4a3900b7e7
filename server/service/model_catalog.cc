#include "server/service/model_catalog.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflash::serving {
namespace {

std::string ModelIds(const std::vector<std::unique_ptr<ServedModel>>& models) {
  return absl::StrJoin(models, ", ", [](std::string* out, const std::unique_ptr<ServedModel>& m) {
    absl::StrAppend(out, m->id());
  });
}

}  // namespace

absl::Status ModelCatalog::Add(std::unique_ptr<ServedModel> model) {
  for (const auto& existing : models_) {
    if (existing->id() == model->id()) {
      return absl::AlreadyExistsError(absl::StrCat("model id '", model->id(), "' is used twice"));
    }
  }
  models_.push_back(std::move(model));
  return absl::OkStatus();
}

absl::StatusOr<ServedModel*> ModelCatalog::Resolve(absl::string_view requested) const {
  if (requested.empty()) {
    if (models_.size() == 1) return models_.front().get();
    return absl::InvalidArgumentError(absl::StrCat(
        "model: required because this server serves several models (", ModelIds(models_), ")"));
  }
  for (const auto& model : models_) {
    if (model->id() == requested) return model.get();
  }
  // The requested name is echoed only when it is short and printable, so a hostile value cannot
  // flood logs or clients.
  const bool printable =
      requested.size() <= 128 &&
      std::all_of(requested.begin(), requested.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  return absl::NotFoundError(absl::StrCat("model: '", printable ? requested : "<unprintable>",
                                          "' is not served; served models: ", ModelIds(models_)));
}

void ModelCatalog::ShutdownAll() {
  for (const auto& model : models_) model->scheduler().Shutdown();
}

int64_t ModelCatalog::AbortQueuedAll(const absl::Status& status) {
  int64_t aborted = 0;
  for (const auto& model : models_) aborted += model->scheduler().AbortQueued(status);
  return aborted;
}

}  // namespace dflash::serving
