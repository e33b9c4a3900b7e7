// dflash-loadtest's KServe v2 protocol (--protocol=kserve): a generated Classify request as the
// ModelInferRequest a tritonclient user sends for it (BYTES `text`, and `text_pair` when the
// inputs are pairs, raw as tritonclient sends them; the `scores` output), and the answer's
// accounting read back from its response parameters.
#pragma once

#include "dflash/v1/dflash.pb.h"
#include "inference/grpc_service.pb.h"

namespace dflash::loadtest {

inference::ModelInferRequest ToModelInferRequest(const dflash::v1::ClassifyRequest& request);

// tokens and the *_us timings of the response parameters, as a dflash.v1 ResponseMetadata.
dflash::v1::ResponseMetadata MetadataOfInfer(const inference::ModelInferResponse& response);

}  // namespace dflash::loadtest
