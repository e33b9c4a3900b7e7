// dflash-bench-attention: times the fused disentangled-attention forward (including its C2P/P2C
// table GEMMs) on the shapes of the peers' reference table (kernels/attention/HISTORY.md): 12
// heads, v3 positions (256 buckets, 512 relative rows), 16,384 tokens per batch (B = 16384 / L),
// plus a packed MNLI-like mix. CUDA events, warm-up, median of --repeats runs, each run cold
// (ColdRunTimer: the L2 flushed before it, and the host's launch time kept out of the event time).
// Also reports the relative L2 error against the strict float32 path on the same inputs and the
// workspace the op allocates ("peak extra memory"). Writes JSON lines.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "common/flags_help.h"
#include "engine/cuda/dtype_encoding.h"
#include "engine/model/model_config.h"
#include "engine/model/relative_position.h"
#include "kernels/attention/disentangled_attention.h"

ABSL_FLAG(std::string, lengths, "128,256,512,1024,2048,4096,8192,16384,32768",
          "Sequence lengths (B = tokens / L).");
ABSL_FLAG(std::string, dtypes, "bf16,fp16",
          "Data types: bf16, fp16, tf32 (float32 inputs, AttentionProblem::allow_tf32: 1xTF32 "
          "tiles), fp32 (strict float32: 3xTF32 tiles, the SIMT kernel where they cannot run).");
ABSL_FLAG(std::string, head_dims, "64", "Head dims (heads = 768 / d unless --heads).");
ABSL_FLAG(int, heads, 12, "Attention heads.");
ABSL_FLAG(int, tokens, 16384, "Tokens per batch.");
ABSL_FLAG(int, repeats, 30, "Timed runs per shape (median reported).");
ABSL_FLAG(bool, accuracy, true, "Compare with the strict float32 path (slow for long L).");
ABSL_FLAG(bool, mnli_mix, true, "Also time a packed MNLI-like mix of 10..200-token sequences.");
ABSL_FLAG(bool, positions, true,
          "Both position terms (c2p and p2c, DeBERTa-v3); false times plain attention through the "
          "same kernels (rows named '<shape>-nopos'): what the position terms cost.");
ABSL_FLAG(std::string, json, "", "Write one JSON object per row to this file.");
ABSL_FLAG(int, key_groups, -1,
          "Pin AttentionKernelConfig::key_groups on the built-in variant (1, 2, or 4: the "
          "short-sequence kernel, sequences <= 128); -1 runs the built-in choice unchanged.");

ABSL_FLAG(std::string, mma, "",
          "Pin AttentionKernelConfig::mma on the built-in variant (sync, or wgmma: the warpgroup "
          "kernels, H100 / H200 at d = 64; alone it pins tables at every length); empty runs the "
          "built-in choice unchanged.");
ABSL_FLAG(std::string, windows, "",
          "Pin AttentionKernelConfig::windows on the built-in variant (tables, or computed: "
          "d <= 64), with that kernel's default register cap; empty runs the built-in choice.");
ABSL_FLAG(int, min_blocks, 0,
          "With --mma / --windows: pin AttentionKernelConfig::min_blocks_per_sm instead of the "
          "kernel's default cap (4: the warpgroup computed-window kernel at four CTAs per SM); 0 "
          "keeps the default.");

namespace {

using dflash::kernels::DataType;

#define CHECK_CUDA(expr)                                                \
  do {                                                                  \
    const cudaError_t error_ = (expr);                                  \
    if (error_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(error_));                         \
      std::exit(1);                                                     \
    }                                                                   \
  } while (false)

struct Device {
  void* data = nullptr;
  explicit Device(size_t bytes) { CHECK_CUDA(cudaMalloc(&data, std::max<size_t>(bytes, 256))); }
  ~Device() { cudaFree(data); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

// What --dtypes names: the inputs' type, and whether float32 runs on TF32 tensor cores.
struct Precision {
  std::string name;
  DataType dtype = DataType::kBFloat16;
  bool tf32 = false;
};

Precision ParsePrecision(const std::string& name) {
  if (name == "bf16") return {name, DataType::kBFloat16, false};
  if (name == "fp16") return {name, DataType::kFloat16, false};
  if (name == "tf32") return {name, DataType::kFloat32, true};
  if (name == "fp32") return {name, DataType::kFloat32, false};
  std::fprintf(stderr, "--dtypes: expected bf16, fp16, tf32 or fp32, got '%s'\n", name.c_str());
  std::exit(2);
}

// Times runs of a forward the way the peers' reference times were taken (triton's do_bench
// zeroes 256 MB before each run), and the same way as sdpa_bench.py / peers_bench.py: each timed
// run is queued behind a write of four times the L2 (at least 256 MB), so that
// - its inputs start cold in every repeat, as the benchmark's method requires ("L2 flushed"; at L =
// 128 the 75 MB of
//   QKV would otherwise be two-thirds cached from the previous repeat), and
// - the GPU is busy writing (flush_ms, measured here) while the host enqueues the run, so the
//   event time holds no launch latency; host_enqueue_ms (reported) must stay below flush_ms.
class ColdRunTimer {
 public:
  ColdRunTimer() {
    int device = 0;
    CHECK_CUDA(cudaGetDevice(&device));
    int l2_bytes = 0;
    CHECK_CUDA(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    flush_bytes_ = std::max<size_t>(4 * static_cast<size_t>(l2_bytes), size_t{256} << 20);
    CHECK_CUDA(cudaMalloc(&flush_, flush_bytes_));
    CHECK_CUDA(cudaEventCreate(&start_));
    CHECK_CUDA(cudaEventCreate(&stop_));
    std::vector<float> flush_times;
    for (int i = 0; i < 5; ++i) {
      CHECK_CUDA(cudaEventRecord(start_));
      Flush(i);
      CHECK_CUDA(cudaEventRecord(stop_));
      CHECK_CUDA(cudaEventSynchronize(stop_));
      flush_times.push_back(ElapsedMs());
    }
    flush_ms_ = Median(flush_times);
  }
  ~ColdRunTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaFree(flush_);
  }
  ColdRunTimer(const ColdRunTimer&) = delete;
  ColdRunTimer& operator=(const ColdRunTimer&) = delete;

  struct Timing {
    double median_ms = 0.0;
    double host_enqueue_ms = 0.0;  // Median host time of run() itself.
  };
  template <typename Run>
  Timing Time(const Run& run, int repeats) {
    std::vector<float> times;
    std::vector<float> host_times;
    for (int i = 0; i < repeats; ++i) {
      Flush(i);
      CHECK_CUDA(cudaEventRecord(start_));
      const auto enqueue_start = std::chrono::steady_clock::now();
      run();
      host_times.push_back(
          std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - enqueue_start)
              .count());
      CHECK_CUDA(cudaEventRecord(stop_));
      CHECK_CUDA(cudaEventSynchronize(stop_));
      times.push_back(ElapsedMs());
    }
    return {Median(times), Median(host_times)};
  }
  double flush_ms() const { return flush_ms_; }

 private:
  static double Median(std::vector<float> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  }
  // A different byte each time, so that no repeat can find the lines already holding it.
  void Flush(int repeat) { CHECK_CUDA(cudaMemsetAsync(flush_, repeat & 0xff, flush_bytes_)); }
  float ElapsedMs() const {
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

  void* flush_ = nullptr;
  size_t flush_bytes_ = 0;
  double flush_ms_ = 0.0;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

struct Row {
  std::string shape;
  int length = 0;
  int batch = 0;
  int heads = 0;
  int head_dim = 0;
  std::string dtype;
  double ms = 0.0;
  double host_enqueue_ms = 0.0;
  double tflops = 0.0;
  double rel_l2 = -1.0;
  double extra_mib = 0.0;
  // The sequence lengths of a mixed batch (empty for uniform ones): peers_bench.py runs the
  // peers on the same batch.
  std::vector<int> seqlens;
};

Row RunShape(const std::vector<int>& lengths, int heads, int head_dim, const Precision& precision,
             const dflash::RelativePositionIndex& index, cublasHandle_t blas, ColdRunTimer& timer) {
  const DataType dtype = precision.dtype;
  const size_t element = dflash::kernels::DataTypeBytes(dtype);
  const int width = heads * head_dim;
  std::vector<int32_t> cu{0};
  for (int length : lengths) cu.push_back(cu.back() + length);
  const int total = cu.back();
  const int max_len = *std::max_element(lengths.begin(), lengths.end());
  std::mt19937 random(static_cast<uint32_t>(total + max_len + head_dim));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(static_cast<size_t>(total) * 3 * width);
  for (float& x : qkv) x = normal(random);
  std::vector<float> pos(static_cast<size_t>(2 * index.span()) * width * 2);
  for (float& x : pos) x = normal(random);
  const std::vector<uint8_t> qkv_bytes = dflash::cuda::EncodeAs(dtype, qkv);
  const std::vector<uint8_t> pos_bytes = dflash::cuda::EncodeAs(dtype, pos);

  Device qkv_device(qkv_bytes.size()), pos_device(pos_bytes.size());
  Device out_device(static_cast<size_t>(total) * width * element);
  Device cu_device(cu.size() * 4), lut_device(index.table().size() * 4);
  CHECK_CUDA(
      cudaMemcpy(qkv_device.data, qkv_bytes.data(), qkv_bytes.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(
      cudaMemcpy(pos_device.data, pos_bytes.data(), pos_bytes.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(cu_device.data, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(lut_device.data, index.table().data(), index.table().size() * 4,
                        cudaMemcpyHostToDevice));

  dflash::kernels::AttentionProblem p;
  p.dtype = dtype;
  p.allow_tf32 = precision.tf32;
  p.num_heads = heads;
  p.head_dim = head_dim;
  const size_t row_bytes = static_cast<size_t>(width) * element;
  p.q = qkv_device.data;
  p.k = static_cast<uint8_t*>(qkv_device.data) + row_bytes;
  p.v = static_cast<uint8_t*>(qkv_device.data) + 2 * row_bytes;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = 3 * width;
  p.out = out_device.data;
  p.out_row_stride = width;
  const size_t pos_half = static_cast<size_t>(2 * index.span()) * width;
  if (absl::GetFlag(FLAGS_positions)) {
    p.pos_key = pos_device.data;
    p.pos_query = static_cast<uint8_t*>(pos_device.data) + pos_half * element;
  }
  p.cu_seqlens = static_cast<int32_t*>(cu_device.data);
  p.num_sequences = static_cast<int>(lengths.size());
  p.max_seqlen = max_len;
  p.total_tokens = total;
  p.scale = 1.0f / std::sqrt(3.0f * head_dim);
  p.positions = {index.table().data(), static_cast<int32_t*>(lut_device.data), index.band(),
                 index.span()};
  dflash::kernels::AttentionKernelConfig pinned = dflash::kernels::HeuristicAttentionConfig(p);
  if (absl::GetFlag(FLAGS_key_groups) >= 0) {
    pinned.key_groups = absl::GetFlag(FLAGS_key_groups);
    p.config = &pinned;
  }
  using dflash::kernels::AttentionMma;
  using dflash::kernels::AttentionWindows;
  const std::string mma = absl::GetFlag(FLAGS_mma);
  const std::string windows = absl::GetFlag(FLAGS_windows);
  if (!mma.empty()) {
    if (mma != "sync" && mma != "wgmma") {
      std::fprintf(stderr, "--mma: expected sync or wgmma, got %s\n", mma.c_str());
      std::exit(2);
    }
    pinned.mma = mma == "wgmma" ? AttentionMma::kWarpgroup : AttentionMma::kSync;
    // --mma=wgmma alone pins the warpgroup table kernel at every length.
    if (mma == "wgmma" && windows.empty()) pinned.windows = AttentionWindows::kTables;
  }
  if (!windows.empty()) {
    if (windows != "tables" && windows != "computed") {
      std::fprintf(stderr, "--windows: expected tables or computed, got %s\n", windows.c_str());
      std::exit(2);
    }
    pinned.windows = windows == "tables" ? AttentionWindows::kTables : AttentionWindows::kComputed;
  }
  if (!mma.empty() || !windows.empty()) {
    // The pinned kernel's default register cap (either instruction set): tables 2, computed
    // windows 3.
    pinned.min_blocks_per_sm = pinned.windows == AttentionWindows::kTables ? 2 : 3;
    if (absl::GetFlag(FLAGS_min_blocks) > 0) {
      pinned.min_blocks_per_sm = absl::GetFlag(FLAGS_min_blocks);
    }
    if (pinned.mma == AttentionMma::kWarpgroup) pinned.key_groups = 0;
    p.config = &pinned;
  }
  const size_t workspace_bytes = dflash::kernels::AttentionWorkspaceBytes(p);
  Device workspace(workspace_bytes);

  auto run = [&] {
    const cudaError_t error =
        dflash::kernels::DisentangledAttentionForward(p, workspace.data, blas, nullptr);
    if (error != cudaSuccess) {
      std::fprintf(stderr, "forward failed: %s\n", cudaGetErrorString(error));
      std::exit(1);
    }
  };
  for (int i = 0; i < 3; ++i) run();
  CHECK_CUDA(cudaDeviceSynchronize());
  const ColdRunTimer::Timing timing = timer.Time(run, absl::GetFlag(FLAGS_repeats));
  Row row;
  row.length = max_len;
  row.batch = static_cast<int>(lengths.size());
  row.heads = heads;
  row.head_dim = head_dim;
  row.dtype = precision.name;
  row.ms = timing.median_ms;
  row.host_enqueue_ms = timing.host_enqueue_ms;
  // The peers' formula: B*H*(4 L^2 d + 4 L R d), R = 512, per sequence; without the position
  // terms (--positions=false) plain attention's B*H*4 L^2 d.
  const double relative_rows = p.pos_key != nullptr ? 512.0 : 0.0;
  double flops = 0.0;
  for (int length : lengths) {
    flops += static_cast<double>(heads) *
             (4.0 * length * length * head_dim + 4.0 * length * relative_rows * head_dim);
  }
  row.tflops = flops / (row.ms * 1e-3) / 1e12;
  row.extra_mib = static_cast<double>(workspace_bytes) / (1 << 20);

  if (absl::GetFlag(FLAGS_accuracy)) {
    // The strict float32 path on the same rounded values.
    const std::vector<float> qkv_rounded = dflash::cuda::DecodeFrom(dtype, qkv_bytes);
    const std::vector<float> pos_rounded = dflash::cuda::DecodeFrom(dtype, pos_bytes);
    Device qkv32(qkv_rounded.size() * 4), pos32(pos_rounded.size() * 4);
    Device out32(static_cast<size_t>(total) * width * 4);
    CHECK_CUDA(
        cudaMemcpy(qkv32.data, qkv_rounded.data(), qkv_rounded.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(
        cudaMemcpy(pos32.data, pos_rounded.data(), pos_rounded.size() * 4, cudaMemcpyHostToDevice));
    dflash::kernels::AttentionProblem strict = p;
    strict.dtype = DataType::kFloat32;
    strict.allow_tf32 = false;
    strict.config = nullptr;  // The strict path has one variant.
    strict.q = qkv32.data;
    strict.k = static_cast<float*>(qkv32.data) + width;
    strict.v = static_cast<float*>(qkv32.data) + 2 * width;
    strict.out = out32.data;
    if (p.pos_key != nullptr) {
      strict.pos_key = pos32.data;
      strict.pos_query = static_cast<float*>(pos32.data) + pos_half;
    }
    // The float32 tiles (3xTF32) read float32 C2P / P2C tables.
    Device strict_workspace(dflash::kernels::AttentionWorkspaceBytes(strict));
    CHECK_CUDA(dflash::kernels::DisentangledAttentionForward(strict, strict_workspace.data, blas,
                                                             nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> want(static_cast<size_t>(total) * width);
    std::vector<uint8_t> got_bytes(want.size() * element);
    CHECK_CUDA(cudaMemcpy(want.data(), out32.data, want.size() * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(
        cudaMemcpy(got_bytes.data(), out_device.data, got_bytes.size(), cudaMemcpyDeviceToHost));
    const std::vector<float> got = dflash::cuda::DecodeFrom(dtype, got_bytes);
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
      norm += static_cast<double>(want[i]) * want[i];
    }
    row.rel_l2 = std::sqrt(diff / norm);
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times the fused disentangled-attention forward on the peers' benchmark shapes.\n"
      "Usage: dflash-bench-attention [--lengths=128,...] [--dtypes=bf16,fp16,tf32] "
      "[--json=out.jsonl]");
  dflash::ListFlagsOf({"bench/attention/attention_bench.cc"});
  absl::ParseCommandLine(argc, argv);
  dflash::ModelConfig config;  // DeBERTa-v3 positions.
  config.relative_attention = true;
  config.position_buckets = 256;
  config.max_relative_positions = -1;
  config.max_position_embeddings = 512;
  const dflash::RelativePositionIndex index(config);
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  ColdRunTimer timer;
  std::printf(
      "each timed run follows an L2 flush of %.3f ms (host enqueue times must stay below)\n",
      timer.flush_ms());
  std::ofstream json_out;
  if (!absl::GetFlag(FLAGS_json).empty()) json_out.open(absl::GetFlag(FLAGS_json));
  const int tokens = absl::GetFlag(FLAGS_tokens);
  std::printf("%-14s %6s %4s %5s %4s %5s %10s %8s %10s %9s\n", "shape", "L", "B", "heads", "d",
              "dtype", "ms", "TFLOP/s", "relL2", "extraMiB");
  auto emit = [&](const Row& row) {
    std::printf("%-14s %6d %4d %5d %4d %5s %10.4f %8.1f %10.2e %9.1f\n", row.shape.c_str(),
                row.length, row.batch, row.heads, row.head_dim, row.dtype.c_str(), row.ms,
                row.tflops, row.rel_l2, row.extra_mib);
    std::fflush(stdout);
    if (json_out.is_open()) {
      nlohmann::json object{{"shape", row.shape},
                            {"L", row.length},
                            {"B", row.batch},
                            {"heads", row.heads},
                            {"head_dim", row.head_dim},
                            {"dtype", row.dtype},
                            {"ours_ms", row.ms},
                            {"ours_host_enqueue_ms", row.host_enqueue_ms},
                            {"l2_flush_ms", timer.flush_ms()},
                            {"tflops", row.tflops},
                            {"rel_l2_err_vs_fp32", row.rel_l2},
                            {"peak_extra_mib", row.extra_mib}};
      if (!row.seqlens.empty()) object["seqlens"] = row.seqlens;
      json_out << object.dump() << "\n";
      json_out.flush();
    }
  };
  for (const std::string& dtype_name :
       std::vector<std::string>(absl::StrSplit(absl::GetFlag(FLAGS_dtypes), ','))) {
    const Precision precision = ParsePrecision(dtype_name);
    for (const std::string& d_text :
         std::vector<std::string>(absl::StrSplit(absl::GetFlag(FLAGS_head_dims), ','))) {
      const int head_dim = std::stoi(d_text);
      const int heads = head_dim == 64 ? absl::GetFlag(FLAGS_heads) : 768 / head_dim;
      for (const std::string& l_text :
           std::vector<std::string>(absl::StrSplit(absl::GetFlag(FLAGS_lengths), ','))) {
        const int length = std::stoi(l_text);
        const int batch = std::max(1, tokens / length);
        Row row = RunShape(std::vector<int>(static_cast<size_t>(batch), length), heads, head_dim,
                           precision, index, blas, timer);
        row.shape = absl::GetFlag(FLAGS_positions) ? "uniform" : "uniform-nopos";
        emit(row);
      }
      if (absl::GetFlag(FLAGS_mnli_mix)) {
        // MNLI-like pairs: premise ~ lognormal, hypothesis shorter; 10..200 tokens, mean ~44.
        std::mt19937 random(44);
        std::lognormal_distribution<double> length_of(std::log(40.0), 0.45);
        std::vector<int> lengths;
        int sum = 0;
        while (sum < tokens) {
          const int length = std::clamp(static_cast<int>(length_of(random)), 10, 200);
          lengths.push_back(std::min(length, tokens - sum));
          sum += lengths.back();
        }
        Row row = RunShape(lengths, heads, head_dim, precision, index, blas, timer);
        row.shape = absl::GetFlag(FLAGS_positions) ? "mnli_mix" : "mnli_mix-nopos";
        row.seqlens = lengths;
        emit(row);
      }
    }
  }
  cublasDestroy(blas);
  return 0;
}
