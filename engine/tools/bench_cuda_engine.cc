// dflash-bench-engine: the CUDA engine on the workloads of the engine benchmark, measured in one
// process: an MNLI-like set packed by token budget (whole-set seconds, tokens/s at two budgets,
// the split of device time between GEMMs, attention and the rest), one 128-token sequence, one
// 8192- and one 32768-token sequence (latency and activation memory), and the logits / hidden
// states of the first pairs for parity checks against transformers (bench/engine/); or, with
// --sequences, single sequences of the given ids each timed alone with their logits written (the
// float32 comparison of bench/engine/fp32_on_gpu.sh). A benchmark: it reports numbers and asserts
// nothing about them.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/flags_help.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/cuda/stage_timer.h"
#include "engine/model/checkpoint.h"
#include "engine/tuning/attention_family.h"

ABSL_FLAG(std::string, model, "", "Checkpoint directory (config.json + model.safetensors).");
ABSL_FLAG(std::string, pairs, "",
          "MNLI-like set: JSON Lines of {\"ids\": [...]} (required unless --sequences).");
ABSL_FLAG(std::string, dtype, "fp16", "Compute dtype: fp16, bf16 or fp32.");
ABSL_FLAG(int, max_batch_tokens, 16384, "Token budget of one packed batch for the MNLI-like set.");
ABSL_FLAG(int, repeats, 3, "Timed passes over the MNLI-like set (the median is reported).");
ABSL_FLAG(int, parity_count, 512, "Pairs whose logits are written for parity (0: none).");
ABSL_FLAG(int, parity_hidden_count, 8, "Pairs whose last hidden states are written.");
ABSL_FLAG(std::string, parity_prefix, "",
          "Write PREFIX.ours_<fp16|fp32>.f32 (logits) and PREFIX.ours_hidden_<...>.f32 (raw "
          "little-endian float32, row-major) in --dtype and in fp32.");
ABSL_FLAG(bool, mnli, true, "Time the MNLI-like set (whole-set seconds, tokens/s, split).");
ABSL_FLAG(int, single_runs, 60,
          "Runs of the one 128-token sequence (the first 10 warm up; fewer runs: all timed). "
          "Small values suit profilers such as ncu.");
ABSL_FLAG(int, gemm_timed_candidates, dflash::cuda::CudaEngine::Options{}.gemm_timed_candidates,
          "cuBLASLt candidates timed per GEMM shape bucket (<= 1: the heuristic's first choice).");
ABSL_FLAG(std::string, attention_profile, "auto",
          "Attention tuning profile: auto (the device's profile in $DFLASH_PROFILES_DIR, else in "
          "config/profiles beside the binaries, as dflash-server finds it), none (the built-in "
          "heuristic), or a YAML profile's path.");
ABSL_FLAG(bool, long_sequences, true, "Also time one 8192- and one 32768-token sequence.");
ABSL_FLAG(std::string, sequences, "",
          "JSON Lines of {\"ids\": [...]}: each sequence run alone on one engine sized for the "
          "longest (median ms of --sequence_runs after one untimed run), e.g. single sequences of "
          "128 ... 16384 tokens. Without --pairs only these run.");
ABSL_FLAG(int, sequence_runs, 5, "Timed runs of each --sequences entry.");
ABSL_FLAG(std::string, sequence_logits, "",
          "Write the logits of the --sequences entries here (raw little-endian float32 [N, "
          "num_labels], one row per entry, in file order).");
ABSL_FLAG(std::string, json, "", "Write the results as JSON to this file.");

namespace {

using dflash::PackedBatch;
using dflash::cuda::CudaEngine;
using Clock = std::chrono::steady_clock;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

absl::StatusOr<std::vector<std::vector<int32_t>>> ReadPairs(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<std::vector<int32_t>> pairs;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_discarded() || !row.contains("ids") || !row["ids"].is_array() ||
        row["ids"].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": expected {\"ids\": [...]}"));
    }
    pairs.push_back(row["ids"].get<std::vector<int32_t>>());
  }
  if (pairs.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no pairs"));
  return pairs;
}

// Packs sequences in order into batches of at most `budget` tokens, as the server's batcher does
// with a full queue.
std::vector<PackedBatch> Pack(const std::vector<std::vector<int32_t>>& sequences, size_t first,
                              size_t last, int budget) {
  std::vector<PackedBatch> batches(1);
  for (size_t i = first; i < last; ++i) {
    if (batches.back().total_tokens() + static_cast<int>(sequences[i].size()) > budget) {
      batches.emplace_back();
    }
    batches.back().Append(sequences[i]);
  }
  return batches;
}

absl::StatusOr<std::unique_ptr<CudaEngine>> MakeEngine(const std::string& dir,
                                                       dflash::kernels::DataType dtype,
                                                       int64_t max_tokens) {
  absl::StatusOr<dflash::Checkpoint> checkpoint = dflash::LoadCheckpoint(dir);
  if (!checkpoint.ok()) return checkpoint.status();
  CudaEngine::Options options;
  options.dtype = dtype;
  options.max_batch_tokens = max_tokens;
  options.gemm_timed_candidates = absl::GetFlag(FLAGS_gemm_timed_candidates);
  options.tuning.profile = absl::GetFlag(FLAGS_attention_profile);
  return CudaEngine::Create(*std::move(checkpoint), options);
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// One pass over a set of batches: wall seconds, and the sum of the batches' device spans.
struct Pass {
  double seconds = 0;
  double device_seconds = 0;
};

// One pass over `batches` (every batch's logits copied back).
absl::StatusOr<Pass> TimePass(CudaEngine& engine, const std::vector<PackedBatch>& batches) {
  dflash::RunOptions options;
  Pass pass;
  const auto start = Clock::now();
  for (const PackedBatch& batch : batches) {
    absl::StatusOr<dflash::BatchOutput> output = engine.Run(batch, options);
    if (!output.ok()) return output.status();
    pass.device_seconds += std::max(output->device_seconds, 0.0);
  }
  pass.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return pass;
}

size_t UsedDeviceBytes() {
  size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  return total - free_bytes;
}

// One sequence of `length` random tokens: median latency (ms) and the engine's activation memory
// (device memory it holds beyond the weights, GiB).
absl::StatusOr<std::pair<double, double>> TimeLongSequence(const std::string& dir,
                                                           dflash::kernels::DataType dtype,
                                                           int length, int vocab, int runs) {
  const size_t before = UsedDeviceBytes();
  absl::StatusOr<std::unique_ptr<CudaEngine>> engine = MakeEngine(dir, dtype, length);
  if (!engine.ok()) return engine.status();
  std::mt19937 rng(length);
  std::uniform_int_distribution<int32_t> id(4, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(length));
  for (int32_t& value : ids) value = id(rng);
  PackedBatch batch;
  batch.Append(ids);
  dflash::RunOptions options;
  std::vector<double> ms;
  for (int i = 0; i < runs + 1; ++i) {
    const auto start = Clock::now();
    absl::StatusOr<dflash::BatchOutput> output = (*engine)->Run(batch, options);
    if (!output.ok()) return output.status();
    if (i > 0)
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  const double activation =
      static_cast<double>(UsedDeviceBytes() - before -
                          static_cast<size_t>((*engine)->Info().weight_bytes)) /
      kGiB;
  return std::make_pair(Median(ms), activation);
}

absl::Status WriteFloats(const std::string& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  std::cerr << "wrote " << path << " (" << values.size() << " floats)\n";
  return absl::OkStatus();
}

// Logits of pairs [0, count) and hidden states of pairs [0, hidden_count), each pair run alone
// as transformers runs it in the parity script (no padding either way).
absl::Status WriteParity(CudaEngine& engine, const std::vector<std::vector<int32_t>>& pairs,
                         int count, int hidden_count, const std::string& prefix,
                         const std::string& tag) {
  std::vector<float> logits, hidden;
  dflash::RunOptions options;
  options.outputs = dflash::kSequenceLogits | dflash::kHiddenStates;
  for (int i = 0; i < count && i < static_cast<int>(pairs.size()); ++i) {
    PackedBatch batch;
    batch.Append(pairs[static_cast<size_t>(i)]);
    absl::StatusOr<dflash::BatchOutput> output = engine.Run(batch, options);
    if (!output.ok()) return output.status();
    logits.insert(logits.end(), output->sequence_logits.begin(), output->sequence_logits.end());
    if (i < hidden_count) {
      hidden.insert(hidden.end(), output->hidden_states.begin(), output->hidden_states.end());
    }
  }
  if (absl::Status status = WriteFloats(prefix + ".ours_" + tag + ".f32", logits); !status.ok()) {
    return status;
  }
  return WriteFloats(prefix + ".ours_hidden_" + tag + ".f32", hidden);
}

// Each of `sequences` run alone on one engine sized for the longest: {"tokens", "ms"} rows (the
// median of `runs` after one untimed run, which also captures the CUDA graph of small shapes),
// and the first run's logits appended to `logits`.
absl::StatusOr<nlohmann::json> TimeSequences(const std::string& dir,
                                             dflash::kernels::DataType dtype,
                                             const std::vector<std::vector<int32_t>>& sequences,
                                             int runs, std::vector<float>* logits) {
  size_t longest = 0;
  for (const auto& ids : sequences) longest = std::max(longest, ids.size());
  // Room for the graph padding of the small shapes (padded batches stay below the arena's rows).
  absl::StatusOr<std::unique_ptr<CudaEngine>> engine =
      MakeEngine(dir, dtype, static_cast<int64_t>(longest) + 64);
  if (!engine.ok()) return engine.status();
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& ids : sequences) {
    PackedBatch batch;
    batch.Append(ids);
    std::vector<double> ms;
    for (int i = 0; i < runs + 1; ++i) {
      const auto start = Clock::now();
      absl::StatusOr<dflash::BatchOutput> output = (*engine)->Run(batch, dflash::RunOptions{});
      if (!output.ok()) return output.status();
      if (i == 0) {
        logits->insert(logits->end(), output->sequence_logits.begin(),
                       output->sequence_logits.end());
      } else {
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      }
    }
    rows.push_back({{"tokens", ids.size()}, {"ms", Median(ms)}});
    std::cerr << "one " << ids.size() << "-token sequence: " << Median(ms) << " ms\n";
  }
  return rows;
}

int Fail(const absl::Status& status) {
  std::cerr << "dflash-bench-engine: " << status << "\n";
  return 1;
}

// Prints the results and writes them to --json when set; the process's exit status.
int WriteResult(const nlohmann::json& result) {
  const std::string text = result.dump(2);
  std::cout << text << "\n";
  if (!absl::GetFlag(FLAGS_json).empty()) {
    std::ofstream out(absl::GetFlag(FLAGS_json));
    out << text << "\n";
    if (!out) return Fail(absl::InternalError("cannot write --json"));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures the CUDA engine on its benchmark workloads (MNLI-like set, one 128-, 8192- and "
      "32768-token sequence) and writes parity outputs; or times the sequences of --sequences "
      "one at a time.\n"
      "Usage: dflash-bench-engine --model=DIR --pairs=FILE [--dtype=fp16] [--json=OUT] "
      "[--parity_prefix=PREFIX]\n"
      "       dflash-bench-engine --model=DIR --sequences=FILE --dtype=fp32 "
      "[--sequence_logits=OUT.f32] [--json=OUT]");
  dflash::ListFlagsOf({"engine/tools/bench_cuda_engine.cc"});
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_model);
  const std::string dtype_name = absl::GetFlag(FLAGS_dtype);
  const std::string sequences_path = absl::GetFlag(FLAGS_sequences);
  if (dir.empty() || (absl::GetFlag(FLAGS_pairs).empty() && sequences_path.empty())) {
    std::cerr << "dflash-bench-engine: --model and --pairs (or --sequences) are required (see "
                 "--help)\n";
    return 2;
  }
  const absl::StatusOr<dflash::kernels::DataType> parsed =
      dflash::tuning::ParseDataType(dtype_name);
  if (!parsed.ok()) {
    std::cerr << "dflash-bench-engine: --dtype: " << parsed.status().message() << "\n";
    return 2;
  }
  const dflash::kernels::DataType dtype = *parsed;
  nlohmann::json result;
  result["model"] = dir;
  result["dtype"] = dtype_name;
  if (!sequences_path.empty()) {
    absl::StatusOr<std::vector<std::vector<int32_t>>> sequences = ReadPairs(sequences_path);
    if (!sequences.ok()) return Fail(sequences.status());
    std::vector<float> logits;
    absl::StatusOr<nlohmann::json> rows = TimeSequences(
        dir, dtype, *sequences, std::max(1, absl::GetFlag(FLAGS_sequence_runs)), &logits);
    if (!rows.ok()) return Fail(rows.status());
    result["sequences"] = *std::move(rows);
    if (!absl::GetFlag(FLAGS_sequence_logits).empty()) {
      if (absl::Status status = WriteFloats(absl::GetFlag(FLAGS_sequence_logits), logits);
          !status.ok()) {
        return Fail(status);
      }
    }
  }
  if (absl::GetFlag(FLAGS_pairs).empty()) {
    return WriteResult(result);
  }
  absl::StatusOr<std::vector<std::vector<int32_t>>> pairs = ReadPairs(absl::GetFlag(FLAGS_pairs));
  if (!pairs.ok()) return Fail(pairs.status());
  int64_t total_tokens = 0;
  for (const auto& pair : *pairs) total_tokens += static_cast<int64_t>(pair.size());

  const int budget = absl::GetFlag(FLAGS_max_batch_tokens);
  int vocab = 0;
  {
    std::cerr << "engine at max_batch_tokens " << budget << " ...\n";
    absl::StatusOr<std::unique_ptr<CudaEngine>> engine = MakeEngine(dir, dtype, 65536);
    if (!engine.ok()) return Fail(engine.status());
    vocab = (*engine)->config().vocab_size;
    result["engine"] = {{"device", (*engine)->Info().device},
                        {"weight_bytes", (*engine)->Info().weight_bytes}};
    for (int tokens : {budget, 65536}) {
      if (!absl::GetFlag(FLAGS_mnli)) break;
      const std::vector<PackedBatch> batches = Pack(*pairs, 0, pairs->size(), tokens);
      if (absl::StatusOr<Pass> warm = TimePass(**engine, batches); !warm.ok()) {
        return Fail(warm.status());
      }
      std::vector<double> seconds;
      std::vector<double> busy;  // The device's share of each pass.
      for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
        absl::StatusOr<Pass> pass = TimePass(**engine, batches);
        if (!pass.ok()) return Fail(pass.status());
        seconds.push_back(pass->seconds);
        busy.push_back(pass->device_seconds / pass->seconds);
      }
      const double median = Median(seconds);
      std::cerr << "MNLI-like set, " << batches.size() << " batches of <= " << tokens
                << " tokens: " << median << " s, device busy " << 100 * Median(busy) << "% of it\n";
      result["tokens_per_s"][std::to_string(tokens)] = static_cast<double>(total_tokens) / median;
      result["device_busy_fraction"][std::to_string(tokens)] = Median(busy);
      if (tokens == budget) {
        result["mnli_like"] = {{"pairs", pairs->size()},
                               {"tokens", total_tokens},
                               {"batches", batches.size()},
                               {"max_batch_tokens", tokens},
                               {"seconds", median}};
        // The split, from one more pass with stage events (slower: for the proportions only).
        absl::StatusOr<std::unique_ptr<dflash::cuda::StageTimer>> timer =
            dflash::cuda::StageTimer::Create(4096);
        if (!timer.ok()) return Fail(timer.status());
        (*engine)->set_stage_timer(timer->get());
        if (absl::StatusOr<Pass> pass = TimePass(**engine, batches); !pass.ok()) {
          return Fail(pass.status());
        }
        (*engine)->set_stage_timer(nullptr);
        using dflash::cuda::StageTimer;
        result["split"] = {{"gemm_ms", (*timer)->milliseconds(StageTimer::kGemm)},
                           {"attention_ms", (*timer)->milliseconds(StageTimer::kAttention)},
                           {"other_ms", (*timer)->milliseconds(StageTimer::kOther)}};
        std::cerr << "split: " << result["split"].dump() << "\n";
      }
    }
    // One 128-token sequence: the latency of a lone request.
    std::vector<int32_t> ids((*pairs)[0]);
    std::mt19937 rng(128);
    std::uniform_int_distribution<int32_t> id(4, vocab - 1);
    ids.resize(128);
    for (size_t i = (*pairs)[0].size(); i < ids.size(); ++i) ids[i] = id(rng);
    PackedBatch single;
    single.Append(ids);
    std::vector<double> ms;
    const int runs = std::max(1, absl::GetFlag(FLAGS_single_runs));
    const int warmup = runs > 20 ? 10 : 0;
    for (int i = 0; i < runs; ++i) {
      const auto start = Clock::now();
      absl::StatusOr<dflash::BatchOutput> output = (*engine)->Run(single, dflash::RunOptions{});
      if (!output.ok()) return Fail(output.status());
      if (i >= warmup)
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    result["single_128"] = {{"ms", Median(ms)}};
    std::cerr << "one 128-token sequence: " << Median(ms) << " ms\n";
    {
      // Device time per stage of one direct (graph-free) 128-token forward, the median of 20:
      // where the lone request's time goes.
      absl::StatusOr<std::unique_ptr<dflash::cuda::StageTimer>> timer =
          dflash::cuda::StageTimer::Create(512);
      if (!timer.ok()) return Fail(timer.status());
      using dflash::cuda::StageTimer;
      std::vector<double> gemm, attention, other;
      (*engine)->set_stage_timer(timer->get());
      for (int i = 0; i < 20; ++i) {
        (*timer)->Reset();
        absl::StatusOr<dflash::BatchOutput> output = (*engine)->Run(single, dflash::RunOptions{});
        if (!output.ok()) return Fail(output.status());
        gemm.push_back((*timer)->milliseconds(StageTimer::kGemm));
        attention.push_back((*timer)->milliseconds(StageTimer::kAttention));
        other.push_back((*timer)->milliseconds(StageTimer::kOther));
      }
      (*engine)->set_stage_timer(nullptr);
      result["single_128"]["direct_split"] = {{"gemm_ms", Median(gemm)},
                                              {"attention_ms", Median(attention)},
                                              {"other_ms", Median(other)}};
      std::cerr << "one 128-token sequence, direct launches, device time per stage: "
                << result["single_128"]["direct_split"].dump() << "\n";
    }
    if (!absl::GetFlag(FLAGS_parity_prefix).empty()) {
      absl::Status status = WriteParity(**engine, *pairs, absl::GetFlag(FLAGS_parity_count),
                                        absl::GetFlag(FLAGS_parity_hidden_count),
                                        absl::GetFlag(FLAGS_parity_prefix), dtype_name);
      if (!status.ok()) return Fail(status);
    }
  }
  if (!absl::GetFlag(FLAGS_parity_prefix).empty() && dtype != dflash::kernels::DataType::kFloat32) {
    absl::StatusOr<std::unique_ptr<CudaEngine>> exact =
        MakeEngine(dir, dflash::kernels::DataType::kFloat32, 4096);
    if (!exact.ok()) return Fail(exact.status());
    absl::Status status = WriteParity(**exact, *pairs, absl::GetFlag(FLAGS_parity_count),
                                      absl::GetFlag(FLAGS_parity_hidden_count),
                                      absl::GetFlag(FLAGS_parity_prefix), "fp32");
    if (!status.ok()) return Fail(status);
  }
  if (absl::GetFlag(FLAGS_long_sequences)) {
    for (int length : {8192, 32768}) {
      absl::StatusOr<std::pair<double, double>> timing =
          TimeLongSequence(dir, dtype, length, vocab, length > 8192 ? 5 : 20);
      if (!timing.ok()) return Fail(timing.status());
      const std::string key = absl::StrCat("long_", length);
      result[key] = {{"ms", timing->first}, {"peak_gib", timing->second}};
      std::cerr << "one " << length << "-token sequence: " << timing->first << " ms, "
                << timing->second << " GiB beyond the weights\n";
    }
  }
  return WriteResult(result);
}
