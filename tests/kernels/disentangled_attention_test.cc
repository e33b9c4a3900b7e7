// The fused disentangled-attention kernel against a float64 host reference of
//   S[i,j] = (Q_i.K_j + Q_i.PosK[idx(i-j)] + K_j.PosQ[idx(i-j)]) * scale, softmax_j, O = P V
// (and, for the longest sequences, against the SIMT float32 GPU kernel, itself checked against
// float64 here). Inputs are drawn fresh per case, outputs are poisoned (NaN) before every run and
// checked fully written. GPU cases skip with a message where no GPU exists; the host-side checks
// (argument validation, workspace sizing) run everywhere.
#include "kernels/attention/disentangled_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <numbers>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/relative_position.h"
#include "gtest/gtest.h"
#include "kernels/attention/attention_block_order.h"
#include "kernels/attention/attention_params.h"
#include "tests/kernels/cuda_test_support.h"

namespace dflash {
namespace {

using kernels::DataType;

enum class Positions { kNone, kC2P, kP2C, kBoth };

using test::Name;

const char* Name(Positions positions) {
  switch (positions) {
    case Positions::kNone:
      return "none";
    case Positions::kC2P:
      return "c2p";
    case Positions::kP2C:
      return "p2c";
    case Positions::kBoth:
      return "c2p+p2c";
  }
  return "?";
}

// DeBERTa-v3 position settings: 256 buckets, max_relative_positions 512 (span k = 256).
ModelConfig V3Positions(bool log_buckets) {
  ModelConfig config;
  config.relative_attention = true;
  config.position_buckets = log_buckets ? 256 : -1;
  config.max_relative_positions = log_buckets ? -1 : 64;
  config.max_position_embeddings = 512;
  return config;
}

// One randomly drawn problem in the service's layout: a fused QKV buffer [T, 3*H*d] whose Q, K
// and V are strided views, PosK/PosQ [2k, H*d].
struct Case {
  DataType dtype = DataType::kBFloat16;
  int heads = 2;
  int head_dim = 64;
  Positions positions = Positions::kBoth;
  std::vector<int> lengths;
  bool log_buckets = true;
  uint32_t seed = 1;
  // float32 only: AttentionProblem::allow_tf32.
  bool tf32 = false;
  // Elements by which the fused QKV buffer is shifted from its 16-byte aligned allocation.
  int misalign = 0;
};

struct HostProblem {
  Case spec;
  RelativePositionIndex index;
  int total = 0;
  int span = 0;
  std::vector<int32_t> cu_seqlens;
  std::vector<float> qkv;  // Rounded to the dtype: what the kernel sees.
  std::vector<float> pos_key;
  std::vector<float> pos_query;
  float scale = 0.0f;

  explicit HostProblem(const Case& c) : spec(c), index(V3Positions(c.log_buckets)) {
    std::mt19937 random(c.seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    cu_seqlens.push_back(0);
    for (int length : c.lengths) cu_seqlens.push_back(cu_seqlens.back() + length);
    total = cu_seqlens.back();
    span = index.span();
    const int width = c.heads * c.head_dim;
    qkv.resize(static_cast<size_t>(total) * 3 * width);
    for (float& x : qkv) x = normal(random);
    qkv = test::RoundTo(qkv, c.dtype);
    pos_key.resize(static_cast<size_t>(2 * span) * width);
    pos_query.resize(pos_key.size());
    for (float& x : pos_key) x = normal(random);
    for (float& x : pos_query) x = normal(random);
    pos_key = test::RoundTo(pos_key, c.dtype);
    pos_query = test::RoundTo(pos_query, c.dtype);
    const int types =
        (c.positions == Positions::kBoth) ? 2 : (c.positions == Positions::kNone ? 0 : 1);
    scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim) * static_cast<float>(1 + types));
  }

  bool use_c2p() const {
    return spec.positions == Positions::kC2P || spec.positions == Positions::kBoth;
  }
  bool use_p2c() const {
    return spec.positions == Positions::kP2C || spec.positions == Positions::kBoth;
  }

  // float64 reference O [T, H*d] and LSE [H, T].
  void Reference(std::vector<double>* out, std::vector<double>* lse) const {
    const int d = spec.head_dim;
    const int width = spec.heads * d;
    out->assign(static_cast<size_t>(total) * width, 0.0);
    lse->assign(static_cast<size_t>(spec.heads) * total, 0.0);
    auto work = [&](int s, int h) {
      const int start = cu_seqlens[s];
      const int length = cu_seqlens[s + 1] - start;
      std::vector<double> scores(static_cast<size_t>(length));
      for (int i = 0; i < length; ++i) {
        const float* q = &qkv[static_cast<size_t>(start + i) * 3 * width + h * d];
        double max = -INFINITY;
        for (int j = 0; j < length; ++j) {
          const float* k = &qkv[static_cast<size_t>(start + j) * 3 * width + width + h * d];
          const int slot = index(i - j);
          const float* pk = &pos_key[static_cast<size_t>(slot) * width + h * d];
          const float* pq = &pos_query[static_cast<size_t>(slot) * width + h * d];
          double score = 0.0;
          for (int c = 0; c < d; ++c) {
            score += static_cast<double>(q[c]) * k[c];
            if (use_c2p()) score += static_cast<double>(q[c]) * pk[c];
            if (use_p2c()) score += static_cast<double>(k[c]) * pq[c];
          }
          scores[j] = score * scale;
          max = std::max(max, scores[j]);
        }
        double sum = 0.0;
        for (double& score : scores) {
          score = std::exp(score - max);
          sum += score;
        }
        double* o = &(*out)[static_cast<size_t>(start + i) * width + h * d];
        for (int j = 0; j < length; ++j) {
          const float* v = &qkv[static_cast<size_t>(start + j) * 3 * width + 2 * width + h * d];
          for (int c = 0; c < d; ++c) o[c] += scores[j] / sum * v[c];
        }
        (*lse)[static_cast<size_t>(h) * total + start + i] = max + std::log(sum);
      }
    };
    std::vector<std::function<void()>> jobs;
    for (int s = 0; s + 1 < static_cast<int>(cu_seqlens.size()); ++s) {
      for (int h = 0; h < spec.heads; ++h) jobs.push_back([&, s, h] { work(s, h); });
    }
    // Longest first, spread over the host's cores.
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    std::atomic<size_t> next{0};
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (size_t job = next++; job < jobs.size(); job = next++) jobs[job]();
      });
    }
    for (std::thread& thread : pool) thread.join();
  }
};

// Device copies of a HostProblem and one kernel run.
class DeviceProblem {
 public:
  explicit DeviceProblem(const HostProblem& host) : host_(host) {}

  void Upload() {
    const DataType dtype = host_.spec.dtype;
    const std::vector<uint8_t> qkv = test::Encode(host_.qkv, dtype);
    qkv_offset_ = static_cast<size_t>(host_.spec.misalign) * test::ElementSize(dtype);
    qkv_ = test::DeviceBuffer(qkv.size() + qkv_offset_);
    ASSERT_NE(qkv_.get(), nullptr);
    DFLASH_CUDA_OK(cudaMemcpy(static_cast<uint8_t*>(qkv_.get()) + qkv_offset_, qkv.data(),
                              qkv.size(), cudaMemcpyHostToDevice));
    const std::vector<uint8_t> pk = test::Encode(host_.pos_key, dtype);
    const std::vector<uint8_t> pq = test::Encode(host_.pos_query, dtype);
    pos_key_ = test::DeviceBuffer(pk.size());
    pos_query_ = test::DeviceBuffer(pq.size());
    DFLASH_CUDA_OK(cudaMemcpy(pos_key_.get(), pk.data(), pk.size(), cudaMemcpyHostToDevice));
    DFLASH_CUDA_OK(cudaMemcpy(pos_query_.get(), pq.data(), pq.size(), cudaMemcpyHostToDevice));
    const std::vector<int32_t>& table = host_.index.table();
    lut_ = test::DeviceBuffer(table.size() * 4);
    DFLASH_CUDA_OK(cudaMemcpy(lut_.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    cu_ = test::DeviceBuffer(host_.cu_seqlens.size() * 4);
    DFLASH_CUDA_OK(cudaMemcpy(cu_.get(), host_.cu_seqlens.data(), host_.cu_seqlens.size() * 4,
                              cudaMemcpyHostToDevice));
    const size_t width = static_cast<size_t>(host_.spec.heads) * host_.spec.head_dim;
    out_ = test::DeviceBuffer(host_.total * width * test::ElementSize(dtype));
    lse_ = test::DeviceBuffer(static_cast<size_t>(host_.spec.heads) * host_.total * 4);
  }

  kernels::AttentionProblem Problem() const {
    const Case& c = host_.spec;
    const int width = c.heads * c.head_dim;
    const size_t element = test::ElementSize(c.dtype);
    kernels::AttentionProblem p;
    p.dtype = c.dtype;
    p.allow_tf32 = c.tf32;
    p.num_heads = c.heads;
    p.head_dim = c.head_dim;
    const uint8_t* qkv = static_cast<const uint8_t*>(qkv_.get()) + qkv_offset_;
    p.q = qkv;
    p.k = qkv + width * element;
    p.v = qkv + 2 * width * element;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = 3 * width;
    p.out = out_.get();
    p.out_row_stride = width;
    p.pos_key = host_.use_c2p() ? pos_key_.get() : nullptr;
    p.pos_query = host_.use_p2c() ? pos_query_.get() : nullptr;
    p.cu_seqlens = cu_.as<int32_t>();
    p.num_sequences = static_cast<int>(c.lengths.size());
    p.max_seqlen = *std::max_element(c.lengths.begin(), c.lengths.end());
    p.total_tokens = host_.total;
    p.scale = host_.scale;
    p.positions = {host_.index.table().data(), lut_.as<int32_t>(), host_.index.band(),
                   host_.index.span()};
    p.lse = lse_.as<float>();
    return p;
  }

  // Runs `problem` with poisoned outputs; returns O as float and LSE.
  void Run(const kernels::AttentionProblem& problem, std::vector<float>* out,
           std::vector<float>* lse) {
    DFLASH_CUDA_OK(cudaMemset(out_.get(), 0xff, out_.bytes()));  // NaN in every dtype.
    DFLASH_CUDA_OK(cudaMemset(lse_.get(), 0xff, lse_.bytes()));
    test::DeviceBuffer workspace(kernels::AttentionWorkspaceBytes(problem));
    cublasHandle_t blas = nullptr;
    ASSERT_EQ(cublasCreate(&blas), CUBLAS_STATUS_SUCCESS);
    const cudaError_t error =
        kernels::DisentangledAttentionForward(problem, workspace.get(), blas, nullptr);
    cublasDestroy(blas);
    ASSERT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
    DFLASH_CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint8_t> bytes(out_.bytes());
    DFLASH_CUDA_OK(cudaMemcpy(bytes.data(), out_.get(), bytes.size(), cudaMemcpyDeviceToHost));
    *out = test::Decode(bytes, problem.dtype);
    lse->resize(lse_.bytes() / 4);
    DFLASH_CUDA_OK(cudaMemcpy(lse->data(), lse_.get(), lse_.bytes(), cudaMemcpyDeviceToHost));
  }

 private:
  const HostProblem& host_;
  size_t qkv_offset_ = 0;
  test::DeviceBuffer qkv_, pos_key_, pos_query_, lut_, cu_, out_, lse_;
};

template <typename A, typename B>
double RelativeL2(const std::vector<A>& got, const std::vector<B>& want) {
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double delta = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    diff += delta * delta;
    norm += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

size_t CountNonFinite(const std::vector<float>& values) {
  return static_cast<size_t>(
      std::count_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); }));
}

// Relative-L2 bounds against float64 on the same (rounded) inputs. Half precision: P and O are
// rounded to the input type and the C2P/P2C tables are stored in it, as transformers does.
// float32 (strict: the 3xTF32 tiles, or the SIMT kernel where tiles cannot run): float32's
// rounding of sums over up to thousands of keys.
double Tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return 1e-5;
    case DataType::kFloat16:
      return 2e-3;
    case DataType::kBFloat16:
      return 1e-2;
  }
  return 0.0;
}

// TF32 (float32 inputs, allow_tf32): 10 mantissa bits, fp16's resolution, and no rounding of P
// and O to a 16-bit type.
constexpr double kTf32Tolerance = 2e-3;

// The bound for a case: a float32 case with allow_tf32 runs the TF32 kernel only where its Q / K
// / V are 16-byte aligned; misaligned, the strict kernel (and its bound).
double CaseTolerance(const Case& c) {
  return c.tf32 && c.misalign % 4 == 0 ? kTf32Tolerance : Tolerance(c.dtype);
}

// Whether the float32 tile kernel (3xTF32, or 1xTF32 with allow_tf32) runs `problem` on this GPU:
// on H100 / H200 (compute capability 9.x) it must, at every head dim, wherever its Q / K / V are
// 16-byte aligned (`aligned`); elsewhere its shared memory may not fit.
bool Float32TilesRun(const kernels::AttentionProblem& problem, bool aligned) {
  const bool runs = kernels::AttentionRunsFloat32Tiles(problem);
  int device = 0;
  int major = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      major == 9) {
    EXPECT_EQ(runs, aligned) << "float32 tiles must run on an H100 / H200 where Q / K / V are "
                                "16-byte aligned, and only there";
  }
  if (!aligned) {
    EXPECT_FALSE(runs);
  }
  return runs;
}

// Whether the TF32 kernel runs `problem` on this GPU. H100 / H200 (compute capability 9.x, 227 KB
// of shared memory per block) must run it at every head dim; elsewhere its shared memory may not
// fit (A100 at d = 128, sm_86 / sm_89 at any d), the strict kernel runs instead and TF32 cases
// skip.
bool Tf32KernelRuns(const kernels::AttentionProblem& problem) {
  const bool runs = kernels::AttentionRunsTf32(problem);
  int device = 0;
  int major = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      major == 9) {
    EXPECT_TRUE(runs) << "the TF32 kernel must run on an H100 / H200";
  }
  if (!runs) std::cout << "[attention] the TF32 kernel does not run here: case skipped\n";
  return runs;
}

std::string ConfigName(const kernels::AttentionKernelConfig& config) {
  return std::string(kernels::AttentionWindowsName(config.windows)) + "/" +
         std::to_string(config.min_blocks_per_sm) +
         (config.key_groups != 0 ? "/kg" + std::to_string(config.key_groups) : std::string()) +
         (config.mma != kernels::AttentionMma::kSync
              ? std::string("/") + kernels::AttentionMmaName(config.mma)
              : std::string());
}

// Every output and LSE written and finite, each within `tolerance` relative L2 of float64's;
// returns the two errors (outputs, LSE).
std::pair<double, double> ExpectOutputsMatch(const std::vector<float>& out,
                                             const std::vector<float>& lse,
                                             const std::vector<double>& want_out,
                                             const std::vector<double>& want_lse,
                                             double tolerance) {
  EXPECT_EQ(CountNonFinite(out), 0u) << "unwritten or non-finite outputs";
  EXPECT_EQ(CountNonFinite(lse), 0u);
  const double error = RelativeL2(out, want_out);
  const double lse_error = RelativeL2(lse, want_lse);
  EXPECT_LE(error, tolerance);
  EXPECT_LE(lse_error, tolerance);
  return {error, lse_error};
}

// `config`: the variant to run (null: the heuristic's).
void CheckAgainstFloat64(const Case& c, const kernels::AttentionKernelConfig* config = nullptr) {
  const HostProblem host(c);
  DeviceProblem device(host);
  ASSERT_NO_FATAL_FAILURE(device.Upload());
  std::vector<float> out;
  std::vector<float> lse;
  kernels::AttentionProblem problem = device.Problem();
  problem.config = config;
  if (c.tf32 && c.misalign % 4 == 0 && !Tf32KernelRuns(problem)) {
    GTEST_SKIP() << "the TF32 kernel does not fit this GPU";
  }
  // Strict float32: the 3xTF32 tiles where they fit, else the SIMT kernel; one bound for both.
  const bool float32_tiles =
      c.dtype == DataType::kFloat32 && Float32TilesRun(problem, c.misalign % 4 == 0);
  // Misaligned by a non-multiple of 16 bytes, allow_tf32 leaves the problem to the strict kernel.
  if (c.tf32 && c.misalign % 4 != 0) {
    EXPECT_FALSE(kernels::AttentionRunsTf32(problem));
  }
  ASSERT_NO_FATAL_FAILURE(device.Run(problem, &out, &lse));
  std::vector<double> want_out;
  std::vector<double> want_lse;
  host.Reference(&want_out, &want_lse);
  const auto [error, lse_error] =
      ExpectOutputsMatch(out, lse, want_out, want_lse, CaseTolerance(c));
  std::cout << "[attention] " << Name(c.dtype)
            << (c.dtype == DataType::kFloat32
                    ? (float32_tiles ? (c.tf32 ? " tf32 tiles" : " 3xtf32 tiles") : " simt")
                    : "")
            << (c.misalign != 0 ? " misaligned" : "") << " d=" << c.head_dim << " "
            << Name(c.positions) << (c.log_buckets ? "" : " no-buckets")
            << (config != nullptr ? " variant " + ConfigName(*config) : std::string())
            << " tokens=" << host.total << ": rel L2 " << error << ", lse " << lse_error << "\n";
}

// The short-sequence kernel (sequences <= kShortMaxKeys), pinned.
kernels::AttentionKernelConfig ShortKernelConfig() {
  kernels::AttentionKernelConfig config;
  config.windows = kernels::AttentionWindows::kComputed;
  config.min_blocks_per_sm = 3;
  config.key_groups = 4;
  return config;
}

// A tile kernel with the register cap the heuristic gives it: tables 2 (the only one compiled),
// computed windows 3; key groups left to the launch.
kernels::AttentionKernelConfig TileKernelConfig(kernels::AttentionMma mma,
                                                kernels::AttentionWindows windows) {
  kernels::AttentionKernelConfig config;
  config.mma = mma;
  config.windows = windows;
  config.min_blocks_per_sm = windows == kernels::AttentionWindows::kTables ? 2 : 3;
  return config;
}

// A warpgroup kernel (AttentionMma::kWarpgroup).
kernels::AttentionKernelConfig WarpgroupConfig(kernels::AttentionWindows windows) {
  return TileKernelConfig(kernels::AttentionMma::kWarpgroup, windows);
}

// Computed windows with the key tiles of each CTA in one warp group and split over two, pinned
// (AttentionKernelConfig::key_groups; at L <= 64 the second group has no tile), and, where every
// sequence is <= kShortMaxKeys, the short-sequence kernel.
void CheckEveryKeyGroupCount(const Case& c) {
  const bool short_batch =
      *std::max_element(c.lengths.begin(), c.lengths.end()) <= kernels::kShortMaxKeys;
  for (int groups : {1, 2, 4}) {
    if (groups == 4 && !short_batch) continue;
    kernels::AttentionKernelConfig config = ShortKernelConfig();
    config.key_groups = groups;
    CheckAgainstFloat64(c, &config);
  }
}

// A case of a (dtype, head dim, position terms) parameter with these lengths, seeded from both.
Case ParamCase(const std::tuple<DataType, int, Positions>& param, std::vector<int> lengths,
               uint32_t seed_base) {
  Case c;
  std::tie(c.dtype, c.head_dim, c.positions) = param;
  c.lengths = std::move(lengths);
  c.seed = seed_base + static_cast<uint32_t>(c.head_dim * 31 + static_cast<int>(c.positions) * 7 +
                                             static_cast<int>(c.dtype));
  return c;
}

// "bf16_d64_c2p_p2c": the test name of a (dtype, head dim, position terms) parameter.
std::string TypeDimPositionsName(
    const testing::TestParamInfo<std::tuple<DataType, int, Positions>>& param) {
  std::string name = std::string(Name(std::get<0>(param.param))) + "_d" +
                     std::to_string(std::get<1>(param.param)) + "_" +
                     Name(std::get<2>(param.param));
  std::replace(name.begin(), name.end(), '+', '_');
  return name;
}

// "d64_c2p_p2c": the test name of a (head dim, position terms) parameter of a float32 suite.
std::string DimPositionsName(const testing::TestParamInfo<std::tuple<int, Positions>>& param) {
  std::string name =
      "d" + std::to_string(std::get<0>(param.param)) + "_" + Name(std::get<1>(param.param));
  std::replace(name.begin(), name.end(), '+', '_');
  return name;
}

class AttentionAccuracyTest : public testing::TestWithParam<std::tuple<DataType, int, Positions>> {
};

TEST_P(AttentionAccuracyTest, PackedMixedLengthsMatchFloat64) {
  DFLASH_REQUIRE_GPU();
  const Case c =
      ParamCase(GetParam(), {1, 2, 63, 64, 65, 127, 255, 256, 257, 511, 512, 513, 1000}, 0);
  CheckAgainstFloat64(c);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, AttentionAccuracyTest,
                         testing::Combine(testing::Values(DataType::kFloat16, DataType::kBFloat16,
                                                          DataType::kFloat32),
                                          testing::Values(32, 64, 128),
                                          testing::Values(Positions::kC2P, Positions::kP2C,
                                                          Positions::kBoth, Positions::kNone)),
                         TypeDimPositionsName);

// Batches whose longest sequence is <= 512 (v3): every tile is a band tile. Up to L = 1024 the
// kernel computes the C2P/P2C windows of each tile from PosK/PosQ with MMAs instead of reading
// the tables of two GEMMs (d <= 64); PackedMixedLengthsMatchFloat64 covers saturated tiles there.
class ComputedWindowsTest : public testing::TestWithParam<std::tuple<DataType, int, Positions>> {};

TEST_P(ComputedWindowsTest, ShortPackedLengthsMatchFloat64) {
  DFLASH_REQUIRE_GPU();
  const Case c =
      ParamCase(GetParam(), {1, 2, 63, 64, 65, 127, 128, 129, 255, 256, 257, 383, 511, 512}, 1000);
  CheckAgainstFloat64(c);
  // The automatic choice takes one key group for a batch this size: the others, pinned.
  CheckEveryKeyGroupCount(c);
}

INSTANTIATE_TEST_SUITE_P(HalfTypes, ComputedWindowsTest,
                         testing::Combine(testing::Values(DataType::kFloat16, DataType::kBFloat16),
                                          testing::Values(32, 64),
                                          testing::Values(Positions::kC2P, Positions::kP2C,
                                                          Positions::kBoth)),
                         TypeDimPositionsName);

TEST(AttentionTest, SingleSequencesAndLengthOne) {
  DFLASH_REQUIRE_GPU();
  for (int length : {1, 2, 64, 513}) {
    Case c;
    c.lengths = {length};
    c.seed = 100 + length;
    CheckAgainstFloat64(c);
  }
  Case ones;
  ones.lengths = {1, 1, 1, 5, 1};
  CheckAgainstFloat64(ones);
}

// One short sequence leaves most SMs idle: the automatic choice runs the short-sequence kernel up
// to 128 tokens and above splits each CTA's key tiles over two warp groups (odd and even tile
// counts; L <= 1024 computes windows, where every tile runs as a band tile); each must match the
// reference like the one-group kernel. The padded-layout test
// below runs two groups too (18 CTAs), with a sequence whose second group sees only masked keys.
TEST(AttentionTest, KeyGroupsOnSingleShortSequences) {
  DFLASH_REQUIRE_GPU();
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    for (int head_dim : {32, 64}) {
      for (int length : {17, 64, 65, 128, 200, 1000}) {
        Case c;
        c.dtype = dtype;
        c.head_dim = head_dim;
        c.lengths = {length};
        c.seed = static_cast<uint32_t>(300 + length + head_dim);
        CheckAgainstFloat64(c);  // Automatic: the short kernel to 128 tokens, then two groups.
        CheckEveryKeyGroupCount(c);
      }
    }
  }
}

TEST(AttentionTest, PlainClampedPositionsWithoutBuckets) {
  DFLASH_REQUIRE_GPU();
  Case c;
  c.log_buckets = false;
  c.lengths = {3, 100, 300};
  CheckAgainstFloat64(c);
  // The short-sequence kernel where idx is not linear over a CTA's deltas (clamped at +-64): its
  // slot-table path.
  c.lengths = {3, 100, 128, 65};
  const kernels::AttentionKernelConfig short_kernel = ShortKernelConfig();
  for (int head_dim : {32, 64}) {
    c.head_dim = head_dim;
    CheckAgainstFloat64(c, &short_kernel);
  }
}

// The short-sequence kernel (2 row warps x 4 key warps of 32 keys per CTA of 32 query rows) on
// packed batches of every length class it meets: below, at and past each 16-row / 32-key / 32-row
// boundary up to its 128-token limit, with length-1 sequences.
class ShortKernelTest : public testing::TestWithParam<std::tuple<DataType, int, Positions>> {};

TEST_P(ShortKernelTest, PackedLengthsUpTo128MatchFloat64) {
  DFLASH_REQUIRE_GPU();
  const Case c = ParamCase(
      GetParam(), {1, 2, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 96, 100, 127, 128, 1}, 5000);
  const kernels::AttentionKernelConfig short_kernel = ShortKernelConfig();
  CheckAgainstFloat64(c, &short_kernel);
}

INSTANTIATE_TEST_SUITE_P(HalfTypes, ShortKernelTest,
                         testing::Combine(testing::Values(DataType::kFloat16, DataType::kBFloat16),
                                          testing::Values(32, 64),
                                          testing::Values(Positions::kC2P, Positions::kP2C,
                                                          Positions::kBoth)),
                         TypeDimPositionsName);

// Every variant a tuning profile may name (AttentionCandidateConfigs), on mixed lengths up to
// 1000 (band and saturated tiles) with both position terms, and on 1500 / 2100 (longer than the
// heuristic's computed-window limit, which profiles may move).
class VariantTest : public testing::TestWithParam<std::tuple<DataType, int>> {};

TEST_P(VariantTest, EveryCandidateMatchesFloat64) {
  DFLASH_REQUIRE_GPU();
  for (const std::vector<int>& lengths :
       {std::vector<int>{1, 63, 65, 127, 257, 511, 513, 1000}, std::vector<int>{1500, 2100, 7}}) {
    Case c;
    std::tie(c.dtype, c.head_dim) = GetParam();
    c.lengths = lengths;
    c.seed = static_cast<uint32_t>(2000 + c.head_dim + static_cast<int>(c.dtype) + lengths[0]);
    const HostProblem host(c);
    DeviceProblem device(host);
    ASSERT_NO_FATAL_FAILURE(device.Upload());
    const std::vector<kernels::AttentionKernelConfig> candidates =
        kernels::AttentionCandidateConfigs(device.Problem());
    // d <= 64 has both window modes (and d = 64 two register caps for computed windows, and the
    // warpgroup table and computed-window kernels on an H100 / H200, the latter also at four
    // CTAs per SM).
    const size_t warpgroup = c.head_dim == 64 && kernels::AttentionWgmmaRuns() ? 3 : 0;
    EXPECT_EQ(candidates.size(), c.head_dim == 64 ? 3u + warpgroup : c.head_dim == 32 ? 2u : 1u);
    for (const kernels::AttentionKernelConfig& config : candidates) {
      SCOPED_TRACE(ConfigName(config));
      CheckAgainstFloat64(c, &config);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HalfTypes, VariantTest,
                         testing::Combine(testing::Values(DataType::kFloat16, DataType::kBFloat16),
                                          testing::Values(32, 64, 128)),
                         [](const testing::TestParamInfo<std::tuple<DataType, int>>& param) {
                           return std::string(Name(std::get<0>(param.param))) + "_d" +
                                  std::to_string(std::get<1>(param.param));
                         });

// Sequences of one packed batch stay apart: tile kernels read whole 64-row tiles (the warpgroup
// ones by TMA), past a sequence's end into the next sequence's rows, and infinities there must
// not reach this sequence's outputs (0 x inf = NaN in P V). The middle sequence's Q, K and V are
// all +inf; the other two must still match float64 (outputs and LSE), for every variant, with
// both position terms and with C2P alone (the absent window is read as zeros), after a long and
// after a one-tile sequence. The 1300-token sequence keeps the warpgroup kernels (grids that
// leave SMs idle run the key-group kernels only up to 1024 tokens).
TEST(AttentionTest, InfinitiesStayInTheirSequence) {
  DFLASH_REQUIRE_GPU();
  for (const Positions positions : {Positions::kBoth, Positions::kC2P}) {
    for (const std::vector<int>& lengths :
         {std::vector<int>{1100, 70, 1300}, std::vector<int>{40, 70, 1300}}) {
      Case c;
      c.positions = positions;
      c.lengths = lengths;
      c.seed = 77 + static_cast<uint32_t>(lengths[0]);
      HostProblem host(c);
      const size_t row = static_cast<size_t>(3 * c.heads * c.head_dim);
      std::fill(host.qkv.begin() + host.cu_seqlens[1] * row,
                host.qkv.begin() + host.cu_seqlens[2] * row,
                std::numeric_limits<float>::infinity());
      std::vector<double> want_out;
      std::vector<double> want_lse;
      host.Reference(&want_out, &want_lse);
      DeviceProblem device(host);
      ASSERT_NO_FATAL_FAILURE(device.Upload());
      const std::vector<kernels::AttentionKernelConfig> configs =
          kernels::AttentionCandidateConfigs(device.Problem());
      EXPECT_EQ(std::count_if(configs.begin(), configs.end(),
                              [](const kernels::AttentionKernelConfig& config) {
                                return config.mma == kernels::AttentionMma::kWarpgroup;
                              }),
                kernels::AttentionWgmmaRuns() ? 3 : 0);
      const size_t width = static_cast<size_t>(c.heads * c.head_dim);
      for (const kernels::AttentionKernelConfig& config : configs) {
        SCOPED_TRACE(ConfigName(config) + " " + Name(positions) + " first length " +
                     std::to_string(lengths[0]));
        kernels::AttentionProblem problem = device.Problem();
        problem.config = &config;
        std::vector<float> out;
        std::vector<float> lse;
        ASSERT_NO_FATAL_FAILURE(device.Run(problem, &out, &lse));
        for (const int sequence : {0, 2}) {
          const size_t first = host.cu_seqlens[sequence];
          const size_t last = host.cu_seqlens[sequence + 1];
          const std::vector<float> got(out.begin() + first * width, out.begin() + last * width);
          const std::vector<double> want(want_out.begin() + first * width,
                                         want_out.begin() + last * width);
          EXPECT_EQ(CountNonFinite(got), 0u) << "sequence " << sequence;
          EXPECT_LE(RelativeL2(got, want), Tolerance(c.dtype)) << "sequence " << sequence;
          // LSE [H, T]: this sequence's tokens of every head.
          for (int head = 0; head < c.heads; ++head) {
            const size_t base = static_cast<size_t>(head) * host.total;
            const std::vector<float> got_lse(lse.begin() + base + first, lse.begin() + base + last);
            const std::vector<double> want_head(want_lse.begin() + base + first,
                                                want_lse.begin() + base + last);
            EXPECT_EQ(CountNonFinite(got_lse), 0u) << "sequence " << sequence;
            EXPECT_LE(RelativeL2(got_lse, want_head), Tolerance(c.dtype))
                << "sequence " << sequence;
          }
        }
      }
    }
  }
}

// The online softmax's running row maximum m moves as the key tiles stream by, and O and l are
// rescaled to it. Here every query's content score rises along the keys: by about 3.2 per 64-key
// tile (exp2 domain) and by 10 more at keys 200 and 700, 70 in all. A kernel that fixed m too early
// would overflow FP16's P (2^70), one that moved m without rescaling O and l would be wrong
// everywhere; a lazy rescale (m moves only past a threshold, HISTORY.md v9.10) must keep P within
// FP16 (its threshold 8 does; 24 fails here). Every variant must match float64, with and without
// saturated tiles (2100 tokens), in both half types.
TEST(AttentionTest, ScoresRisingAlongTheKeysMatchFloat64) {
  DFLASH_REQUIRE_GPU();
  for (const DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    Case c;
    c.dtype = dtype;
    c.lengths = {1000, 2100, 65, 1};
    c.seed = 91 + static_cast<uint32_t>(dtype);
    HostProblem host(c);
    const int d = c.head_dim;
    const int width = c.heads * d;
    // Q[0] = 8 for every query, K[0] = the key's rise over 8 * scale * log2(e), so that
    // Q K^T * scale in the exp2 domain rises by `rise`; PosQ[0] = 0 keeps the P2C term as drawn.
    constexpr float kQuery = 8.0f;
    const float per_unit = kQuery * host.scale * std::numbers::log2e_v<float>;
    for (size_t s = 0; s + 1 < host.cu_seqlens.size(); ++s) {
      for (int j = 0; j < host.cu_seqlens[s + 1] - host.cu_seqlens[s]; ++j) {
        const float rise =
            0.05f * static_cast<float>(j) + (j >= 200 ? 10.0f : 0.0f) + (j >= 700 ? 10.0f : 0.0f);
        float* row = &host.qkv[static_cast<size_t>(host.cu_seqlens[s] + j) * 3 * width];
        for (int h = 0; h < c.heads; ++h) {
          row[h * d] = kQuery;
          row[width + h * d] = rise / per_unit;
        }
      }
    }
    host.qkv = test::RoundTo(host.qkv, dtype);
    for (size_t slot = 0; slot < host.pos_query.size() / width; ++slot) {
      for (int h = 0; h < c.heads; ++h) host.pos_query[slot * width + h * d] = 0.0f;
    }
    std::vector<double> want_out;
    std::vector<double> want_lse;
    host.Reference(&want_out, &want_lse);
    DeviceProblem device(host);
    ASSERT_NO_FATAL_FAILURE(device.Upload());
    for (const kernels::AttentionKernelConfig& config :
         kernels::AttentionCandidateConfigs(device.Problem())) {
      SCOPED_TRACE(std::string(Name(dtype)) + " " + ConfigName(config));
      kernels::AttentionProblem problem = device.Problem();
      problem.config = &config;
      std::vector<float> out;
      std::vector<float> lse;
      ASSERT_NO_FATAL_FAILURE(device.Run(problem, &out, &lse));
      ExpectOutputsMatch(out, lse, want_out, want_lse, Tolerance(dtype));
    }
  }
}

TEST(AttentionTest, LongSequencesMatchStrictFloat32Path) {
  DFLASH_REQUIRE_GPU();
  for (int length : {4097, 8192, 32768}) {
    for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16}) {
      Case c;
      c.dtype = dtype;
      c.heads = 1;
      c.lengths = {length};
      c.seed = length;
      const HostProblem host(c);
      DeviceProblem device(host);
      ASSERT_NO_FATAL_FAILURE(device.Upload());
      std::vector<float> out;
      std::vector<float> lse;
      ASSERT_NO_FATAL_FAILURE(device.Run(device.Problem(), &out, &lse));
      // Every other variant a profile may pick (AttentionCandidateConfigs after the heuristic's:
      // both window modes, and both instruction sets where the warpgroup one runs) on the same
      // inputs.
      const std::vector<kernels::AttentionKernelConfig> candidates =
          kernels::AttentionCandidateConfigs(device.Problem());
      const std::vector<kernels::AttentionKernelConfig> variants(candidates.begin() + 1,
                                                                 candidates.end());
      std::vector<std::vector<float>> variant_out(variants.size());
      for (size_t i = 0; i < variants.size(); ++i) {
        // The mma.sync table-free variants stop at 8192 here (the slowest).
        if (length > 8192 && variants[i].windows == kernels::AttentionWindows::kComputed &&
            variants[i].mma == kernels::AttentionMma::kSync) {
          continue;
        }
        kernels::AttentionProblem problem = device.Problem();
        problem.config = &variants[i];
        std::vector<float> variant_lse;
        ASSERT_NO_FATAL_FAILURE(device.Run(problem, &variant_out[i], &variant_lse));
      }
      // The SIMT float32 kernel on the same rounded values (Q / K / V one float off 16-byte
      // alignment, where the float32 tiles do not run): a reference independent of the tiles.
      Case strict_case = c;
      strict_case.dtype = DataType::kFloat32;
      strict_case.misalign = 1;
      HostProblem strict_host(strict_case);
      strict_host.qkv = host.qkv;
      strict_host.pos_key = host.pos_key;
      strict_host.pos_query = host.pos_query;
      DeviceProblem strict(strict_host);
      ASSERT_NO_FATAL_FAILURE(strict.Upload());
      std::vector<float> want;
      std::vector<float> want_lse;
      ASSERT_FALSE(kernels::AttentionRunsFloat32Tiles(strict.Problem()));
      ASSERT_NO_FATAL_FAILURE(strict.Run(strict.Problem(), &want, &want_lse));
      EXPECT_EQ(CountNonFinite(out), 0u);
      const double error = RelativeL2(out, want);
      EXPECT_LE(error, Tolerance(dtype)) << "length " << length;
      for (size_t i = 0; i < variants.size(); ++i) {
        if (variant_out[i].empty()) continue;
        EXPECT_EQ(CountNonFinite(variant_out[i]), 0u);
        const double variant_error = RelativeL2(variant_out[i], want);
        EXPECT_LE(variant_error, Tolerance(dtype))
            << ConfigName(variants[i]) << ", length " << length;
        std::cout << "[attention] " << Name(dtype) << " L=" << length << " variant "
                  << ConfigName(variants[i]) << " vs strict fp32: rel L2 " << variant_error << "\n";
      }
      std::cout << "[attention] " << Name(dtype) << " L=" << length << " vs strict fp32: rel L2 "
                << error << "\n";
    }
  }
}

class Tf32Test : public testing::TestWithParam<std::tuple<int, Positions>> {};

TEST_P(Tf32Test, PackedMixedLengthsMatchFloat64) {
  DFLASH_REQUIRE_GPU();
  Case c = ParamCase({DataType::kFloat32, std::get<0>(GetParam()), std::get<1>(GetParam())},
                     {1, 2, 63, 64, 65, 127, 255, 256, 257, 511, 512, 513, 1000}, 100);
  c.tf32 = true;
  CheckAgainstFloat64(c);
}

INSTANTIATE_TEST_SUITE_P(HeadDims, Tf32Test,
                         testing::Combine(testing::Values(32, 64, 128),
                                          testing::Values(Positions::kC2P, Positions::kP2C,
                                                          Positions::kBoth, Positions::kNone)),
                         DimPositionsName);

// Long sequences (saturated tiles, 32768 tokens) on the TF32 kernel against the strict float32
// kernel on the same inputs; its workspace holds float32 tables.
TEST(AttentionTest, Tf32LongSequencesMatchStrictFloat32Path) {
  DFLASH_REQUIRE_GPU();
  for (int length : {4097, 8192, 32768}) {
    Case c;
    c.dtype = DataType::kFloat32;
    c.heads = 1;
    c.lengths = {length};
    c.seed = length + 3;
    const HostProblem host(c);
    DeviceProblem device(host);
    ASSERT_NO_FATAL_FAILURE(device.Upload());
    std::vector<float> want;
    std::vector<float> want_lse;
    ASSERT_NO_FATAL_FAILURE(device.Run(device.Problem(), &want, &want_lse));
    kernels::AttentionProblem tf32 = device.Problem();
    tf32.allow_tf32 = true;
    if (!Tf32KernelRuns(tf32)) GTEST_SKIP() << "the TF32 kernel does not fit this GPU";
    kernels::AttentionProblem as_bf16 = tf32;
    as_bf16.dtype = DataType::kBFloat16;
    const kernels::AttentionKernelConfig tables;  // The half types' table kernel.
    as_bf16.config = &tables;
    // float32 tables: twice the bytes of 16-bit ones (each table rounded up to 256 bytes).
    EXPECT_NEAR(static_cast<double>(kernels::AttentionWorkspaceBytes(tf32)),
                2.0 * static_cast<double>(kernels::AttentionWorkspaceBytes(as_bf16)), 2 * 256.0);
    std::vector<float> out;
    std::vector<float> lse;
    ASSERT_NO_FATAL_FAILURE(device.Run(tf32, &out, &lse));
    EXPECT_EQ(CountNonFinite(out), 0u);
    EXPECT_EQ(CountNonFinite(lse), 0u);
    const double error = RelativeL2(out, want);
    const double lse_error = RelativeL2(lse, want_lse);
    EXPECT_LE(error, kTf32Tolerance) << "length " << length;
    EXPECT_LE(lse_error, kTf32Tolerance) << "length " << length;
    std::cout << "[attention] tf32 L=" << length << " vs strict fp32: rel L2 " << error << ", lse "
              << lse_error << "\n";
  }
}

// Strict float32 (no allow_tf32) on the float32 tiles in 3xTF32, at every head dim and position
// term, lengths off the 64-row tile (one row of a tile, one past, a partial last tile), against
// float64 to the float32 bound; CheckAgainstFloat64 requires the tiles on an H100 / H200.
class Float32TilesTest : public testing::TestWithParam<std::tuple<int, Positions>> {};

TEST_P(Float32TilesTest, PackedLengthsOffTheTileMatchFloat64) {
  DFLASH_REQUIRE_GPU();
  Case c = ParamCase({DataType::kFloat32, std::get<0>(GetParam()), std::get<1>(GetParam())},
                     {3, 64, 100, 129, 191, 700, 1025}, 200);
  c.heads = 3;
  CheckAgainstFloat64(c);
}

INSTANTIATE_TEST_SUITE_P(HeadDims, Float32TilesTest,
                         testing::Combine(testing::Values(32, 64, 128),
                                          testing::Values(Positions::kC2P, Positions::kP2C,
                                                          Positions::kBoth, Positions::kNone)),
                         DimPositionsName);

// Long sequences (saturated tiles) on the strict float32 tiles against the SIMT float32 kernel on
// the same inputs (Q / K / V misaligned by one float for it), and at 4097 tokens against float64
// too; the tiles' workspace holds float32 tables.
TEST(AttentionTest, Float32TilesOnLongSequencesMatchTheSimtKernel) {
  DFLASH_REQUIRE_GPU();
  for (int length : {4097, 8192, 32768}) {
    Case c;
    c.dtype = DataType::kFloat32;
    c.heads = 1;
    c.lengths = {length};
    c.seed = length + 5;
    const HostProblem host(c);
    DeviceProblem device(host);
    ASSERT_NO_FATAL_FAILURE(device.Upload());
    const kernels::AttentionProblem tiles = device.Problem();
    if (!Float32TilesRun(tiles, true)) GTEST_SKIP() << "the float32 tiles do not fit this GPU";
    EXPECT_GT(kernels::AttentionWorkspaceBytes(tiles), 0u);
    std::vector<float> out;
    std::vector<float> lse;
    ASSERT_NO_FATAL_FAILURE(device.Run(tiles, &out, &lse));
    Case simt_case = c;
    simt_case.misalign = 1;
    const HostProblem simt_host(simt_case);
    DeviceProblem simt(simt_host);
    ASSERT_NO_FATAL_FAILURE(simt.Upload());
    ASSERT_FALSE(kernels::AttentionRunsFloat32Tiles(simt.Problem()));
    std::vector<float> want;
    std::vector<float> want_lse;
    ASSERT_NO_FATAL_FAILURE(simt.Run(simt.Problem(), &want, &want_lse));
    EXPECT_EQ(CountNonFinite(out), 0u);
    EXPECT_EQ(CountNonFinite(lse), 0u);
    const double error = RelativeL2(out, want);
    const double lse_error = RelativeL2(lse, want_lse);
    EXPECT_LE(error, Tolerance(DataType::kFloat32)) << "length " << length;
    EXPECT_LE(lse_error, Tolerance(DataType::kFloat32)) << "length " << length;
    std::cout << "[attention] 3xtf32 tiles L=" << length << " vs simt fp32: rel L2 " << error
              << ", lse " << lse_error << "\n";
    if (length == 4097) {
      std::vector<double> want_out;
      std::vector<double> want_lse64;
      host.Reference(&want_out, &want_lse64);
      const auto [error64, lse_error64] =
          ExpectOutputsMatch(out, lse, want_out, want_lse64, Tolerance(DataType::kFloat32));
      std::cout << "[attention] 3xtf32 tiles L=" << length << " vs float64: rel L2 " << error64
                << ", lse " << lse_error64 << "\n";
    }
  }
}

// allow_tf32 permits the TF32 kernel; where it cannot run (Q / K / V not 16-byte aligned) the
// SIMT kernel does, to its float32 bound, with no tables.
TEST(AttentionTest, Tf32FallsBackToStrictOnMisalignedInputs) {
  DFLASH_REQUIRE_GPU();
  Case c;
  c.dtype = DataType::kFloat32;
  c.tf32 = true;
  c.misalign = 1;
  c.lengths = {63, 600};
  CheckAgainstFloat64(c);
  const HostProblem host(c);
  DeviceProblem device(host);
  ASSERT_NO_FATAL_FAILURE(device.Upload());
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(device.Problem()), 0u);
}

// The sequences of `c` packed, then right-padded to `padded` rows each with a key mask, both run
// with `config` (null: the heuristic's). Padding rows hold random queries, and keys and values
// that are NaN, +inf or -inf: masked keys must contribute nothing (P is 0 there, but 0 x NaN is
// NaN), and padded query rows must still come out finite.
void CheckPaddedEqualsPacked(const Case& c, int padded,
                             const kernels::AttentionKernelConfig* config) {
  const HostProblem host(c);
  DeviceProblem packed(host);
  ASSERT_NO_FATAL_FAILURE(packed.Upload());
  std::vector<float> packed_out;
  std::vector<float> packed_lse;
  kernels::AttentionProblem packed_problem = packed.Problem();
  packed_problem.config = config;
  ASSERT_NO_FATAL_FAILURE(packed.Run(packed_problem, &packed_out, &packed_lse));

  Case padded_case = c;
  padded_case.lengths = std::vector<int>(c.lengths.size(), padded);
  HostProblem padded_host(padded_case);
  const int width = 3 * c.heads * c.head_dim;
  std::vector<uint8_t> mask(c.lengths.size() * padded, 0);
  for (size_t s = 0; s < c.lengths.size(); ++s) {
    for (int t = 0; t < c.lengths[s]; ++t) {
      std::copy_n(&host.qkv[static_cast<size_t>(host.cu_seqlens[s] + t) * width], width,
                  &padded_host.qkv[(s * padded + t) * width]);
      mask[s * padded + t] = 1;
    }
  }
  const float poisons[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  const int q_width = c.heads * c.head_dim;
  for (size_t s = 0; s < c.lengths.size(); ++s) {
    for (int t = c.lengths[s]; t < padded; ++t) {
      float* keys_and_values = &padded_host.qkv[(s * padded + t) * width + q_width];
      for (int i = 0; i < 2 * q_width; ++i) keys_and_values[i] = poisons[(t + i) % 3];
    }
  }
  padded_host.pos_key = host.pos_key;
  padded_host.pos_query = host.pos_query;
  DeviceProblem device(padded_host);
  ASSERT_NO_FATAL_FAILURE(device.Upload());
  test::DeviceBuffer mask_device(mask.size());
  DFLASH_CUDA_OK(cudaMemcpy(mask_device.get(), mask.data(), mask.size(), cudaMemcpyHostToDevice));
  kernels::AttentionProblem problem = device.Problem();
  problem.key_padding_mask = mask_device.as<uint8_t>();
  problem.padded_length = padded;
  problem.config = config;
  if (c.tf32 && !Tf32KernelRuns(problem)) return;
  std::vector<float> padded_out;
  std::vector<float> padded_lse;
  ASSERT_NO_FATAL_FAILURE(device.Run(problem, &padded_out, &padded_lse));
  EXPECT_EQ(CountNonFinite(padded_out), 0u) << "padded query rows must be finite";
  // Valid rows agree; only the C2P/P2C GEMMs (over 390 rather than 205 rows, so possibly another
  // cuBLAS algorithm) may round a table entry differently.
  const int out_width = c.heads * c.head_dim;
  std::vector<float> padded_valid;
  for (size_t s = 0; s < c.lengths.size(); ++s) {
    for (int t = 0; t < c.lengths[s]; ++t) {
      const auto row = padded_out.begin() + static_cast<int64_t>(s * padded + t) * out_width;
      padded_valid.insert(padded_valid.end(), row, row + out_width);
    }
  }
  ASSERT_EQ(padded_valid.size(), packed_out.size());
  EXPECT_LE(RelativeL2(padded_valid, packed_out), 1e-4);
}

TEST(AttentionTest, PaddedLayoutEqualsPackedOnValidRows) {
  DFLASH_REQUIRE_GPU();
  Case c;
  c.lengths = {70, 5, 130};
  CheckPaddedEqualsPacked(c, 130, nullptr);
  // The short-sequence kernel (sequences <= 128), pinned: the 5-token sequence's key warps past
  // its fifth key see only masked keys.
  c.lengths = {70, 5, 128};
  const kernels::AttentionKernelConfig short_kernel = ShortKernelConfig();
  CheckPaddedEqualsPacked(c, 128, &short_kernel);
  // The warpgroup kernels, where they run: tables, and computed windows past 1024 tokens (below,
  // this grid of 126 CTAs would run the mma.sync key-group kernels: AttentionLaunchConfig), also
  // at four CTAs per SM (V read from the padded layout's copy into the C2P region).
  if (kernels::AttentionWgmmaRuns()) {
    c.lengths = {1100, 5, 1300};
    for (const kernels::AttentionWindows windows :
         {kernels::AttentionWindows::kTables, kernels::AttentionWindows::kComputed}) {
      const kernels::AttentionKernelConfig warpgroup = WarpgroupConfig(windows);
      CheckPaddedEqualsPacked(c, 1300, &warpgroup);
    }
    kernels::AttentionKernelConfig four = WarpgroupConfig(kernels::AttentionWindows::kComputed);
    four.min_blocks_per_sm = 4;
    CheckPaddedEqualsPacked(c, 1300, &four);
  }
  // The mma.sync tile kernels, pinned (on an H100 / H200 the heuristic runs the warpgroup ones at
  // d = 64): tables and computed windows with one key group, and the two-group computed-window
  // kernel; then d = 128 (tables) and d = 32 (computed windows), the heuristic's.
  c.lengths = {1100, 5, 1300};
  for (const kernels::AttentionWindows windows :
       {kernels::AttentionWindows::kTables, kernels::AttentionWindows::kComputed}) {
    for (const int key_groups : {1, 2}) {
      if (windows == kernels::AttentionWindows::kTables && key_groups == 2) continue;
      kernels::AttentionKernelConfig sync = TileKernelConfig(kernels::AttentionMma::kSync, windows);
      sync.key_groups = key_groups;
      CheckPaddedEqualsPacked(c, 1300, &sync);
    }
  }
  for (const int head_dim : {128, 32}) {
    Case other = c;
    other.head_dim = head_dim;
    CheckPaddedEqualsPacked(other, 1300, nullptr);
  }
  // The TF32 kernel.
  c.dtype = DataType::kFloat32;
  c.tf32 = true;
  c.lengths = {70, 5, 1030};
  CheckPaddedEqualsPacked(c, 1030, nullptr);
  // Strict float32: the 3xTF32 tiles (saturated tiles at 1030 rows), at every head dim, and the
  // SIMT kernel (misaligned).
  c.tf32 = false;
  for (const int head_dim : {32, 64, 128}) {
    Case strict = c;
    strict.head_dim = head_dim;
    CheckPaddedEqualsPacked(strict, 1030, nullptr);
  }
  c.lengths = {70, 5, 130};
  c.misalign = 1;
  CheckPaddedEqualsPacked(c, 130, nullptr);
}

// Host-side checks: no GPU needed.
TEST(AttentionArgumentsTest, RejectsUnsupportedProblemsBeforeTouchingTheDevice) {
  kernels::AttentionProblem problem;
  problem.num_heads = 2;
  problem.head_dim = 48;  // Unsupported.
  EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  problem.head_dim = 64;  // Still no tensors.
  EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
}

// A valid-looking half-precision problem whose device pointers are never dereferenced because
// validation refuses it first.
kernels::AttentionProblem HostOnlyProblem(const RelativePositionIndex& index) {
  alignas(16) static const int16_t kDummy[8] = {};  // Stand-in for device tensors.
  kernels::AttentionProblem problem;
  problem.dtype = DataType::kBFloat16;
  problem.num_heads = 1;
  problem.head_dim = 64;
  problem.q = problem.k = problem.v = kDummy;
  problem.out = const_cast<int16_t*>(kDummy);
  problem.q_row_stride = problem.k_row_stride = problem.v_row_stride = 192;
  problem.out_row_stride = 64;
  problem.pos_key = problem.pos_query = kDummy;
  problem.cu_seqlens = reinterpret_cast<const int32_t*>(kDummy);
  problem.num_sequences = 1;
  problem.max_seqlen = 4096;
  problem.total_tokens = 4096;
  problem.scale = 0.1f;
  problem.positions = {index.table().data(), index.table().data(), index.band(), index.span(),
                       index.settled()};
  // Tables (mma.sync): a problem that passes validation fails at the table GEMM's missing cuBLAS
  // handle, before any kernel could touch these host-only pointers.
  static const kernels::AttentionKernelConfig kTables;
  problem.config = &kTables;
  return problem;
}

// Regression (review): with buckets growing faster than one slot per delta, a band tile needs
// more slots than its shared-memory window holds; such tables are refused, not misread.
TEST(AttentionArgumentsTest, RejectsTablesWhoseTilesOutgrowTheSlotWindow) {
  // Control: the v3 table passes validation and fails only later, at the missing cuBLAS handle.
  const RelativePositionIndex v3(V3Positions(true));
  EXPECT_EQ(kernels::DisentangledAttentionForward(HostOnlyProblem(v3), nullptr, nullptr, nullptr),
            cudaErrorUnknown);
  ModelConfig config = V3Positions(true);
  config.max_relative_positions = 256;  // (256 - 1) / 128 < e: up to 2 slots per delta.
  const RelativePositionIndex index(config);
  EXPECT_EQ(
      kernels::DisentangledAttentionForward(HostOnlyProblem(index), nullptr, nullptr, nullptr),
      cudaErrorInvalidValue);
}

// Every tile scales its scores in the exponent after taking their maximum, which needs scale > 0
// (a zero scale made masked keys' -inf * 0 a NaN; a negative one picked the wrong maximum).
TEST(AttentionArgumentsTest, RejectsScalesThatAreNotPositiveAndFinite) {
  const RelativePositionIndex v3(V3Positions(true));
  kernels::AttentionProblem problem = HostOnlyProblem(v3);
  // Control: validation passes; the forward fails later, at the missing cuBLAS handle.
  EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
            cudaErrorUnknown);
  for (float scale : {0.0f, -0.125f, std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
    problem.scale = scale;
    EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
              cudaErrorInvalidValue)
        << "scale " << scale;
  }
}

// Every slot of the table names a PosK / PosQ row (0 .. 2 span - 1): the kernels read rows
// idx(delta) without a bound, so a table naming others is refused.
TEST(AttentionArgumentsTest, RejectsSlotsOutsideThePositionRows) {
  const RelativePositionIndex index(V3Positions(true));
  kernels::AttentionProblem problem = HostOnlyProblem(index);
  std::vector<int32_t> table(index.table().begin(), index.table().end());
  problem.positions.host = table.data();
  // Control: the same table, copied, passes validation (the forward fails at the missing handle).
  EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
            cudaErrorUnknown);
  for (const int32_t slot : {-1, 2 * index.span()}) {
    std::vector<int32_t> bad = table;
    bad[bad.size() / 2 + 3] = slot;
    problem.positions.host = bad.data();
    EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
              cudaErrorInvalidValue)
        << "slot " << slot;
  }
}

TEST(AttentionArgumentsTest, RejectsUnsettledTables) {
  ModelConfig config = V3Positions(true);
  config.position_buckets = 5;
  config.max_relative_positions = 512;
  const RelativePositionIndex index(config);
  ASSERT_FALSE(index.settled());
  EXPECT_EQ(
      kernels::DisentangledAttentionForward(HostOnlyProblem(index), nullptr, nullptr, nullptr),
      cudaErrorInvalidValue);
}

TEST(AttentionArgumentsTest, RejectsMisalignedTensors) {
  const RelativePositionIndex index(V3Positions(true));
  kernels::AttentionProblem problem = HostOnlyProblem(index);
  problem.k = static_cast<const int16_t*>(problem.q) + 1;  // 2 bytes off.
  EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
}

// A BF16 problem of 12 x 64 heads with both position terms, for the host-side sizing and variant
// queries: only its sizes and the host slot table are read (the device pointers are stand-ins).
kernels::AttentionProblem SizingProblem(const RelativePositionIndex& index, int max_seqlen,
                                        int total_tokens) {
  alignas(16) static int dummy = 0;  // Stand-in for device tensors: 16-byte aligned as they are.
  kernels::AttentionProblem problem;
  problem.dtype = DataType::kBFloat16;
  problem.num_heads = 12;
  problem.head_dim = 64;
  problem.num_sequences = 1;
  problem.max_seqlen = max_seqlen;
  problem.total_tokens = total_tokens;
  problem.pos_key = &dummy;
  problem.pos_query = &dummy;
  problem.positions = {index.table().data(), index.table().data(), index.band(), index.span()};
  return problem;
}

TEST(AttentionArgumentsTest, WorkspaceHoldsBothTablesOverTheActiveSlots) {
  const RelativePositionIndex index(V3Positions(true));
  kernels::AttentionProblem problem = SizingProblem(index, 128, 1000);
  // Each table is [H, T, slots rounded up to 8] in the input dtype plus the window slack, rounded
  // up to 256 bytes.
  auto table = [](size_t stride) {
    return ((12u * 1000 * stride + kernels::kTableSlack) * 2 + 255) / 256 * 256;
  };
  // Up to L = 1024 the built-in choice computes its C2P/P2C windows from PosK/PosQ and needs no
  // tables (d <= 64; where the warpgroup kernels run, at every length).
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), 0u);
  problem.max_seqlen = 2048;
  if (kernels::AttentionWgmmaRuns()) {
    EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), 0u);
  } else {
    EXPECT_GT(kernels::AttentionWorkspaceBytes(problem), 0u);
  }
  // The table kernel's sizes. L = 128 at d = 128 (tables only): slots idx(-127) .. idx(127) =
  // 129 .. 383, 255 slots widened to 256.
  const kernels::AttentionKernelConfig tables;
  problem.config = &tables;
  problem.max_seqlen = 128;
  problem.head_dim = 128;
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), 2 * table(256));
  problem.head_dim = 64;
  problem.max_seqlen = 8192;  // Every slot.
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), 2 * table(512));
  problem.pos_query = nullptr;
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), table(512));
  problem.config = nullptr;
  // float32: float32 tables (twice the bytes) where the float32 tiles run (strict or not), none
  // for the SIMT kernel (no device here, or its blocks too small for the tiles).
  problem.dtype = DataType::kFloat32;
  const size_t float32_table = ((12u * 1000 * 512 + kernels::kTableSlack) * 4 + 255) / 256 * 256;
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem),
            kernels::AttentionRunsFloat32Tiles(problem) ? float32_table : 0u);
  problem.allow_tf32 = true;
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem),
            kernels::AttentionRunsFloat32Tiles(problem) ? float32_table : 0u);
}

TEST(AttentionArgumentsTest, PaddedLayoutWorkspaceHoldsTheMaskedValueCopy) {
  const RelativePositionIndex index(V3Positions(true));
  // Longest sequence 125 in both layouts: the same table sizes.
  kernels::AttentionProblem problem = SizingProblem(index, 125, 1000);
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), 0u);  // Packed, computed windows.
  // Padded: 8 sequences of 125 rows; V copied as [1000, 12 * 64] bf16, rounded up to 256 bytes.
  const uint8_t mask = 1;
  problem.key_padding_mask = &mask;
  problem.num_sequences = 8;
  problem.padded_length = 125;
  const size_t values = (1000u * 12 * 64 * 2 + 255) / 256 * 256;
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), values);
  // After the tables when the kernel reads tables.
  const kernels::AttentionKernelConfig tables;
  problem.config = &tables;
  problem.pos_query = nullptr;
  const size_t with_tables = kernels::AttentionWorkspaceBytes(problem);
  EXPECT_GT(with_tables, values);
  problem.key_padding_mask = nullptr;
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), with_tables - values);
  // The SIMT float32 kernel skips masked keys itself; the float32 tiles read a float32 copy.
  problem.key_padding_mask = &mask;
  problem.config = nullptr;
  problem.dtype = DataType::kFloat32;
  if (kernels::AttentionRunsFloat32Tiles(problem)) {
    EXPECT_GT(kernels::AttentionWorkspaceBytes(problem), 2 * values);
  } else {
    EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), 0u);
  }
}

// Strict float32 (allow_tf32 false) runs the float32 tile kernel (3xTF32) wherever it fits, as
// allow_tf32 does (1xTF32): on an H100 / H200 at every head dim; the SIMT kernel only for
// misaligned Q / K / V or without the shared memory (no device at all here).
TEST(AttentionConfigTest, StrictFloat32RunsTheTileKernelWhereItFits) {
  const RelativePositionIndex index(V3Positions(true));
  kernels::AttentionProblem problem = SizingProblem(index, 1000, 1000);
  EXPECT_FALSE(kernels::AttentionRunsFloat32Tiles(problem));  // bf16: not a float32 problem.
  problem.dtype = DataType::kFloat32;
  int device = 0;
  int major = 0;
  const bool gpu = test::NoGpuReason().empty();
  const bool hopper =
      gpu && cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      major == 9;
  for (const int head_dim : {32, 64, 128}) {
    problem.head_dim = head_dim;
    problem.allow_tf32 = false;
    const bool tiles = kernels::AttentionRunsFloat32Tiles(problem);
    if (hopper) {
      EXPECT_TRUE(tiles) << "d = " << head_dim;
    }
    if (!gpu) {
      EXPECT_FALSE(tiles) << "no device: the SIMT kernel";
    }
    EXPECT_FALSE(kernels::AttentionRunsTf32(problem));
    problem.allow_tf32 = true;
    EXPECT_EQ(kernels::AttentionRunsFloat32Tiles(problem), tiles) << "d = " << head_dim;
    EXPECT_EQ(kernels::AttentionRunsTf32(problem), tiles) << "d = " << head_dim;
    // One float off 16-byte alignment: the SIMT kernel, whatever allow_tf32 says.
    alignas(16) static const float kRows[8] = {};
    problem.q = problem.k = problem.v = kRows + 1;
    problem.q_row_stride = problem.k_row_stride = problem.v_row_stride = 3 * 12 * head_dim;
    EXPECT_FALSE(kernels::AttentionRunsFloat32Tiles(problem));
    EXPECT_FALSE(kernels::AttentionRunsTf32(problem));
    problem.allow_tf32 = false;
    EXPECT_FALSE(kernels::AttentionRunsFloat32Tiles(problem));
    problem.q = problem.k = problem.v = nullptr;
    problem.q_row_stride = problem.k_row_stride = problem.v_row_stride = 0;
  }
  // One variant whichever kernel runs: the default config.
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, kernels::AttentionKernelConfig{}), cudaSuccess);
  EXPECT_EQ(kernels::AttentionCandidateConfigs(problem).size(), 1u);
}

// A padded problem needs the V copy's workspace: without one it is refused before any work is
// queued (the packed control fails later, at the missing cuBLAS handle).
TEST(AttentionArgumentsTest, PaddedLayoutWithoutWorkspaceIsRefused) {
  const RelativePositionIndex v3(V3Positions(true));
  kernels::AttentionProblem problem = HostOnlyProblem(v3);
  EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
            cudaErrorUnknown);
  alignas(16) static const uint8_t kMask[16] = {};
  problem.key_padding_mask = kMask;
  problem.padded_length = problem.max_seqlen;
  EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
}

// Computed windows copy PosK / PosQ rows in 16-byte chunks (cp.async) or by TMA: with a base that
// is not 16-byte aligned the built-in choice takes tables (cuBLAS reads any alignment) and a
// pinned computed-window config is refused, instead of a misaligned copy on the device.
TEST(AttentionConfigTest, ComputedWindowsNeedAlignedPositionRows) {
  const RelativePositionIndex index(V3Positions(true));
  kernels::AttentionProblem problem = SizingProblem(index, 512, 16384);
  kernels::AttentionKernelConfig computed;
  computed.windows = kernels::AttentionWindows::kComputed;
  computed.min_blocks_per_sm = 3;
  EXPECT_EQ(kernels::HeuristicAttentionConfig(problem).windows,
            kernels::AttentionWindows::kComputed);
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaSuccess);
  alignas(16) static const int16_t kRows[16] = {};
  for (const bool key : {true, false}) {
    kernels::AttentionProblem misaligned = problem;
    (key ? misaligned.pos_key : misaligned.pos_query) = kRows + 1;  // 2 bytes off.
    EXPECT_EQ(kernels::HeuristicAttentionConfig(misaligned).windows,
              kernels::AttentionWindows::kTables);
    EXPECT_EQ(kernels::CheckAttentionConfig(misaligned, computed), cudaErrorInvalidValue);
  }
}

TEST(AttentionConfigTest, HeuristicCandidatesAndChecks) {
  const RelativePositionIndex index(V3Positions(true));
  // Today's built-in choice: computed windows up to L = 1024 (3 CTAs per SM), tables above; where
  // the warpgroup kernels run (an H100 / H200), their computed windows at every length, at four
  // CTAs per SM (three with P2C alone).
  const bool warpgroup = kernels::AttentionWgmmaRuns();
  const kernels::AttentionMma mma =
      warpgroup ? kernels::AttentionMma::kWarpgroup : kernels::AttentionMma::kSync;
  kernels::AttentionProblem problem = SizingProblem(index, 1024, 16384);
  using kernels::AttentionWindows;
  kernels::AttentionKernelConfig heuristic = kernels::HeuristicAttentionConfig(problem);
  EXPECT_EQ(heuristic.windows, AttentionWindows::kComputed);
  EXPECT_EQ(heuristic.min_blocks_per_sm, warpgroup ? 4 : 3);
  EXPECT_EQ(heuristic.mma, mma);
  {
    kernels::AttentionProblem p2c_only = problem;
    p2c_only.pos_key = nullptr;
    EXPECT_EQ(kernels::HeuristicAttentionConfig(p2c_only).min_blocks_per_sm, 3);
  }
  problem.max_seqlen = 1025;
  heuristic = kernels::HeuristicAttentionConfig(problem);
  EXPECT_EQ(heuristic.windows, warpgroup ? AttentionWindows::kComputed : AttentionWindows::kTables);
  EXPECT_EQ(heuristic.min_blocks_per_sm, warpgroup ? 4 : 2);
  EXPECT_EQ(heuristic.mma, mma);
  problem.pos_key = problem.pos_query = nullptr;  // Plain attention: tables (none to make).
  heuristic = kernels::HeuristicAttentionConfig(problem);
  EXPECT_EQ(heuristic.windows, AttentionWindows::kTables);
  EXPECT_EQ(heuristic.min_blocks_per_sm, 2);
  EXPECT_EQ(heuristic.mma, mma);
  problem = SizingProblem(index, 1025, 16384);
  heuristic = kernels::HeuristicAttentionConfig(problem);
  // The heuristic's first, then the other window mode and the d = 64 register cap, and, on an
  // H100 / H200 with the sm_90a image, the other instruction set's table and computed-window
  // kernels and the computed-window one at four CTAs per SM.
  const std::vector<kernels::AttentionKernelConfig> candidates =
      kernels::AttentionCandidateConfigs(problem);
  ASSERT_EQ(candidates.size(), warpgroup ? 6u : 3u);
  EXPECT_EQ(candidates[0], heuristic);
  for (const kernels::AttentionKernelConfig& config : candidates) {
    EXPECT_EQ(kernels::CheckAttentionConfig(problem, config), cudaSuccess) << ConfigName(config);
  }
  // Workspace follows the variant: tables need it, computed windows none.
  kernels::AttentionKernelConfig computed;
  computed.windows = AttentionWindows::kComputed;
  computed.min_blocks_per_sm = 3;
  const kernels::AttentionKernelConfig tables;
  problem.config = &tables;
  EXPECT_GT(kernels::AttentionWorkspaceBytes(problem), 0u);
  EXPECT_EQ(kernels::AttentionMaxWorkspaceBytes(problem),
            kernels::AttentionWorkspaceBytes(problem));
  problem.config = &computed;
  EXPECT_EQ(kernels::AttentionWorkspaceBytes(problem), 0u);
  problem.config = nullptr;

  // Variants this binary does not have, or that do not apply.
  kernels::AttentionKernelConfig bad = computed;
  bad.block_m = 128;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, bad), cudaErrorInvalidValue);
  bad = computed;
  bad.min_blocks_per_sm = 4;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, bad), cudaErrorInvalidValue);
  bad = kernels::AttentionKernelConfig{};
  bad.min_blocks_per_sm = 3;  // Tables are compiled for 2 only.
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, bad), cudaErrorInvalidValue);
  problem.head_dim = 128;  // No computed windows at d = 128 (shared memory).
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::AttentionCandidateConfigs(problem).size(), 1u);
  problem.head_dim = 32;  // d = 32 computes windows with one register cap (3 CTAs per SM).
  computed.min_blocks_per_sm = 2;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
  computed.min_blocks_per_sm = 3;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaSuccess);
  EXPECT_EQ(kernels::AttentionCandidateConfigs(problem).size(), 2u);
  computed.key_groups = 2;  // Two key groups: computed windows only, at most two.
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaSuccess);
  computed.key_groups = 3;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
  computed.key_groups = 4;  // The short-sequence kernel: sequences <= 128 only.
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
  problem.max_seqlen = 128;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaSuccess);
  // The tuner's candidates pin no key groups: a family spans batch sizes, and only the launch's
  // choice adapts to the grid (KeyGroupsSplitOnlyGridsThatLeaveSmsIdle).
  for (const kernels::AttentionKernelConfig& config : kernels::AttentionCandidateConfigs(problem)) {
    EXPECT_EQ(config.key_groups, 0) << ConfigName(config);
  }
  problem.max_seqlen = 129;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
  problem.max_seqlen = 1025;
  computed.key_groups = 5;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
  computed.key_groups = 0;
  bad = kernels::AttentionKernelConfig{};
  bad.key_groups = 2;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, bad), cudaErrorInvalidValue);
  bad.key_groups = 4;  // Tables.
  problem.max_seqlen = 128;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, bad), cudaErrorInvalidValue);
  problem.max_seqlen = 1025;
  bad.key_groups = 1;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, bad), cudaSuccess);
  computed.windows = static_cast<AttentionWindows>(7);  // Not a window mode.
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
  computed.windows = AttentionWindows::kComputed;
  problem.pos_key = problem.pos_query = nullptr;  // Nothing to compute windows of.
  computed.min_blocks_per_sm = 3;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
  problem.dtype = DataType::kFloat32;  // One variant: the heuristic's (the default config).
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, kernels::AttentionKernelConfig{}), cudaSuccess);
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
}

// The warpgroup kernels (AttentionMma::kWarpgroup): tables or computed windows, d = 64, half
// types, and only where they run (an H100 / H200 and a build with sm_90a; never on the CI machine).
TEST(AttentionConfigTest, WarpgroupKernelOnlyWhereItRuns) {
  const RelativePositionIndex index(V3Positions(true));
  kernels::AttentionProblem problem = SizingProblem(index, 2048, 4096);
  const kernels::AttentionKernelConfig warpgroup =
      WarpgroupConfig(kernels::AttentionWindows::kTables);
  const cudaError_t where_it_runs =
      kernels::AttentionWgmmaRuns() ? cudaSuccess : cudaErrorInvalidValue;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, warpgroup), where_it_runs);
  const std::vector<kernels::AttentionKernelConfig> candidates =
      kernels::AttentionCandidateConfigs(problem);
  EXPECT_EQ(std::count(candidates.begin(), candidates.end(), warpgroup),
            kernels::AttentionWgmmaRuns() ? 1 : 0);
  // The warpgroup computed-window kernel: one register cap (three CTAs per SM), no key groups.
  const kernels::AttentionKernelConfig computed =
      WarpgroupConfig(kernels::AttentionWindows::kComputed);
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), where_it_runs);
  EXPECT_EQ(std::count(candidates.begin(), candidates.end(), computed),
            kernels::AttentionWgmmaRuns() ? 1 : 0);
  // And capped for four CTAs per SM (V in the C2P region): both position terms, or C2P alone.
  kernels::AttentionKernelConfig four = computed;
  four.min_blocks_per_sm = 4;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, four), where_it_runs);
  EXPECT_EQ(std::count(candidates.begin(), candidates.end(), four),
            kernels::AttentionWgmmaRuns() ? 1 : 0);
  {
    kernels::AttentionProblem p2c_only = problem;
    p2c_only.pos_key = nullptr;
    EXPECT_EQ(kernels::CheckAttentionConfig(p2c_only, four), cudaErrorInvalidValue);
    EXPECT_EQ(kernels::CheckAttentionConfig(p2c_only, computed), where_it_runs);
    const std::vector<kernels::AttentionKernelConfig> p2c_candidates =
        kernels::AttentionCandidateConfigs(p2c_only);
    EXPECT_EQ(std::count(p2c_candidates.begin(), p2c_candidates.end(), four), 0);
    kernels::AttentionProblem c2p_only = problem;
    c2p_only.pos_query = nullptr;
    EXPECT_EQ(kernels::CheckAttentionConfig(c2p_only, four), where_it_runs);
  }
  // Not built: other register caps, and key groups (mma.sync kernels) on a warpgroup config.
  struct Refused {
    kernels::AttentionKernelConfig base;
    int min_blocks_per_sm;
    int key_groups;
  };
  for (const Refused& refused :
       {Refused{computed, 2, 0}, Refused{computed, 5, 0}, Refused{four, 4, 2},
        Refused{computed, 3, 2}, Refused{warpgroup, 3, 0}, Refused{warpgroup, 2, 2}}) {
    kernels::AttentionKernelConfig bad = refused.base;
    bad.min_blocks_per_sm = refused.min_blocks_per_sm;
    bad.key_groups = refused.key_groups;
    EXPECT_EQ(kernels::CheckAttentionConfig(problem, bad), cudaErrorInvalidValue)
        << ConfigName(bad);
  }
  for (int head_dim : {32, 128}) {
    problem.head_dim = head_dim;
    EXPECT_EQ(kernels::CheckAttentionConfig(problem, warpgroup), cudaErrorInvalidValue);
    EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaErrorInvalidValue);
    EXPECT_EQ(kernels::HeuristicAttentionConfig(problem).mma, kernels::AttentionMma::kSync);
  }
  problem.head_dim = 64;
  problem.dtype = DataType::kFloat32;  // The strict path has one kernel.
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, warpgroup), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::HeuristicAttentionConfig(problem).mma, kernels::AttentionMma::kSync);
  EXPECT_STREQ(kernels::AttentionMmaName(kernels::AttentionMma::kWarpgroup), "wgmma");
  EXPECT_STREQ(kernels::AttentionMmaName(kernels::AttentionMma::kSync), "sync");
}

// The launch adapts a warpgroup config (tables or computed windows) to the grid: one short sequence
// whose 64-row blocks x heads leave SMs idle runs the mma.sync computed-window kernels (and their
// key groups) instead, up to 1024 tokens;
// full grids, longer sequences and every other config run as given. Host-only: limits are given.
TEST(AttentionConfigTest, LaunchKeepsComputedWindowsForGridsThatLeaveSmsIdle) {
  const RelativePositionIndex index(V3Positions(true));
  kernels::AttentionProblem problem = SizingProblem(index, 700, 700);
  const kernels::AttentionDeviceLimits h200{132, 227 * 1024, 90};
  const kernels::AttentionKernelConfig warpgroup =
      WarpgroupConfig(kernels::AttentionWindows::kTables);
  // 700 tokens x 12 heads: 11 x 12 = 132 blocks of 64 rows, not more than the SMs.
  kernels::AttentionKernelConfig launched =
      kernels::AttentionLaunchConfig(problem, warpgroup, h200);
  EXPECT_EQ(launched.windows, kernels::AttentionWindows::kComputed);
  EXPECT_EQ(launched.mma, kernels::AttentionMma::kSync);
  EXPECT_EQ(launched.min_blocks_per_sm, 3);
  EXPECT_EQ(launched.key_groups, 0);  // The launch picks them (AttentionKeyGroups).
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, launched), cudaSuccess);
  problem.max_seqlen = problem.total_tokens = 1024;  // 192 blocks: the grid fills the SMs.
  EXPECT_EQ(kernels::AttentionLaunchConfig(problem, warpgroup, h200), warpgroup);
  problem.max_seqlen = 700;
  problem.num_sequences = 2;  // 264 blocks.
  EXPECT_EQ(kernels::AttentionLaunchConfig(problem, warpgroup, h200), warpgroup);
  problem.num_sequences = 1;
  // The warpgroup computed-window kernel (no key groups) likewise.
  const kernels::AttentionKernelConfig warpgroup_computed =
      WarpgroupConfig(kernels::AttentionWindows::kComputed);
  EXPECT_EQ(kernels::AttentionLaunchConfig(problem, warpgroup_computed, h200), launched);
  problem.num_sequences = 2;
  EXPECT_EQ(kernels::AttentionLaunchConfig(problem, warpgroup_computed, h200), warpgroup_computed);
  problem.num_sequences = 1;
  kernels::AttentionKernelConfig tables;  // mma.sync tables: as given.
  EXPECT_EQ(kernels::AttentionLaunchConfig(problem, tables, h200), tables);
  problem.head_dim = 128;  // No computed windows at d = 128.
  EXPECT_EQ(kernels::AttentionLaunchConfig(problem, warpgroup, h200), warpgroup);
}

// The build holds the sm_90a image exactly when its CUDA architectures name 90a (the default);
// on an H100 / H200 the warpgroup kernel then runs. Without this, a broken detection would turn
// every warpgroup test above into a no-op.
TEST(AttentionConfigTest, WarpgroupImageFollowsTheBuildArchitectures) {
  EXPECT_EQ(kernels::AttentionWgmmaCompiled(), DFLASH_EXPECT_SM90A_IMAGE == 1);
  int device = 0;
  int major = 0;
  int minor = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess) {
    EXPECT_EQ(kernels::AttentionWgmmaRuns(),
              kernels::AttentionWgmmaCompiled() && major == 9 && minor == 0);
  } else {
    EXPECT_FALSE(kernels::AttentionWgmmaRuns());
  }
}

// Every problem the kernels take has a heuristic variant this binary runs, and every candidate
// the tuner may try is one too: a register cap or default changed on one side only (Traits,
// AttentionKernelConfig, HasVariant) fails here, on the host, rather than as "invalid argument"
// on the GPU.
TEST(AttentionConfigTest, HeuristicAndCandidatesAreCompiledVariants) {
  const RelativePositionIndex index(V3Positions(true));
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32}) {
    for (int head_dim : {32, 64, 128}) {
      for (int length : {1, 64, 1024, 1025, 8192}) {
        for (bool positions : {true, false}) {
          kernels::AttentionProblem problem = SizingProblem(index, length, length);
          problem.dtype = dtype;
          problem.head_dim = head_dim;
          if (!positions) problem.pos_key = problem.pos_query = nullptr;
          const std::string what = std::string(Name(dtype)) + " d=" + std::to_string(head_dim) +
                                   " L=" + std::to_string(length) +
                                   (positions ? " c2p+p2c" : " none");
          EXPECT_EQ(
              kernels::CheckAttentionConfig(problem, kernels::HeuristicAttentionConfig(problem)),
              cudaSuccess)
              << what;
          for (const kernels::AttentionKernelConfig& config :
               kernels::AttentionCandidateConfigs(problem)) {
            EXPECT_EQ(kernels::CheckAttentionConfig(problem, config), cudaSuccess) << what;
          }
        }
      }
    }
  }
}

// The launch's key-group rule (no device needed: the limits are given).
TEST(AttentionConfigTest, KeyGroupsSplitOnlyGridsThatLeaveSmsIdle) {
  const RelativePositionIndex index(V3Positions(true));
  kernels::AttentionProblem problem = SizingProblem(index, 128, 128);  // One sequence, 12 heads.
  kernels::AttentionKernelConfig computed;
  computed.windows = kernels::AttentionWindows::kComputed;
  computed.min_blocks_per_sm = 3;
  const kernels::AttentionDeviceLimits h200{132, 232448};
  const kernels::AttentionDeviceLimits ada{142, 101376};  // sm_89: 99 KB per block.
  // 24 64-row blocks on 132 SMs, L <= 128: the short-sequence kernel.
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, h200), 4);
  // Neither the short kernel's 110 KB nor two groups' 122 KB fit.
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, ada), 1);
  problem.head_dim = 32;  // 72 KB do.
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, ada), 4);
  problem.head_dim = 64;
  problem.max_seqlen = 64;  // One key tile: the short kernel splits its keys too.
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, h200), 4);
  problem.max_seqlen = 200;  // Longer than the short kernel: two groups.
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, h200), 2);
  problem.max_seqlen = 128;  // 12 sequences x 24 blocks fill the SMs: one group.
  problem.num_sequences = 12;
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, h200), 1);
  problem.max_seqlen = 512;  // 8 blocks x 12 heads x 2 sequences = 192 CTAs: the SMs are full.
  problem.num_sequences = 2;
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, h200), 1);
  problem.num_sequences = 1;  // 96 CTAs.
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, h200), 2);
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, kernels::AttentionDeviceLimits{}), 1);
  kernels::AttentionKernelConfig tables;  // Tables: one group always.
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, tables, h200), 1);
  // The warpgroup computed-window kernel too: the key-group kernels are mma.sync ones, and a
  // warpgroup config that reaches the launch (AttentionLaunchConfig keeps it past 1024 tokens)
  // runs as named. One 4097-token sequence of one head: 65 blocks.
  const kernels::AttentionKernelConfig warpgroup_computed =
      WarpgroupConfig(kernels::AttentionWindows::kComputed);
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, warpgroup_computed, h200), 1);
  kernels::AttentionProblem one_head = problem;
  one_head.num_heads = 1;
  one_head.max_seqlen = one_head.total_tokens = 4097;
  EXPECT_EQ(kernels::AttentionKeyGroups(one_head, computed, h200), 2);
  EXPECT_EQ(kernels::AttentionKeyGroups(one_head, warpgroup_computed, h200), 1);
  EXPECT_EQ(kernels::AttentionLaunchConfig(one_head, warpgroup_computed, h200), warpgroup_computed);
  computed.key_groups = 1;  // Pinned counts hold.
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, h200), 1);
  computed.key_groups = 2;
  problem.num_sequences = 64;
  EXPECT_EQ(kernels::AttentionKeyGroups(problem, computed, h200), 2);
  // Two groups run with any register cap the config names (one two-group kernel per head dim).
  computed.min_blocks_per_sm = 2;
  problem.head_dim = 32;
  EXPECT_EQ(kernels::CheckAttentionConfig(problem, computed), cudaSuccess);
}

// The four-CTA warpgroup kernel drops its saturated-tile code for batches with no saturated
// tile: checked against the definition, a 64 x 64 tile (rows and keys past the end included)
// whose deltas all index the slot of +band, or all that of -band.
TEST(AttentionConfigTest, SaturationFreeUntilSomeTileReadsOneSaturatedSlot) {
  const RelativePositionIndex index(V3Positions(true));
  const int32_t top = index(index.band());
  const int32_t bottom = index(-index.band());
  auto has_saturated_tile = [&](int length) {
    for (int64_t m0 = 0; m0 < length; m0 += 64) {
      for (int64_t n0 = 0; n0 < length; n0 += 64) {
        bool high = true;
        bool low = true;
        for (int64_t delta = m0 - n0 - 63; delta <= m0 - n0 + 63; ++delta) {
          high = high && index(delta) == top;
          low = low && index(delta) == bottom;
        }
        if (high || low) return true;
      }
    }
    return false;
  };
  for (int length = 1; length <= 1100; ++length) {
    const kernels::AttentionProblem problem = SizingProblem(index, length, length);
    ASSERT_EQ(kernels::AttentionTilesSaturationFree(problem), !has_saturated_tile(length))
        << length;
  }
  for (int length : {2048, 4097, 32768}) {
    EXPECT_FALSE(kernels::AttentionTilesSaturationFree(SizingProblem(index, length, length)));
  }
  // v3: nine 64-row blocks (576 tokens) keep every tile in the band.
  EXPECT_TRUE(kernels::AttentionTilesSaturationFree(SizingProblem(index, 576, 576)));
  EXPECT_FALSE(kernels::AttentionTilesSaturationFree(SizingProblem(index, 577, 577)));
  // Plain attention has no saturated tile at any length.
  kernels::AttentionProblem plain = SizingProblem(index, 32768, 32768);
  plain.pos_key = plain.pos_query = nullptr;
  EXPECT_TRUE(kernels::AttentionTilesSaturationFree(plain));
}

// The launch's tail order (attention_block_order.h) runs every query block of every (head,
// sequence) exactly once, on grids whose sequences have fewer blocks than grid x (a packed batch
// of mixed lengths) and with tails from none to the whole grid; the tail is dealt rank-major.
TEST(AttentionBlockOrderTest, TailOrderRunsEveryQueryBlockOnce) {
  for (int grid_x : {1, 2, 5, 16}) {
    for (int grid_y : {1, 3, 12}) {
      for (int grid_z : {1, 4, 9}) {
        std::vector<int> blocks(grid_z);
        for (int z = 0; z < grid_z; ++z) blocks[z] = 1 + (7 * z + 3) % grid_x;
        blocks[0] = grid_x;
        for (int tail_ctas : {0, 1, 7, 64, 528, 1 << 20}) {
          SCOPED_TRACE(testing::Message() << "grid " << grid_x << " x " << grid_y << " x " << grid_z
                                          << ", tail " << tail_ctas);
          std::vector<int> runs(static_cast<size_t>(grid_x) * grid_y * grid_z, 0);
          int last_rank = -1;
          for (int z = 0; z < grid_z; ++z) {
            for (int y = 0; y < grid_y; ++y) {
              for (int x = 0; x < grid_x; ++x) {
                const kernels::LaunchBlock block = kernels::OrderLaunchBlock(
                    x, y, z, grid_x, grid_y, grid_z,
                    kernels::TailGroups(tail_ctas, grid_x, grid_y * grid_z));
                ASSERT_GE(block.sequence, 0);
                ASSERT_LT(block.sequence, grid_z);
                ASSERT_GE(block.head, 0);
                ASSERT_LT(block.head, grid_y);
                const int count = blocks[block.sequence];
                int m_block = block.m_block;
                if (block.rank >= 0) {
                  // Linear order is kept up to the tail; the tail's ranks never decrease.
                  EXPECT_GE(block.rank, last_rank);
                  last_rank = block.rank;
                  if (block.rank >= count) continue;
                  m_block = kernels::CenterOutBlock(block.rank, count);
                } else {
                  EXPECT_EQ(last_rank, -1) << "a linear block after the tail began";
                  EXPECT_EQ(block.m_block, x);
                  if (m_block >= count) continue;
                }
                ASSERT_GE(m_block, 0);
                ASSERT_LT(m_block, count);
                ++runs[(static_cast<size_t>(block.sequence) * grid_y + block.head) * grid_x +
                       m_block];
              }
            }
          }
          for (int z = 0; z < grid_z; ++z) {
            for (int y = 0; y < grid_y; ++y) {
              for (int m = 0; m < grid_x; ++m) {
                EXPECT_EQ(runs[(static_cast<size_t>(z) * grid_y + y) * grid_x + m],
                          m < blocks[z] ? 1 : 0)
                    << "sequence " << z << ", head " << y << ", block " << m;
              }
            }
          }
          // A tail is what was asked for, whole groups, at most the grid.
          if (tail_ctas == 0) {
            EXPECT_EQ(last_rank, -1);
          }
          const int tail_groups = kernels::TailGroups(tail_ctas, grid_x, grid_y * grid_z);
          EXPECT_EQ(tail_groups, std::min(grid_y * grid_z, (tail_ctas + grid_x - 1) / grid_x));
          if (tail_ctas >= grid_x * grid_y * grid_z) {
            EXPECT_EQ(tail_groups, grid_y * grid_z);
          }
        }
      }
    }
  }
}

// Rank order within a sequence: every block once, farthest from the sequence's ends first (the
// blocks with the most band tiles when the sequence has saturated ones).
TEST(AttentionBlockOrderTest, CenterOutTakesTheInnerBlocksFirst) {
  EXPECT_EQ((std::vector<int>{kernels::CenterOutBlock(0, 4), kernels::CenterOutBlock(1, 4),
                              kernels::CenterOutBlock(2, 4), kernels::CenterOutBlock(3, 4)}),
            (std::vector<int>{2, 1, 3, 0}));
  for (int blocks = 1; blocks <= 600; ++blocks) {
    std::vector<bool> seen(blocks, false);
    int last_distance = blocks;
    for (int rank = 0; rank < blocks; ++rank) {
      const int m = kernels::CenterOutBlock(rank, blocks);
      ASSERT_GE(m, 0) << blocks;
      ASSERT_LT(m, blocks) << blocks;
      ASSERT_FALSE(seen[m]) << blocks << " " << rank;
      seen[m] = true;
      const int distance = std::min(m, blocks - 1 - m);
      EXPECT_LE(distance, last_distance) << blocks << " " << rank;
      last_distance = distance;
    }
  }
}

TEST(AttentionConfigTest, ForwardRefusesAConfigThatDoesNotApply) {
  // Rejected before the device is touched: the problem's pointers are never dereferenced.
  const RelativePositionIndex index(V3Positions(true));
  kernels::AttentionProblem problem;
  problem.dtype = DataType::kFloat16;
  problem.num_heads = 1;
  problem.head_dim = 128;
  alignas(16) static uint16_t storage[64];
  int32_t cu[2] = {0, 8};
  problem.q = problem.k = problem.v = problem.out = storage;
  problem.q_row_stride = problem.k_row_stride = problem.v_row_stride = problem.out_row_stride = 128;
  problem.pos_key = problem.pos_query = storage;
  problem.cu_seqlens = cu;
  problem.num_sequences = 1;
  problem.max_seqlen = 8;
  problem.total_tokens = 8;
  problem.positions = {index.table().data(), index.table().data(), index.band(), index.span()};
  kernels::AttentionKernelConfig computed;
  computed.windows = kernels::AttentionWindows::kComputed;
  computed.min_blocks_per_sm = 3;
  problem.config = &computed;
  EXPECT_EQ(kernels::DisentangledAttentionForward(problem, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace dflash
