// Turns a workload and a corpus into concrete requests.
#pragma once

#include <cstdint>
#include <memory>

#include "loadtest/corpus.h"
#include "loadtest/rpc_caller.h"
#include "loadtest/workload.h"

namespace dflash::loadtest {

// The API the requests are sent through.
enum class WireProtocol {
  kDflash,  // dflash.v1.InferenceService.
  kKserve,  // KServe v2 ModelInfer (classify workloads only; kserve_request.h).
};

class RequestGenerator {
 public:
  RequestGenerator(Workload workload, std::shared_ptr<const Corpus> corpus, uint64_t seed,
                   WireProtocol protocol = WireProtocol::kDflash);

  // The request of call number `index`. A pure function of (workload, corpus, seed, index): any
  // thread may build any call, and the requests of a run do not depend on its timing, so runs
  // with the same --seed send the same texts.
  RpcRequest Generate(uint64_t index) const;

  const Workload& workload() const { return workload_; }

 private:
  // Picks a mix entry by weight.
  const MixEntry& PickEntry(Rng& rng) const;
  // A text of the sampled length, cut from the corpus.
  std::string MakeText(const TextLength& length, Rng& rng) const;

  Workload workload_;
  std::shared_ptr<const Corpus> corpus_;
  uint64_t seed_;
  WireProtocol protocol_;
  double total_weight_ = 0.0;
};

}  // namespace dflash::loadtest
