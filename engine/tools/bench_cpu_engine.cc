// dflash-bench-cpu: throughput of the CPU engine on random token batches of a fixed length.
// A benchmark, not a test: it reports numbers and asserts nothing about them.
//
//   dflash-bench-cpu --model=DIR [--seq_len=128] [--batch=8] [--iterations=5] [--json=out.json]
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/flags_help.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model/checkpoint.h"

ABSL_FLAG(std::string, model, "", "Checkpoint directory (config.json + safetensors).");
ABSL_FLAG(int, seq_len, 128, "Tokens per sequence.");
ABSL_FLAG(int, batch, 8, "Sequences per packed batch.");
ABSL_FLAG(int, iterations, 5, "Timed batches (after one warm-up batch).");
ABSL_FLAG(int, threads, 0, "BLAS threads (0: the BLAS default).");
ABSL_FLAG(std::string, json, "", "Also write the results as JSON to this file.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures CPU-engine throughput (tokens/s) on random batches.\n"
      "Usage: dflash-bench-cpu --model=DIR [--seq_len=128] [--batch=8] [--iterations=5]");
  dflash::ListFlagsOf({"engine/tools/bench_cpu_engine.cc"});
  absl::ParseCommandLine(argc, argv);
  const std::string model_dir = absl::GetFlag(FLAGS_model);
  const int seq_len = absl::GetFlag(FLAGS_seq_len);
  const int batch_size = absl::GetFlag(FLAGS_batch);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  if (model_dir.empty() || seq_len < 1 || batch_size < 1 || iterations < 1) {
    std::cerr << "dflash-bench-cpu: --model is required; sizes must be positive\n";
    return 2;
  }
  std::cerr << "loading " << model_dir << " ...\n";
  absl::StatusOr<dflash::Checkpoint> checkpoint = dflash::LoadCheckpoint(model_dir);
  if (!checkpoint.ok()) {
    std::cerr << "dflash-bench-cpu: " << checkpoint.status() << "\n";
    return 1;
  }
  const dflash::ModelConfig config = checkpoint->config;
  absl::StatusOr<std::unique_ptr<dflash::CpuEngine>> engine = dflash::CpuEngine::Create(
      *std::move(checkpoint), dflash::CpuEngine::Options{absl::GetFlag(FLAGS_threads)});
  if (!engine.ok()) {
    std::cerr << "dflash-bench-cpu: " << engine.status() << "\n";
    return 1;
  }
  std::mt19937 random(7);
  std::uniform_int_distribution<int32_t> token(4, config.vocab_size - 1);
  dflash::RunOptions options;
  options.outputs = config.head == dflash::HeadKind::kSequenceClassification
                        ? dflash::kSequenceLogits
                        : dflash::kEmbeddings;
  std::vector<double> seconds;
  for (int i = 0; i <= iterations; ++i) {
    dflash::PackedBatch batch;
    for (int s = 0; s < batch_size; ++s) {
      std::vector<int32_t> ids(static_cast<size_t>(seq_len));
      for (int32_t& id : ids) id = token(random);
      batch.Append(ids);
    }
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<dflash::BatchOutput> output = (*engine)->Run(batch, options);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!output.ok()) {
      std::cerr << "dflash-bench-cpu: " << output.status() << "\n";
      return 1;
    }
    if (i > 0) seconds.push_back(elapsed);  // Batch 0 warms caches and the BLAS thread pool.
    std::cerr << (i == 0 ? "warm-up" : "batch " + std::to_string(i)) << ": " << elapsed << " s\n";
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  const double tokens = static_cast<double>(seq_len) * batch_size;
  const dflash::EngineInfo info = (*engine)->Info();
  nlohmann::json result = {
      {"model", model_dir},
      {"hidden_size", config.hidden_size},
      {"layers", config.num_hidden_layers},
      {"heads", config.num_attention_heads},
      {"seq_len", seq_len},
      {"batch", batch_size},
      {"iterations", iterations},
      {"device", info.device},
      {"median_batch_s", median},
      {"min_batch_s", seconds.front()},
      {"tokens_per_s", tokens / median},
      {"sequences_per_s", batch_size / median},
  };
  std::cout << result.dump(2) << "\n";
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::ofstream(path) << result.dump(2) << "\n";
  }
  return 0;
}
