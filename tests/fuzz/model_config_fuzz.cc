// libFuzzer target: arbitrary bytes as config.json. ParseModelConfig (and under it
// ParseJsonDocument and JsonFields) must never crash or throw; an accepted config must satisfy
// the invariants the loader and the engines rely on, and for modest attention spans its
// relative-position index must be well formed. Violations abort so the fuzzer reports them.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "common/json_document.h"
#include "common/logging.h"
#include "engine/model/model_config.h"
#include "engine/model/relative_position.h"

namespace {

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "model_config_fuzz: invariant violated: %s\n", what);
  std::abort();
}

void CheckConfig(const dflash::ModelConfig& config) {
  if (config.hidden_size < 1 || config.num_attention_heads < 1) Violation("non-positive width");
  if (config.hidden_size % config.num_attention_heads != 0) Violation("heads do not divide H");
  if (config.attention_head_size < 1) Violation("non-positive head size");
  if (config.vocab_size < 1 || config.num_hidden_layers < 1 || config.intermediate_size < 1) {
    Violation("non-positive size");
  }
  if (config.num_labels() < 1) Violation("no labels");
  if (!(config.layer_norm_eps > 0.0f && config.layer_norm_eps < 1.0f)) Violation("bad eps");
  if (config.pooler_hidden_size != config.hidden_size) Violation("pooler width != H");
  if (config.embedding_size < 1) Violation("non-positive embedding size");
  if (config.type_vocab_size < 0) Violation("negative type vocabulary");
  if (config.conv_kernel_size < 0 || (config.has_conv() && config.conv_kernel_size % 2 == 0)) {
    Violation("bad conv kernel");
  }
  if (config.has_conv() && config.hidden_size % config.conv_groups != 0) Violation("bad groups");
  if (config.ScaleFactor() < 1 || config.ScaleFactor() > 3) Violation("bad scale factor");
  if (!config.relative_attention) return;

  const int span = config.AttentionSpan();
  const int max_position = config.EffectiveMaxRelativePositions();
  if (span < 1) Violation("attention span below 1");
  if (config.uses_log_buckets()) {
    const int mid = config.position_buckets / 2;
    if (mid < 1 || max_position - 1 <= mid) Violation("log buckets would divide by zero");
  }
  // Building the index costs O(max(span, max_position)); keep the fuzzer fast.
  if (std::max(span, max_position) > 4096) return;
  const dflash::RelativePositionIndex index(config);
  if (index.span() != span) Violation("index span differs");
  const int64_t reach = index.band() + 64;
  int32_t previous = index(-reach);
  for (int64_t delta = -reach; delta <= reach; ++delta) {
    const int32_t value = index(delta);
    if (value < 0 || value > 2 * span - 1) Violation("index outside [0, 2k)");
    if (value < previous) Violation("index not monotone");
    previous = value;
    if (config.uses_log_buckets()) {
      const int64_t bucket =
          dflash::LogBucketPosition(delta, config.position_buckets, max_position);
      if (dflash::LogBucketPosition(-delta, config.position_buckets, max_position) != -bucket) {
        Violation("bucket is not odd");
      }
      if (value != std::clamp<int64_t>(bucket + span, 0, 2 * int64_t{span} - 1)) {
        Violation("index != clamp(bucket + k)");
      }
    } else if (value != std::clamp<int64_t>(delta + span, 0, 2 * int64_t{span} - 1)) {
      Violation("index != clamp(delta + k)");
    }
  }
  if (index.settled() && (index(reach * 1000) != index(index.band()) ||
                          index(-reach * 1000) != index(-index.band()))) {
    Violation("settled index changes beyond its band");
  }
}

// Every typed accessor on every key of an object: errors are fine, exceptions and crashes not.
void ExerciseFields(const nlohmann::json& root) {
  if (!root.is_object()) return;
  const dflash::JsonFields fields(root, "fuzz");
  for (const auto& [key, unused] : root.items()) {
    (void)fields.Has(key);
    (void)fields.Int(key, 0);
    (void)fields.Number(key, 0.0);
    (void)fields.Bool(key, false);
    (void)fields.String(key, "");
    (void)fields.StringList(key, '|');
    (void)dflash::JsonExcerpt(root.at(key));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    dflash::Log().set_level(spdlog::level::off);  // pos_att_type warnings would flood stderr.
    return true;
  }();
  (void)quiet;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    absl::StatusOr<dflash::ModelConfig> config = dflash::ParseModelConfig(text, "fuzz.json");
    if (config.ok()) {
      CheckConfig(*config);
    } else if (config.status().code() != absl::StatusCode::kInvalidArgument ||
               config.status().message().find("fuzz.json") == absl::string_view::npos) {
      std::fprintf(stderr, "model_config_fuzz: unexpected error: %s\n",
                   config.status().ToString().c_str());
      std::abort();
    }
    absl::StatusOr<nlohmann::json> json = dflash::ParseJsonDocument(text, "fuzz", 8);
    if (json.ok()) ExerciseFields(*json);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "model_config_fuzz: exception escaped: %s\n", error.what());
    std::abort();
  }
  return 0;
}
