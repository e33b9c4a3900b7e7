#include "tests/loadtest/fake_inference_service.h"

#include <chrono>

#include "absl/strings/str_split.h"

namespace dflash::loadtest::testing {
namespace {

namespace v1 = ::dflash::v1;

// Answers only when the client goes away (deadline or cancellation).
class HangingReactor final : public grpc::ServerUnaryReactor {
 public:
  void OnCancel() override { Finish(grpc::Status::CANCELLED); }
  void OnDone() override { delete this; }
};

// A token count for canned metadata: words, plus the specials.
uint32_t Tokens(const std::string& text) {
  return static_cast<uint32_t>(
             std::vector<std::string>(absl::StrSplit(text, ' ', absl::SkipEmpty())).size()) +
         2;
}

}  // namespace

std::string FakeInferenceService::last_authorization() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_authorization_;
}

template <typename Fill>
grpc::ServerUnaryReactor* FakeInferenceService::Answer(grpc::CallbackServerContext* context,
                                                       std::atomic<int64_t>& rpc_calls, Fill fill) {
  const int64_t number = calls_.fetch_add(1) + 1;
  rpc_calls.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto& metadata = context->client_metadata();
    const auto found = metadata.find("authorization");
    last_authorization_ =
        found == metadata.end() ? "" : std::string(found->second.data(), found->second.size());
  }
  if (options_.hang_every > 0 && number % options_.hang_every == 0) return new HangingReactor();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (options_.reject_every > 0 && number % options_.reject_every == 0) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full"));
    return reactor;
  }
  v1::ResponseMetadata* metadata = fill();
  metadata->set_total_us(120);
  metadata->set_queue_us(20);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

std::vector<std::string> FakeInferenceService::classify_requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return classify_requests_;
}

grpc::ServerUnaryReactor* FakeInferenceService::Classify(grpc::CallbackServerContext* context,
                                                         const v1::ClassifyRequest* request,
                                                         v1::ClassifyResponse* response) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    classify_requests_.push_back(request->SerializeAsString());
  }
  return Answer(context, classify_calls_, [&] {
    uint64_t tokens = 0;
    for (const v1::TextInput& input : request->inputs()) {
      v1::Classification* result = response->add_results();
      result->set_tokens(Tokens(input.text()) +
                         (input.has_text_pair() ? Tokens(input.text_pair()) - 1 : 0));
      tokens += result->tokens();
      v1::LabelScore* score = result->add_scores();
      score->set_id(0);
      score->set_label("entailment");
      score->set_score(0.9f);
    }
    response->mutable_metadata()->set_tokens(tokens);
    return response->mutable_metadata();
  });
}

grpc::ServerUnaryReactor* FakeInferenceService::Rerank(grpc::CallbackServerContext* context,
                                                       const v1::RerankRequest* request,
                                                       v1::RerankResponse* response) {
  return Answer(context, rerank_calls_, [&] {
    for (int i = 0; i < request->documents_size(); ++i) {
      v1::RerankResult* result = response->add_results();
      result->set_index(static_cast<uint32_t>(i));
      result->set_score(0.5f);
    }
    return response->mutable_metadata();
  });
}

grpc::ServerUnaryReactor* FakeInferenceService::Embed(grpc::CallbackServerContext* context,
                                                      const v1::EmbedRequest* request,
                                                      v1::EmbedResponse* response) {
  return Answer(context, embed_calls_, [&] {
    for (int i = 0; i < request->inputs_size(); ++i) {
      v1::Embedding* embedding = response->add_embeddings();
      embedding->add_float32_values(1.0f);
      embedding->set_dimensions(1);
    }
    return response->mutable_metadata();
  });
}

grpc::ServerUnaryReactor* FakeInferenceService::ZeroShot(grpc::CallbackServerContext* context,
                                                         const v1::ZeroShotRequest* request,
                                                         v1::ZeroShotResponse* response) {
  return Answer(context, zeroshot_calls_, [&] {
    for (int i = 0; i < request->texts_size(); ++i) response->add_results();
    return response->mutable_metadata();
  });
}

grpc::ServerUnaryReactor* FakeInferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                         const v1::TokenizeRequest* request,
                                                         v1::TokenizeResponse* response) {
  return Answer(context, tokenize_calls_, [&] {
    for (int i = 0; i < request->inputs_size(); ++i) response->add_encodings();
    return response->mutable_metadata();
  });
}

FakeServer::FakeServer(FakeServiceOptions options) : service_(options) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
}

FakeServer::~FakeServer() {
  // Hanging calls are cancelled by the deadline below at the latest.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace dflash::loadtest::testing
