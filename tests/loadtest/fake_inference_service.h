// An in-process dflash.v1.InferenceService with canned answers, for the load generator's
// end-to-end tests. It listens on 127.0.0.1 with a port picked by the kernel.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dflash/v1/dflash.grpc.pb.h"

namespace dflash::loadtest::testing {

struct FakeServiceOptions {
  // Every reject_every-th call (by arrival order at the server, from 1) fails with
  // RESOURCE_EXHAUSTED "queue full"; 0: never.
  int64_t reject_every = 0;
  // Every hang_every-th call is never answered: it ends only when the client's deadline cancels
  // it; 0: never.
  int64_t hang_every = 0;
};

class FakeInferenceService final : public dflash::v1::InferenceService::CallbackService {
 public:
  explicit FakeInferenceService(FakeServiceOptions options) : options_(options) {}

  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* context,
                                     const dflash::v1::ClassifyRequest* request,
                                     dflash::v1::ClassifyResponse* response) override;
  grpc::ServerUnaryReactor* Rerank(grpc::CallbackServerContext* context,
                                   const dflash::v1::RerankRequest* request,
                                   dflash::v1::RerankResponse* response) override;
  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context,
                                  const dflash::v1::EmbedRequest* request,
                                  dflash::v1::EmbedResponse* response) override;
  grpc::ServerUnaryReactor* ZeroShot(grpc::CallbackServerContext* context,
                                     const dflash::v1::ZeroShotRequest* request,
                                     dflash::v1::ZeroShotResponse* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const dflash::v1::TokenizeRequest* request,
                                     dflash::v1::TokenizeResponse* response) override;

  int64_t calls() const { return calls_.load(); }
  int64_t classify_calls() const { return classify_calls_.load(); }
  int64_t rerank_calls() const { return rerank_calls_.load(); }
  int64_t embed_calls() const { return embed_calls_.load(); }
  int64_t zeroshot_calls() const { return zeroshot_calls_.load(); }
  int64_t tokenize_calls() const { return tokenize_calls_.load(); }
  // The "authorization" metadata of the last call ("" when absent).
  std::string last_authorization() const;
  // Every ClassifyRequest received, serialized, in arrival order.
  std::vector<std::string> classify_requests() const;

 private:
  // Counts the call and answers it: a canned OK (after `fill` fills the response), an error or
  // nothing (see FakeServiceOptions).
  template <typename Fill>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                   std::atomic<int64_t>& rpc_calls, Fill fill);

  FakeServiceOptions options_;
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> classify_calls_{0};
  std::atomic<int64_t> rerank_calls_{0};
  std::atomic<int64_t> embed_calls_{0};
  std::atomic<int64_t> zeroshot_calls_{0};
  std::atomic<int64_t> tokenize_calls_{0};
  mutable std::mutex mutex_;
  std::string last_authorization_;
  std::vector<std::string> classify_requests_;
};

// The service running on a gRPC server at 127.0.0.1:<port>.
class FakeServer {
 public:
  explicit FakeServer(FakeServiceOptions options = {});
  ~FakeServer();

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeInferenceService& service() { return service_; }

 private:
  FakeInferenceService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace dflash::loadtest::testing
