// Issues the unary dflash.v1 RPCs with gRPC's callback API: starting a call never waits for its
// answer, which is what lets an open-loop sender keep its schedule however slow the server is.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "absl/strings/string_view.h"
#include "dflash/v1/dflash.grpc.pb.h"
#include "dflash/v1/dflash.pb.h"
#include "inference/grpc_service.grpc.pb.h"

namespace dflash::loadtest {

// One request of any load-tested RPC (the last: KServe v2 ModelInfer). RpcResponse lists the
// matching responses in the same order.
using RpcRequest = std::variant<dflash::v1::ClassifyRequest, dflash::v1::RerankRequest,
                                dflash::v1::EmbedRequest, dflash::v1::ZeroShotRequest,
                                dflash::v1::TokenizeRequest, inference::ModelInferRequest>;
using RpcResponse = std::variant<dflash::v1::ClassifyResponse, dflash::v1::RerankResponse,
                                 dflash::v1::EmbedResponse, dflash::v1::ZeroShotResponse,
                                 dflash::v1::TokenizeResponse, inference::ModelInferResponse>;

// Inputs a request carries: texts or pairs, documents for rerank, texts x labels for zeroshot.
int64_t SequencesOf(const RpcRequest& request);
// The accounting part every response has.
dflash::v1::ResponseMetadata MetadataOf(const RpcResponse& response);

// The canonical name of a gRPC status code ("RESOURCE_EXHAUSTED"), as reports count errors.
std::string StatusCodeName(grpc::StatusCode code);

// Starts calls over one channel. Thread-safe: any number of threads may call Start at once.
class RpcCaller {
 public:
  explicit RpcCaller(std::shared_ptr<grpc::Channel> channel);

  // Starts the call of `request`'s RPC. `response` is set to the matching (empty) response type
  // and filled when the call succeeds. `context`, `request` and `response` must stay alive until
  // `done` runs; it runs exactly once, on a gRPC thread, and may delete them.
  void Start(grpc::ClientContext* context, const RpcRequest* request, RpcResponse* response,
             std::function<void(grpc::Status)> done);

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<dflash::v1::InferenceService::Stub> stub_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_stub_;
};

}  // namespace dflash::loadtest
