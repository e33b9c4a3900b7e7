// Workload families of the attention forward: the key under which a tuning profile stores a
// kernel variant. Select (engine/tuning/attention_tuner.h) computes the family of a live problem
// and dflash-tune benchmarks one representative problem per family, so both must agree: this file
// is the one definition.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/attention/disentangled_attention.h"

namespace dflash::tuning {

// The position terms a problem has (each changes the kernel's work per band tile).
enum class AttentionBias { kNone, kC2P, kP2C, kBoth };

struct AttentionFamily {
  kernels::DataType dtype = kernels::DataType::kBFloat16;
  int head_dim = 64;
  bool padded = false;  // Padded layout with a key mask, else packed (cu_seqlens).
  AttentionBias bias = AttentionBias::kBoth;
  // The longest sequence rounded up to a power of two, at least kMinLengthBucket: the variants'
  // costs move with the share of band tiles
  // (kernels/attention/DESIGN.md#saturation-and-tile-classes), which the longest sequence sets.
  int length_bucket = 64;

  friend bool operator==(const AttentionFamily&, const AttentionFamily&) = default;
};

// One 64 x 64 tile: every length up to it behaves alike.
inline constexpr int kMinLengthBucket = 64;

// The smallest power of two >= max(length, kMinLengthBucket).
int LengthBucket(int length);

AttentionFamily FamilyOf(const kernels::AttentionProblem& problem);

// "bf16/d64/packed/c2p+p2c/L1024": dtype (fp16, bf16, fp32) / head dim / layout (packed,
// padded) / bias (c2p+p2c, c2p, p2c, none) / length bucket.
std::string FamilyKey(const AttentionFamily& family);
absl::StatusOr<AttentionFamily> ParseFamilyKey(absl::string_view key);

// The inverse of kernels::DataTypeShortName ("fp16", "bf16", "fp32").
absl::StatusOr<kernels::DataType> ParseDataType(absl::string_view name);
const char* BiasName(AttentionBias bias);

}  // namespace dflash::tuning
