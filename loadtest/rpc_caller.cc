#include "loadtest/rpc_caller.h"

#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "loadtest/kserve_request.h"

namespace dflash::loadtest {
namespace {

namespace v1 = ::dflash::v1;
using Async = v1::InferenceService::StubInterface::async_interface;

template <typename Request>
struct ResponseOf;
template <>
struct ResponseOf<v1::ClassifyRequest> {
  using type = v1::ClassifyResponse;
};
template <>
struct ResponseOf<v1::RerankRequest> {
  using type = v1::RerankResponse;
};
template <>
struct ResponseOf<v1::EmbedRequest> {
  using type = v1::EmbedResponse;
};
template <>
struct ResponseOf<v1::ZeroShotRequest> {
  using type = v1::ZeroShotResponse;
};
template <>
struct ResponseOf<v1::TokenizeRequest> {
  using type = v1::TokenizeResponse;
};
template <>
struct ResponseOf<inference::ModelInferRequest> {
  using type = inference::ModelInferResponse;
};

// One overload per RPC: the callback-API method of the generated stub.
void StartOne(Async* async, grpc::ClientContext* context, const v1::ClassifyRequest* request,
              v1::ClassifyResponse* response, std::function<void(grpc::Status)> done) {
  async->Classify(context, request, response, std::move(done));
}
void StartOne(Async* async, grpc::ClientContext* context, const v1::RerankRequest* request,
              v1::RerankResponse* response, std::function<void(grpc::Status)> done) {
  async->Rerank(context, request, response, std::move(done));
}
void StartOne(Async* async, grpc::ClientContext* context, const v1::EmbedRequest* request,
              v1::EmbedResponse* response, std::function<void(grpc::Status)> done) {
  async->Embed(context, request, response, std::move(done));
}
void StartOne(Async* async, grpc::ClientContext* context, const v1::ZeroShotRequest* request,
              v1::ZeroShotResponse* response, std::function<void(grpc::Status)> done) {
  async->ZeroShot(context, request, response, std::move(done));
}
void StartOne(Async* async, grpc::ClientContext* context, const v1::TokenizeRequest* request,
              v1::TokenizeResponse* response, std::function<void(grpc::Status)> done) {
  async->Tokenize(context, request, response, std::move(done));
}

}  // namespace

int64_t SequencesOf(const RpcRequest& request) {
  struct Visitor {
    int64_t operator()(const v1::ClassifyRequest& r) const { return r.inputs_size(); }
    int64_t operator()(const v1::RerankRequest& r) const { return r.documents_size(); }
    int64_t operator()(const v1::EmbedRequest& r) const { return r.inputs_size(); }
    int64_t operator()(const v1::ZeroShotRequest& r) const {
      return int64_t{r.texts_size()} * r.candidate_labels_size();
    }
    int64_t operator()(const v1::TokenizeRequest& r) const { return r.inputs_size(); }
    int64_t operator()(const inference::ModelInferRequest& r) const {
      return r.inputs().empty() || r.inputs(0).shape().empty() ? 0 : r.inputs(0).shape(0);
    }
  };
  return std::visit(Visitor{}, request);
}

v1::ResponseMetadata MetadataOf(const RpcResponse& response) {
  return std::visit(
      [](const auto& r) -> v1::ResponseMetadata {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(r)>,
                                     inference::ModelInferResponse>) {
          return MetadataOfInfer(r);
        } else {
          return r.metadata();
        }
      },
      response);
}

std::string StatusCodeName(grpc::StatusCode code) {
  // gRPC and absl number the codes alike (google.rpc.Code); absl has the canonical names.
  const std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? absl::StrCat("CODE_", static_cast<int>(code)) : name;
}

RpcCaller::RpcCaller(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      stub_(v1::InferenceService::NewStub(channel_)),
      kserve_stub_(inference::GRPCInferenceService::NewStub(channel_)) {}

void RpcCaller::Start(grpc::ClientContext* context, const RpcRequest* request,
                      RpcResponse* response, std::function<void(grpc::Status)> done) {
  std::visit(
      [&](const auto& typed_request) {
        using Request = std::remove_cvref_t<decltype(typed_request)>;
        auto& typed_response = response->emplace<typename ResponseOf<Request>::type>();
        if constexpr (std::is_same_v<Request, inference::ModelInferRequest>) {
          kserve_stub_->async()->ModelInfer(context, &typed_request, &typed_response,
                                            std::move(done));
        } else {
          StartOne(stub_->async(), context, &typed_request, &typed_response, std::move(done));
        }
      },
      *request);
}

}  // namespace dflash::loadtest
