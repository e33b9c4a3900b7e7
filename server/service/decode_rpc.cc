// Decode (the HTTP front's TEI /decode): token ids back to text by the model's tokenizer, on the
// worker pool; nothing is queued.
#include <memory>

#include "absl/strings/str_cat.h"
#include "server/service/inference_pipeline.h"

namespace dflash::serving {

size_t DecodeResponse::ByteSizeLong() const {
  size_t bytes = 0;
  for (const std::string& text : texts) bytes += text.size() + kResultEntryBytes;
  return bytes;
}

void InferencePipeline::Decode(const DecodeRequest& request, CallContext call,
                               Responder<DecodeResponse> respond) {
  ServedModel* model = BeginRequest("Decode", request.model, std::nullopt, call, respond);
  if (model == nullptr) return;
  if (absl::Status count =
          CheckCount(request.ids.size(), model->entry().limits.max_inputs, "ids", "id lists");
      !count.ok()) {
    respond(std::move(count));
    return;
  }
  auto texts = std::make_shared<std::vector<std::string>>(request.ids.size());
  auto respond_once = std::make_shared<Responder<DecodeResponse>>(std::move(respond));
  pool_.Post([this, &request, model, texts, respond_once]() {
    ParallelFor(
        pool_, static_cast<int>(request.ids.size()), 8,
        [&request, model, texts](int i) -> absl::Status {
          const size_t index = static_cast<size_t>(i);
          absl::StatusOr<std::string> text =
              model->tokenizer().Decode(request.ids[index], request.skip_special_tokens);
          if (!text.ok()) {
            // A single list is named as TEI names it, "ids"; a batch's lists by index.
            return WithField(text.status(), request.ids.size() == 1 ? std::string("ids")
                                                                    : absl::StrCat("ids[", i, "]"));
          }
          (*texts)[index] = *std::move(text);
          return absl::OkStatus();
        },
        [texts, respond_once](absl::Status status) {
          if (!status.ok()) {
            (*respond_once)(std::move(status));
            return;
          }
          (*respond_once)(DecodeResponse{std::move(*texts)});
        });
  });
}

}  // namespace dflash::serving
