#include "engine/tuning/attention_family.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dflash::tuning {

int LengthBucket(int length) {
  int bucket = kMinLengthBucket;
  while (bucket < length && bucket <= (1 << 29)) bucket *= 2;
  return bucket;
}

AttentionFamily FamilyOf(const kernels::AttentionProblem& problem) {
  AttentionFamily family;
  family.dtype = problem.dtype;
  family.head_dim = problem.head_dim;
  family.padded = problem.key_padding_mask != nullptr;
  const bool c2p = problem.pos_key != nullptr;
  const bool p2c = problem.pos_query != nullptr;
  family.bias = c2p && p2c ? AttentionBias::kBoth
                : c2p      ? AttentionBias::kC2P
                : p2c      ? AttentionBias::kP2C
                           : AttentionBias::kNone;
  family.length_bucket = LengthBucket(family.padded ? problem.padded_length : problem.max_seqlen);
  return family;
}

absl::StatusOr<kernels::DataType> ParseDataType(absl::string_view name) {
  if (name == "fp16") return kernels::DataType::kFloat16;
  if (name == "bf16") return kernels::DataType::kBFloat16;
  if (name == "fp32") return kernels::DataType::kFloat32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (expected fp16, bf16 or fp32)"));
}

const char* BiasName(AttentionBias bias) {
  switch (bias) {
    case AttentionBias::kNone:
      return "none";
    case AttentionBias::kC2P:
      return "c2p";
    case AttentionBias::kP2C:
      return "p2c";
    case AttentionBias::kBoth:
      return "c2p+p2c";
  }
  return "?";
}

std::string FamilyKey(const AttentionFamily& family) {
  return absl::StrCat(kernels::DataTypeShortName(family.dtype), "/d", family.head_dim, "/",
                      family.padded ? "padded" : "packed", "/", BiasName(family.bias), "/L",
                      family.length_bucket);
}

absl::StatusOr<AttentionFamily> ParseFamilyKey(absl::string_view key) {
  const std::vector<absl::string_view> parts = absl::StrSplit(key, '/');
  auto error = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad family '", key, "': ", why,
        " (expected dtype/d<head dim>/packed|padded/c2p+p2c|c2p|p2c|none/L<power of two>, e.g. "
        "bf16/d64/packed/c2p+p2c/L1024)"));
  };
  if (parts.size() != 5) return error("not five '/'-separated parts");
  AttentionFamily family;
  absl::StatusOr<kernels::DataType> dtype = ParseDataType(parts[0]);
  if (!dtype.ok()) return error(dtype.status().message());
  family.dtype = *dtype;
  if (parts[1].size() < 2 || parts[1][0] != 'd' ||
      !absl::SimpleAtoi(parts[1].substr(1), &family.head_dim) || family.head_dim <= 0) {
    return error(absl::StrCat("bad head dim '", parts[1], "'"));
  }
  if (parts[2] == "packed") {
    family.padded = false;
  } else if (parts[2] == "padded") {
    family.padded = true;
  } else {
    return error(absl::StrCat("bad layout '", parts[2], "'"));
  }
  bool known_bias = false;
  for (AttentionBias bias :
       {AttentionBias::kBoth, AttentionBias::kC2P, AttentionBias::kP2C, AttentionBias::kNone}) {
    if (parts[3] == BiasName(bias)) {
      family.bias = bias;
      known_bias = true;
    }
  }
  if (!known_bias) return error(absl::StrCat("bad bias '", parts[3], "'"));
  if (parts[4].size() < 2 || parts[4][0] != 'L' ||
      !absl::SimpleAtoi(parts[4].substr(1), &family.length_bucket) ||
      family.length_bucket != LengthBucket(family.length_bucket)) {
    return error(absl::StrCat("bad length bucket '", parts[4],
                              "' (a power of two >= ", kMinLengthBucket, ")"));
  }
  return family;
}

}  // namespace dflash::tuning
