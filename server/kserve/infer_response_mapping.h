// The KServe ModelInferResponse for the dflash.v1 answer of an InferPlan: the outputs the plan
// names, in its order, as FP32 tensors in request order (rankings are undone: row i is input i,
// column j label / candidate j), and the answer's accounting as response parameters (tokens,
// tokenization_us, queue_us, inference_us, total_us: int64, as dflash.v1's ResponseMetadata).
#pragma once

#include "absl/status/status.h"
#include "dflash/v1/dflash.pb.h"
#include "inference/grpc_service.pb.h"
#include "server/kserve/infer_request_mapping.h"

namespace dflash::kserve {

inference::ModelInferResponse ClassifyAnswer(const InferPlan& plan, int num_labels,
                                             const v1::ClassifyResponse& answer);
inference::ModelInferResponse ZeroShotAnswer(const InferPlan& plan,
                                             const v1::ZeroShotResponse& answer);
inference::ModelInferResponse RerankAnswer(const InferPlan& plan, const v1::RerankResponse& answer);
inference::ModelInferResponse EmbedAnswer(const InferPlan& plan, const v1::EmbedResponse& answer);

// A pipeline error of `plan`'s dflash.v1 request with its field names as the KServe request
// names them: "inputs[3].text" (classify), "texts[3]" (zero-shot), "documents[3]" (rerank) and
// "inputs[3]" (embed) become "text[3]"; "inputs[3].text_pair" becomes "text_pair[3]".
absl::Status WithTensorNames(const InferPlan& plan, const absl::Status& status);

}  // namespace dflash::kserve
