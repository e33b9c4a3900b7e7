// Workload files: what a load test sends. A JSON object names the RPC, the request options and a
// weighted mix of text lengths; loadtest/workloads/README.md documents the format. Parsing is
// strict (unknown keys, wrong types and bad weights are errors naming the field) so that a typo
// cannot silently change what a benchmark measures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dflash/v1/dflash.pb.h"
#include "loadtest/random.h"

namespace dflash::loadtest {

enum class RpcKind { kClassify, kRerank, kEmbed, kZeroShot, kTokenize };

// "classify", "rerank", "embed", "zeroshot" or "tokenize".
absl::StatusOr<RpcKind> ParseRpcKind(absl::string_view name);
absl::string_view RpcKindName(RpcKind kind);

// A distribution of non-negative integers (text lengths, inputs per call). In JSON: N (fixed),
// {"fixed": N}, {"uniform": [LO, HI]} (inclusive) or
// {"lognormal": {"median": M, "sigma": S, "min": LO, "max": HI}} (rounded, clipped to [LO, HI]).
struct CountDistribution {
  enum class Kind { kFixed, kUniform, kLogNormal };
  Kind kind = Kind::kFixed;
  int64_t min = 0;  // kFixed: the value.
  int64_t max = 0;
  double median = 0.0;  // kLogNormal only.
  double sigma = 0.0;   // kLogNormal only.

  int64_t Sample(Rng& rng) const;
};

// A text length, in words or in (approximate) model tokens of that text alone, special tokens
// excluded; tokens become words at the workload's tokens_per_word.
struct TextLength {
  CountDistribution count;
  bool in_tokens = false;
};

// One weighted entry of the length mix. For rerank, `first` is the query and `second` each
// document; otherwise `first` is the text (premise) and `second`, when set, the text pair
// (hypothesis).
struct MixEntry {
  double weight = 1.0;
  TextLength first;
  std::optional<TextLength> second;
};

struct Workload {
  std::string description;
  RpcKind rpc = RpcKind::kClassify;
  // Empty: the server's only model.
  std::string model;
  dflash::v1::Priority priority = dflash::v1::PRIORITY_UNSPECIFIED;
  std::optional<bool> truncate;
  // Inputs (texts, pairs) per call; for rerank, documents per call.
  CountDistribution inputs_per_call;
  double tokens_per_word = 1.3;
  std::vector<MixEntry> mix;
  // zeroshot only.
  std::vector<std::string> candidate_labels;
  std::string hypothesis_template;
  bool multi_label = false;
};

// Parses a workload. `source` (usually the file name) prefixes every error.
absl::StatusOr<Workload> ParseWorkload(absl::string_view json_text, absl::string_view source);
absl::StatusOr<Workload> LoadWorkloadFile(const std::string& path);

}  // namespace dflash::loadtest
