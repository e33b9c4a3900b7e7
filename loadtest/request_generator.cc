#include "loadtest/request_generator.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "loadtest/kserve_request.h"

namespace dflash::loadtest {

namespace v1 = ::dflash::v1;

RequestGenerator::RequestGenerator(Workload workload, std::shared_ptr<const Corpus> corpus,
                                   uint64_t seed, WireProtocol protocol)
    : workload_(std::move(workload)), corpus_(std::move(corpus)), seed_(seed), protocol_(protocol) {
  for (const MixEntry& entry : workload_.mix) total_weight_ += entry.weight;
}

const MixEntry& RequestGenerator::PickEntry(Rng& rng) const {
  double target = UniformDouble(rng) * total_weight_;
  for (const MixEntry& entry : workload_.mix) {
    if (target < entry.weight) return entry;
    target -= entry.weight;
  }
  return workload_.mix.back();  // Only reached through rounding.
}

std::string RequestGenerator::MakeText(const TextLength& length, Rng& rng) const {
  int64_t words = length.count.Sample(rng);
  if (length.in_tokens && words > 0) {
    words =
        std::max<int64_t>(1, std::llround(static_cast<double>(words) / workload_.tokens_per_word));
  }
  return corpus_->RandomWindow(rng, static_cast<size_t>(words));
}

RpcRequest RequestGenerator::Generate(uint64_t index) const {
  Rng rng(MixSeed(seed_, index));
  const std::string request_id = absl::StrCat("loadtest-", index);
  const int64_t inputs = workload_.inputs_per_call.Sample(rng);
  // Fills the fields every request message shares (same names and numbers in all of them).
  auto set_common = [&](auto& request) {
    request.set_model(workload_.model);
    request.set_request_id(request_id);
    if (workload_.truncate.has_value()) request.set_truncate(*workload_.truncate);
  };
  auto fill_text_inputs = [&](auto& request) {
    for (int64_t i = 0; i < inputs; ++i) {
      const MixEntry& entry = PickEntry(rng);
      v1::TextInput* input = request.add_inputs();
      input->set_text(MakeText(entry.first, rng));
      if (entry.second.has_value()) input->set_text_pair(MakeText(*entry.second, rng));
    }
  };
  switch (workload_.rpc) {
    case RpcKind::kClassify: {
      v1::ClassifyRequest request;
      set_common(request);
      request.set_priority(workload_.priority);
      fill_text_inputs(request);
      if (protocol_ == WireProtocol::kKserve) return ToModelInferRequest(request);
      return request;
    }
    case RpcKind::kTokenize: {
      v1::TokenizeRequest request;
      set_common(request);
      fill_text_inputs(request);
      return request;
    }
    case RpcKind::kEmbed: {
      v1::EmbedRequest request;
      set_common(request);
      request.set_priority(workload_.priority);
      for (int64_t i = 0; i < inputs; ++i) request.add_inputs(MakeText(PickEntry(rng).first, rng));
      return request;
    }
    case RpcKind::kZeroShot: {
      v1::ZeroShotRequest request;
      set_common(request);
      request.set_priority(workload_.priority);
      for (int64_t i = 0; i < inputs; ++i) request.add_texts(MakeText(PickEntry(rng).first, rng));
      for (const std::string& label : workload_.candidate_labels) {
        request.add_candidate_labels(label);
      }
      request.set_hypothesis_template(workload_.hypothesis_template);
      request.set_multi_label(workload_.multi_label);
      return request;
    }
    case RpcKind::kRerank: {
      // One mix entry per call: the query and all documents follow the same profile.
      v1::RerankRequest request;
      set_common(request);
      request.set_priority(workload_.priority);
      const MixEntry& entry = PickEntry(rng);
      request.set_query(MakeText(entry.first, rng));
      for (int64_t i = 0; i < inputs; ++i) request.add_documents(MakeText(*entry.second, rng));
      return request;
    }
  }
  return v1::ClassifyRequest();
}

}  // namespace dflash::loadtest
