// The encoder kernels (kernels/encoder/: embedding, AddLayerNorm, bias + activation, pooling,
// first-token gather, float conversion, convolution columns) against float64 host references.
// Inputs are drawn fresh per case; every output buffer is poisoned (all bytes 0xFF, a NaN in all
// three dtypes) with guard regions around it before each run, then checked fully written (no NaN
// left in the output cells) and nothing else written (guards and row gaps still 0xFF).
//
// Tolerances:
//   float32 outputs: per row, ||got - ref||_2 <= 1e-5 * ||ref||_2 (+1e-30).
//   fp16 / bf16 outputs: one rounding of the output, per element
//     |got - ref| <= u * |ref| + 1e-5 * max_row |ref|,  u = 2^-11 (fp16) or 2^-8 (bf16)
//   (u |ref| bounds half an ulp; the second term is the float32 arithmetic of the kernel).
//   Pooling writes float32 for every input dtype: the float32 rule. Gathers, conversions and
//   convolution columns are copies: bit exact.
// GPU cases skip with a message where no GPU exists; argument checks run everywhere.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <map>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/encoder/activation.h"
#include "kernels/encoder/convolution.h"
#include "kernels/encoder/embedding.h"
#include "kernels/encoder/layer_norm.h"
#include "kernels/encoder/pooling.h"
#include "tests/kernels/cuda_test_support.h"

namespace dflash {
namespace {

using kernels::Activation;
using kernels::DataType;
using kernels::Pooling;
using test::Decode;
using test::DeviceBuffer;
using test::ElementSize;
using test::Encode;
using test::RoundTo;

constexpr DataType kTypes[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32};

using test::Name;

// Largest error seen per (kernel, dtype), printed at the end: relative row L2 for float32
// outputs, |err| / (u |ref| + slack) for 16-bit outputs (<= 1 passes).
std::map<std::string, double>& MaxErrors() {
  static std::map<std::string, double> errors;
  return errors;
}

void Record(const std::string& key, double error) {
  double& slot = MaxErrors()[key];
  slot = std::max(slot, error);
}

class ReportErrors : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [key, error] : MaxErrors()) {
      std::cout << "[max error] " << key << ": " << error << "\n";
    }
  }
};
[[maybe_unused]] const auto* const kReport = ::testing::AddGlobalTestEnvironment(new ReportErrors);

std::vector<float> Random(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A device buffer for a [rows, width] matrix with row stride `stride` (elements), starting
// `offset` elements past a 256-byte guard, with a 256-byte guard after it. Everything starts as
// 0xFF bytes.
class Guarded {
 public:
  static constexpr size_t kGuard = 256;
  Guarded(DataType dtype, int64_t rows, int64_t width, int64_t stride, int64_t offset = 0)
      : dtype_(dtype),
        rows_(rows),
        width_(width),
        stride_(stride),
        offset_(offset),
        es_(ElementSize(dtype)),
        bytes_(2 * kGuard + (offset + rows * stride) * es_),
        buffer_(bytes_) {
    if (buffer_.get() != nullptr) cudaMemset(buffer_.get(), 0xFF, bytes_);
  }
  bool ok() const { return buffer_.get() != nullptr; }
  void* get() const { return static_cast<uint8_t*>(buffer_.get()) + kGuard + offset_ * es_; }

  void Upload(const std::vector<float>& values) const {
    const std::vector<uint8_t> bytes = Encode(values, dtype_);
    if (rows_ > 0) {
      cudaMemcpy2D(get(), stride_ * es_, bytes.data(), width_ * es_, width_ * es_, rows_,
                   cudaMemcpyHostToDevice);
    }
  }

  // The [rows, width] cells as float; adds a failure when a cell is still poisoned or a byte
  // outside the cells changed.
  std::vector<float> Download(const std::string& what) const {
    std::vector<uint8_t> all(bytes_);
    EXPECT_EQ(cudaMemcpy(all.data(), buffer_.get(), bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<uint8_t> cells(rows_ * width_ * es_);
    std::vector<bool> inside(bytes_, false);
    for (int64_t r = 0; r < rows_; ++r) {
      const size_t start = kGuard + (offset_ + r * stride_) * es_;
      std::memcpy(&cells[r * width_ * es_], &all[start], width_ * es_);
      std::fill(inside.begin() + start, inside.begin() + start + width_ * es_, true);
    }
    int64_t stray = 0;
    for (size_t i = 0; i < bytes_; ++i) stray += !inside[i] && all[i] != 0xFF;
    EXPECT_EQ(stray, 0) << what << ": bytes written outside the output cells";
    std::vector<float> values = Decode(cells, dtype_);
    int64_t unwritten = 0;
    for (float v : values) unwritten += std::isnan(v);
    EXPECT_EQ(unwritten, 0) << what << ": output cells left unwritten (NaN poison)";
    return values;
  }

 private:
  DataType dtype_;
  int64_t rows_, width_, stride_, offset_;
  size_t es_;
  size_t bytes_;
  DeviceBuffer buffer_;
};

// A device copy of host data (ids, cu_seqlens, gamma).
template <typename T>
DeviceBuffer ToDevice(const std::vector<T>& values) {
  DeviceBuffer buffer(std::max<size_t>(values.size(), 1) * sizeof(T));
  if (!values.empty()) {
    cudaMemcpy(buffer.get(), values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  return buffer;
}

// Compares [rows, width] results with the reference under the rules in the file comment.
void ExpectClose(const std::vector<float>& got, const std::vector<double>& ref, int64_t rows,
                 int64_t width, DataType out_dtype, const std::string& kernel,
                 const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const std::string key = kernel + " " + Name(out_dtype);
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = got.data() + r * width;
    const double* e = ref.data() + r * width;
    if (out_dtype == DataType::kFloat32) {
      double diff = 0.0;
      double norm = 0.0;
      for (int64_t c = 0; c < width; ++c) {
        diff += (g[c] - e[c]) * (g[c] - e[c]);
        norm += e[c] * e[c];
      }
      const double relative = std::sqrt(diff) / (std::sqrt(norm) + 1e-30);
      Record(key, relative);
      ASSERT_LE(relative, 1e-5) << what << " row " << r;
    } else {
      const double u = out_dtype == DataType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
      double scale = 0.0;
      for (int64_t c = 0; c < width; ++c) scale = std::max(scale, std::abs(e[c]));
      for (int64_t c = 0; c < width; ++c) {
        const double bound = u * std::abs(e[c]) + 1e-5 * scale + 1e-30;
        const double error = std::abs(g[c] - e[c]);
        Record(key, error / bound);
        ASSERT_LE(error, bound) << what << " row " << r << " col " << c << ": got " << g[c]
                                << " want " << e[c];
      }
    }
  }
}

std::string Describe(DataType dtype, int64_t rows, int width, const std::string& extra) {
  return std::string(Name(dtype)) + " rows=" + std::to_string(rows) +
         " width=" + std::to_string(width) + " " + extra;
}

// ---------------------------------------------------------------------------------------------
// Argument checks: no GPU needed (every check happens on the host before any CUDA call).

TEST(EncoderKernelArguments, AddLayerNorm) {
  const float g = 1.0f;
  int dummy = 0;
  void* p = &dummy;
  EXPECT_EQ(kernels::AddLayerNorm(DataType::kFloat16, p, 8, nullptr, 0, &g, &g, 1e-7f, 1, 0, p, 8,
                                  nullptr),
            cudaErrorInvalidValue);  // width 0
  EXPECT_EQ(kernels::AddLayerNorm(DataType::kFloat16, nullptr, 8, nullptr, 0, &g, &g, 1e-7f, 1, 8,
                                  p, 8, nullptr),
            cudaErrorInvalidValue);  // null x
  EXPECT_EQ(kernels::AddLayerNorm(DataType::kFloat16, p, 8, nullptr, 0, nullptr, &g, 1e-7f, 1, 8, p,
                                  8, nullptr),
            cudaErrorInvalidValue);  // null gamma
  EXPECT_EQ(kernels::AddLayerNorm(DataType::kFloat16, p, 8, nullptr, 0, &g, nullptr, 1e-7f, 1, 8, p,
                                  8, nullptr),
            cudaErrorInvalidValue);  // null beta
  EXPECT_EQ(kernels::AddLayerNorm(DataType::kFloat16, p, 8, nullptr, 0, &g, &g, 1e-7f, 1, 8,
                                  nullptr, 8, nullptr),
            cudaErrorInvalidValue);  // null out
  EXPECT_EQ(kernels::AddLayerNorm(DataType::kFloat16, p, 7, nullptr, 0, &g, &g, 1e-7f, 1, 8, p, 8,
                                  nullptr),
            cudaErrorInvalidValue);  // x stride < width
  EXPECT_EQ(
      kernels::AddLayerNorm(DataType::kFloat16, p, 8, p, 4, &g, &g, 1e-7f, 1, 8, p, 8, nullptr),
      cudaErrorInvalidValue);  // residual stride < width
  EXPECT_EQ(kernels::AddLayerNorm(DataType::kFloat16, p, 8, nullptr, 0, &g, &g, -1.0f, 1, 8, p, 8,
                                  nullptr),
            cudaErrorInvalidValue);  // eps < 0
  EXPECT_EQ(kernels::AddLayerNorm(static_cast<DataType>(9), p, 8, nullptr, 0, &g, &g, 1e-7f, 1, 8,
                                  p, 8, nullptr),
            cudaErrorInvalidValue);  // bad dtype
  EXPECT_EQ(kernels::AddLayerNorm(DataType::kFloat16, p, 8, nullptr, 0, &g, &g, 1e-7f, -1, 8, p, 8,
                                  nullptr),
            cudaErrorInvalidValue);  // rows < 0
  EXPECT_EQ(kernels::AddLayerNorm(DataType::kFloat16, nullptr, 8, nullptr, 0, nullptr, nullptr,
                                  1e-7f, 0, 8, nullptr, 8, nullptr),
            cudaSuccess);  // zero rows: no-op
}

TEST(EncoderKernelArguments, Embedding) {
  int dummy = 0;
  kernels::EmbeddingProblem p;
  p.tokens = 4;
  p.width = 8;
  p.token_ids = reinterpret_cast<const int32_t*>(&dummy);
  p.word = &dummy;
  p.out = &dummy;
  kernels::EmbeddingProblem bad = p;
  bad.width = 0;
  EXPECT_EQ(kernels::EmbeddingForward(bad, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.token_ids = nullptr;
  EXPECT_EQ(kernels::EmbeddingForward(bad, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.word = nullptr;
  EXPECT_EQ(kernels::EmbeddingForward(bad, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.out = nullptr;
  EXPECT_EQ(kernels::EmbeddingForward(bad, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.position_ids = reinterpret_cast<const int32_t*>(&dummy);  // no position table
  EXPECT_EQ(kernels::EmbeddingForward(bad, nullptr), cudaErrorInvalidValue);
  bad = p;
  const float g = 1.0f;
  bad.gamma = &g;  // gamma without beta
  EXPECT_EQ(kernels::EmbeddingForward(bad, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.tokens = -1;
  EXPECT_EQ(kernels::EmbeddingForward(bad, nullptr), cudaErrorInvalidValue);
  kernels::EmbeddingProblem empty;
  empty.width = 8;
  EXPECT_EQ(kernels::EmbeddingForward(empty, nullptr), cudaSuccess);
}

TEST(EncoderKernelArguments, BiasActivationAndParse) {
  int dummy = 0;
  EXPECT_EQ(kernels::BiasActivation(DataType::kFloat16, &dummy, 1, 0, 8, nullptr,
                                    Activation::kGeluErf, nullptr),
            cudaErrorInvalidValue);  // cols 0
  EXPECT_EQ(kernels::BiasActivation(DataType::kFloat16, nullptr, 1, 8, 8, nullptr,
                                    Activation::kGeluErf, nullptr),
            cudaErrorInvalidValue);  // null x
  EXPECT_EQ(kernels::BiasActivation(DataType::kFloat16, &dummy, 1, 8, 7, nullptr,
                                    Activation::kGeluErf, nullptr),
            cudaErrorInvalidValue);  // ld < cols
  EXPECT_EQ(kernels::BiasActivation(DataType::kFloat16, &dummy, 1, 8, 8, nullptr,
                                    static_cast<Activation>(42), nullptr),
            cudaErrorInvalidValue);  // bad activation
  EXPECT_EQ(kernels::BiasActivation(DataType::kFloat16, nullptr, 0, 8, 8, nullptr,
                                    Activation::kGeluErf, nullptr),
            cudaSuccess);

  Activation a = Activation::kIdentity;
  EXPECT_TRUE(kernels::ParseActivation("gelu", &a));
  EXPECT_EQ(a, Activation::kGeluErf);
  EXPECT_TRUE(kernels::ParseActivation("GELU_NEW", &a));
  EXPECT_EQ(a, Activation::kGeluTanh);
  EXPECT_TRUE(kernels::ParseActivation("gelu_pytorch_tanh", &a));
  EXPECT_EQ(a, Activation::kGeluTanh);
  EXPECT_TRUE(kernels::ParseActivation("gelu_fast", &a));
  EXPECT_EQ(a, Activation::kGeluTanh);
  EXPECT_TRUE(kernels::ParseActivation("tanh", &a));
  EXPECT_EQ(a, Activation::kTanh);
  EXPECT_TRUE(kernels::ParseActivation("relu", &a));
  EXPECT_EQ(a, Activation::kRelu);
  EXPECT_TRUE(kernels::ParseActivation("swish", &a));
  EXPECT_EQ(a, Activation::kSilu);
  EXPECT_TRUE(kernels::ParseActivation("silu", &a));
  EXPECT_EQ(a, Activation::kSilu);
  EXPECT_TRUE(kernels::ParseActivation("sigmoid", &a));
  EXPECT_EQ(a, Activation::kSigmoid);
  EXPECT_TRUE(kernels::ParseActivation("linear", &a));
  EXPECT_EQ(a, Activation::kIdentity);
  a = Activation::kRelu;
  EXPECT_FALSE(kernels::ParseActivation("gelu_10", &a));
  EXPECT_FALSE(kernels::ParseActivation("", &a));
  EXPECT_FALSE(kernels::ParseActivation(nullptr, &a));
  EXPECT_FALSE(kernels::ParseActivation("gelu", nullptr));
  EXPECT_EQ(a, Activation::kRelu);
}

TEST(EncoderKernelArguments, PoolingGatherConvert) {
  int dummy = 0;
  float out = 0.0f;
  const int32_t* cu = reinterpret_cast<const int32_t*>(&dummy);
  EXPECT_EQ(kernels::PoolSequences(DataType::kFloat16, &dummy, 8, cu, 1, 0, Pooling::kMean, false,
                                   &out, nullptr),
            cudaErrorInvalidValue);  // width 0
  EXPECT_EQ(kernels::PoolSequences(DataType::kFloat16, nullptr, 8, cu, 1, 8, Pooling::kMean, false,
                                   &out, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::PoolSequences(DataType::kFloat16, &dummy, 8, nullptr, 1, 8, Pooling::kMean,
                                   false, &out, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::PoolSequences(DataType::kFloat16, &dummy, 8, cu, 1, 8, Pooling::kMean, false,
                                   nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::PoolSequences(DataType::kFloat16, &dummy, 4, cu, 1, 8, Pooling::kMean, false,
                                   &out, nullptr),
            cudaErrorInvalidValue);  // ld < width
  EXPECT_EQ(kernels::PoolSequences(DataType::kFloat16, &dummy, 8, cu, 1, 8, static_cast<Pooling>(5),
                                   false, &out, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::PoolSequences(DataType::kFloat16, &dummy, 8, cu, -1, 8, Pooling::kMean, false,
                                   &out, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::PoolSequences(DataType::kFloat16, nullptr, 8, nullptr, 0, 8, Pooling::kMean,
                                   true, nullptr, nullptr),
            cudaSuccess);
  EXPECT_EQ(kernels::GatherFirstTokens(DataType::kFloat16, &dummy, 8, cu, 1, 8, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::GatherFirstTokens(DataType::kFloat16, &dummy, 8, cu, 1, 0, &out, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(
      kernels::GatherFirstTokens(DataType::kFloat16, nullptr, 8, nullptr, 0, 8, nullptr, nullptr),
      cudaSuccess);
  EXPECT_EQ(kernels::ConvertToFloat(DataType::kFloat16, nullptr, 4, &out, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::ConvertToFloat(DataType::kFloat16, &dummy, -1, &out, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::ConvertToFloat(DataType::kFloat16, nullptr, 0, nullptr, nullptr), cudaSuccess);
}

TEST(EncoderKernelArguments, ConvolutionColumns) {
  int dummy = 0;
  const int32_t* cu = reinterpret_cast<const int32_t*>(&dummy);
  auto call = [&](int width, int groups, int kernel, int64_t ld, int64_t tokens, int sequences,
                  const void* x, void* cols) {
    return kernels::ConvolutionColumns(DataType::kFloat16, x, ld, tokens, width, groups, kernel, cu,
                                       sequences, cols, nullptr);
  };
  EXPECT_EQ(call(8, 1, 4, 8, 2, 1, &dummy, &dummy), cudaErrorInvalidValue);  // even kernel
  EXPECT_EQ(call(8, 1, 0, 8, 2, 1, &dummy, &dummy), cudaErrorInvalidValue);  // kernel 0
  EXPECT_EQ(call(8, 3, 3, 8, 2, 1, &dummy, &dummy), cudaErrorInvalidValue);  // 3 does not divide 8
  EXPECT_EQ(call(8, 0, 3, 8, 2, 1, &dummy, &dummy), cudaErrorInvalidValue);  // groups 0
  EXPECT_EQ(call(0, 1, 3, 8, 2, 1, &dummy, &dummy), cudaErrorInvalidValue);  // width 0
  EXPECT_EQ(call(8, 1, 3, 4, 2, 1, &dummy, &dummy), cudaErrorInvalidValue);  // ld < width
  EXPECT_EQ(call(8, 1, 3, 8, 2, 0, &dummy, &dummy), cudaErrorInvalidValue);  // no sequences
  EXPECT_EQ(call(8, 1, 3, 8, 2, 1, nullptr, &dummy), cudaErrorInvalidValue);
  EXPECT_EQ(call(8, 1, 3, 8, 2, 1, &dummy, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(8, 1, 3, 8, 0, 0, nullptr, nullptr), cudaSuccess);
}

// ---------------------------------------------------------------------------------------------
// AddLayerNorm.

enum class LnMode { kPlain, kResidual, kInPlaceX, kInPlaceResidual, kMisaligned };

const char* Name(LnMode mode) {
  switch (mode) {
    case LnMode::kPlain:
      return "plain";
    case LnMode::kResidual:
      return "residual+strides";
    case LnMode::kInPlaceX:
      return "in-place(x)";
    case LnMode::kInPlaceResidual:
      return "in-place(residual)";
    case LnMode::kMisaligned:
      return "misaligned";
  }
  return "?";
}

std::vector<double> LayerNormReference(const std::vector<float>& x, const std::vector<float>* res,
                                       const std::vector<float>& gamma,
                                       const std::vector<float>& beta, double eps, int64_t rows,
                                       int width) {
  std::vector<double> out(rows * width);
  std::vector<double> v(width);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int c = 0; c < width; ++c) {
      v[c] = double{x[r * width + c]} + (res != nullptr ? double{(*res)[r * width + c]} : 0.0);
      sum += v[c];
    }
    const double mean = sum / width;
    double squares = 0.0;
    for (int c = 0; c < width; ++c) squares += (v[c] - mean) * (v[c] - mean);
    const double inv = 1.0 / std::sqrt(squares / width + eps);
    for (int c = 0; c < width; ++c) {
      out[r * width + c] = (v[c] - mean) * inv * gamma[c] + beta[c];
    }
  }
  return out;
}

void RunLayerNorm(DataType dtype, int width, int64_t rows, LnMode mode, uint32_t seed) {
  const std::string what = Describe(dtype, rows, width, Name(mode));
  SCOPED_TRACE(what);
  std::mt19937 rng(seed);
  const bool with_residual = mode != LnMode::kPlain && mode != LnMode::kMisaligned;
  const int64_t x_stride = mode == LnMode::kResidual ? width + 8 : width;
  const int64_t r_stride = mode == LnMode::kResidual ? width + 3 : width;
  const int64_t o_stride = mode == LnMode::kResidual ? width + 5 : width;
  const int64_t offset = mode == LnMode::kMisaligned ? 1 : 0;
  // A mean far from zero checks the two-pass variance.
  const std::vector<float> x = RoundTo(Random(rng, rows * width, 2.0f, 4.0f), dtype);
  const std::vector<float> res = RoundTo(Random(rng, rows * width, -1.0f, 1.0f), dtype);
  const std::vector<float> gamma = Random(rng, width, 0.5f, 1.5f);
  const std::vector<float> beta = Random(rng, width, -0.5f, 0.5f);
  const float eps = (seed % 2 == 0) ? 1e-7f : 1e-5f;

  Guarded xb(dtype, rows, width, x_stride, offset);
  Guarded rb(dtype, rows, width, r_stride);
  Guarded ob(dtype, rows, width, o_stride, offset);
  ASSERT_TRUE(xb.ok() && rb.ok() && ob.ok());
  xb.Upload(x);
  rb.Upload(res);
  const DeviceBuffer g = ToDevice(gamma);
  const DeviceBuffer b = ToDevice(beta);
  const Guarded* out = &ob;
  int64_t out_stride = o_stride;
  if (mode == LnMode::kInPlaceX) {
    out = &xb;
    out_stride = x_stride;
  } else if (mode == LnMode::kInPlaceResidual) {
    out = &rb;
    out_stride = r_stride;
  }
  DFLASH_CUDA_OK(kernels::AddLayerNorm(
      dtype, xb.get(), x_stride, with_residual ? rb.get() : nullptr, r_stride, g.as<float>(),
      b.as<float>(), eps, rows, width, out->get(), out_stride, nullptr));
  DFLASH_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = out->Download(what);
  const std::vector<double> ref =
      LayerNormReference(x, with_residual ? &res : nullptr, gamma, beta, eps, rows, width);
  ExpectClose(got, ref, rows, width, dtype, "AddLayerNorm", what);
}

TEST(EncoderKernels, AddLayerNorm) {
  DFLASH_REQUIRE_GPU();
  uint32_t seed = 1;
  for (DataType dtype : kTypes) {
    // 5001: odd and wider than the register-cached scalar path (streamed).
    for (int width : {1, 7, 32, 64, 768, 1024, 1536, 4096, 5001}) {
      for (LnMode mode : {LnMode::kPlain, LnMode::kResidual, LnMode::kInPlaceX,
                          LnMode::kInPlaceResidual, LnMode::kMisaligned}) {
        for (int64_t rows : {0, 1, 37}) {
          RunLayerNorm(dtype, width, rows, mode, seed++);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  // Many rows (grid-stride loop, several rows per block) at the common widths.
  for (DataType dtype : kTypes) {
    RunLayerNorm(dtype, 768, 4099, LnMode::kResidual, seed++);
    RunLayerNorm(dtype, 64, 9000, LnMode::kInPlaceX, seed++);
  }
}

// ---------------------------------------------------------------------------------------------
// EmbeddingForward.

struct EmbeddingCase {
  bool positions = true;
  bool type_table = true;
  bool type_ids = true;
  bool layer_norm = true;
};

void RunEmbedding(DataType dtype, int width, int64_t tokens, EmbeddingCase spec, uint32_t seed) {
  const std::string what = Describe(dtype, tokens, width,
                                    std::string("pos=") + (spec.positions ? "1" : "0") +
                                        " type_table=" + (spec.type_table ? "1" : "0") +
                                        " type_ids=" + (spec.type_ids ? "1" : "0") +
                                        " ln=" + (spec.layer_norm ? "1" : "0"));
  SCOPED_TRACE(what);
  std::mt19937 rng(seed);
  constexpr int kVocab = 97;
  constexpr int kPositions = 64;
  constexpr int kTypeVocab = 2;
  const std::vector<float> word = RoundTo(Random(rng, kVocab * width, -1.0f, 1.0f), dtype);
  const std::vector<float> position = RoundTo(Random(rng, kPositions * width, -0.5f, 0.5f), dtype);
  const std::vector<float> type = RoundTo(Random(rng, kTypeVocab * width, -0.5f, 0.5f), dtype);
  const std::vector<float> gamma = Random(rng, width, 0.5f, 1.5f);
  const std::vector<float> beta = Random(rng, width, -0.5f, 0.5f);
  std::vector<int32_t> ids(tokens), pos_ids(tokens), type_ids(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    ids[t] = static_cast<int32_t>(rng() % kVocab);
    pos_ids[t] = static_cast<int32_t>(t % kPositions);
    type_ids[t] = static_cast<int32_t>(rng() % kTypeVocab);
  }
  Guarded wb(dtype, kVocab, width, width), pb(dtype, kPositions, width, width),
      tb(dtype, kTypeVocab, width, width), ob(dtype, tokens, width, width);
  ASSERT_TRUE(wb.ok() && pb.ok() && tb.ok() && ob.ok());
  wb.Upload(word);
  pb.Upload(position);
  tb.Upload(type);
  const DeviceBuffer d_ids = ToDevice(ids), d_pos = ToDevice(pos_ids), d_types = ToDevice(type_ids);
  const DeviceBuffer g = ToDevice(gamma), b = ToDevice(beta);
  kernels::EmbeddingProblem p;
  p.dtype = dtype;
  p.tokens = tokens;
  p.width = width;
  p.token_ids = d_ids.as<int32_t>();
  p.token_type_ids = spec.type_ids ? d_types.as<int32_t>() : nullptr;
  p.position_ids = spec.positions ? d_pos.as<int32_t>() : nullptr;
  p.word = wb.get();
  p.position = spec.positions ? pb.get() : nullptr;
  p.token_type = spec.type_table ? tb.get() : nullptr;
  p.gamma = spec.layer_norm ? g.as<float>() : nullptr;
  p.beta = spec.layer_norm ? b.as<float>() : nullptr;
  p.eps = 1e-7f;
  p.out = ob.get();
  DFLASH_CUDA_OK(kernels::EmbeddingForward(p, nullptr));
  DFLASH_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = ob.Download(what);

  std::vector<float> sum(tokens * width);
  std::vector<double> ref(tokens * width);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int c = 0; c < width; ++c) {
      // The sum in float32 as the CPU engine forms it (word, + position, + type).
      float s = word[ids[t] * width + c];
      if (spec.positions) s += position[pos_ids[t] * width + c];
      if (spec.type_table) s += type[(spec.type_ids ? type_ids[t] : 0) * width + c];
      sum[t * width + c] = s;
      ref[t * width + c] = s;
    }
  }
  if (spec.layer_norm) ref = LayerNormReference(sum, nullptr, gamma, beta, 1e-7, tokens, width);
  ExpectClose(got, ref, tokens, width, dtype, "EmbeddingForward", what);
}

TEST(EncoderKernels, Embedding) {
  DFLASH_REQUIRE_GPU();
  uint32_t seed = 100;
  const EmbeddingCase cases[] = {
      {true, true, true, true},     // v2: positions, types, LayerNorm
      {false, true, false, true},   // v3: no absolute positions, type table, no type ids
      {false, false, false, true},  // no type vocabulary
      {true, true, true, false},    // E != H: raw sum (projection and LN follow)
  };
  for (DataType dtype : kTypes) {
    for (int width : {1, 7, 32, 64, 768, 1024, 1536, 4096}) {
      for (const EmbeddingCase& spec : cases) {
        for (int64_t tokens : {0, 1, 70}) {
          RunEmbedding(dtype, width, tokens, spec, seed++);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// BiasActivation.

double ActivationReference(Activation activation, double x) {
  switch (activation) {
    case Activation::kIdentity:
      return x;
    case Activation::kGeluErf:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x *
             (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kRelu:
      return std::max(x, 0.0);
    case Activation::kSilu:
      return x / (1.0 + std::exp(-x));
    case Activation::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
  }
  return 0.0;
}

const char* Name(Activation activation) {
  switch (activation) {
    case Activation::kIdentity:
      return "identity";
    case Activation::kGeluErf:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kTanh:
      return "tanh";
    case Activation::kRelu:
      return "relu";
    case Activation::kSilu:
      return "silu";
    case Activation::kSigmoid:
      return "sigmoid";
  }
  return "?";
}

void RunBiasActivation(DataType dtype, int cols, int64_t rows, int64_t ld, bool with_bias,
                       int64_t offset, Activation activation, uint32_t seed) {
  const std::string what =
      Describe(dtype, rows, cols,
               std::string(Name(activation)) + " ld=" + std::to_string(ld) +
                   " bias=" + (with_bias ? "1" : "0") + " offset=" + std::to_string(offset));
  SCOPED_TRACE(what);
  std::mt19937 rng(seed);
  const std::vector<float> x = RoundTo(Random(rng, rows * cols, -4.0f, 4.0f), dtype);
  const std::vector<float> bias = RoundTo(Random(rng, cols, -1.0f, 1.0f), dtype);
  Guarded xb(dtype, rows, cols, ld, offset);
  Guarded bb(dtype, 1, cols, cols, offset);
  ASSERT_TRUE(xb.ok() && bb.ok());
  xb.Upload(x);
  bb.Upload(bias);
  DFLASH_CUDA_OK(kernels::BiasActivation(dtype, xb.get(), rows, cols, ld,
                                         with_bias ? bb.get() : nullptr, activation, nullptr));
  DFLASH_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = xb.Download(what);
  std::vector<double> ref(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const double v = double{x[r * cols + c]} + (with_bias ? double{bias[c]} : 0.0);
      ref[r * cols + c] = ActivationReference(activation, v);
    }
  }
  ExpectClose(got, ref, rows, cols, dtype, std::string("BiasActivation ") + Name(activation), what);
}

TEST(EncoderKernels, BiasActivation) {
  DFLASH_REQUIRE_GPU();
  uint32_t seed = 1000;
  const Activation activations[] = {
      Activation::kIdentity, Activation::kGeluErf, Activation::kGeluTanh, Activation::kTanh,
      Activation::kRelu,     Activation::kSilu,    Activation::kSigmoid};
  for (DataType dtype : kTypes) {
    for (Activation activation : activations) {
      for (int cols : {1, 7, 32, 64, 768, 1024, 3072, 4096}) {
        RunBiasActivation(dtype, cols, 5, cols, true, 0, activation, seed++);
        RunBiasActivation(dtype, cols, 3, cols + 8, false, 0, activation, seed++);
        RunBiasActivation(dtype, cols, 2, cols + 3, true, 1, activation, seed++);
        if (HasFatalFailure()) return;
      }
    }
    RunBiasActivation(dtype, 64, 0, 64, true, 0, Activation::kGeluErf, seed++);
    RunBiasActivation(dtype, 4096, 1, 4096, true, 0, Activation::kGeluErf, seed++);
    RunBiasActivation(dtype, 3072, 700, 3072, true, 0, Activation::kGeluErf, seed++);
  }
}

// ---------------------------------------------------------------------------------------------
// PoolSequences, GatherFirstTokens, ConvertToFloat.

std::vector<int32_t> CuSeqlens(const std::vector<int>& lengths) {
  std::vector<int32_t> cu(lengths.size() + 1, 0);
  for (size_t s = 0; s < lengths.size(); ++s) cu[s + 1] = cu[s] + lengths[s];
  return cu;
}

void RunPooling(DataType dtype, int width, const std::vector<int>& lengths, int64_t ld,
                Pooling pooling, bool l2, uint32_t seed) {
  const std::vector<int32_t> cu = CuSeqlens(lengths);
  const int sequences = static_cast<int>(lengths.size());
  const int64_t tokens = cu.back();
  const std::string what =
      Describe(dtype, tokens, width,
               std::string(pooling == Pooling::kMean ? "mean" : "first") + (l2 ? "+l2" : "") +
                   " sequences=" + std::to_string(sequences) + " ld=" + std::to_string(ld));
  SCOPED_TRACE(what);
  std::mt19937 rng(seed);
  const std::vector<float> hidden = RoundTo(Random(rng, tokens * width, -0.5f, 1.0f), dtype);
  Guarded hb(dtype, tokens, width, ld);
  Guarded ob(DataType::kFloat32, sequences, width, width);
  ASSERT_TRUE(hb.ok() && ob.ok());
  hb.Upload(hidden);
  const DeviceBuffer d_cu = ToDevice(cu);
  DFLASH_CUDA_OK(kernels::PoolSequences(dtype, hb.get(), ld, d_cu.as<int32_t>(), sequences, width,
                                        pooling, l2, static_cast<float*>(ob.get()), nullptr));
  DFLASH_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = ob.Download(what);
  std::vector<double> ref(sequences * width, 0.0);
  for (int s = 0; s < sequences; ++s) {
    double* row = ref.data() + s * width;
    if (pooling == Pooling::kFirstToken) {
      for (int c = 0; c < width; ++c) row[c] = hidden[int64_t{cu[s]} * width + c];
    } else {
      for (int64_t t = cu[s]; t < cu[s + 1]; ++t) {
        for (int c = 0; c < width; ++c) row[c] += hidden[t * width + c];
      }
      for (int c = 0; c < width; ++c) row[c] /= lengths[s];
    }
    if (l2) {
      double squares = 0.0;
      for (int c = 0; c < width; ++c) squares += row[c] * row[c];
      const double norm = std::max(std::sqrt(squares), 1e-12);
      for (int c = 0; c < width; ++c) row[c] /= norm;
    }
  }
  ExpectClose(got, ref, sequences, width, DataType::kFloat32,
              std::string("PoolSequences(") + Name(dtype) + " in)", what);
}

TEST(EncoderKernels, PoolSequences) {
  DFLASH_REQUIRE_GPU();
  uint32_t seed = 5000;
  const std::vector<int> mixed = {1, 5, 1, 17, 300, 2, 64, 1};
  for (DataType dtype : kTypes) {
    for (int width : {1, 7, 32, 64, 768, 1024, 4096}) {
      for (Pooling pooling : {Pooling::kFirstToken, Pooling::kMean}) {
        for (bool l2 : {false, true}) {
          RunPooling(dtype, width, mixed, width, pooling, l2, seed++);
          RunPooling(dtype, width, {1}, width + 8, pooling, l2, seed++);
          if (HasFatalFailure()) return;
        }
      }
    }
    RunPooling(dtype, 64, {}, 64, Pooling::kMean, true, seed++);  // no sequences
    // One long sequence, alone and in a mixed batch.
    RunPooling(dtype, 1024, {32768}, 1024, Pooling::kMean, false, seed++);
    RunPooling(dtype, 1024, {3, 32768, 1, 100}, 1024, Pooling::kMean, true, seed++);
    RunPooling(dtype, 1024, {3, 32768, 1, 100}, 1024, Pooling::kFirstToken, true, seed++);
  }
}

TEST(EncoderKernels, GatherFirstTokensAndConvert) {
  DFLASH_REQUIRE_GPU();
  std::mt19937 rng(7);
  for (DataType dtype : kTypes) {
    for (int width : {1, 7, 32, 768, 4096}) {
      for (int64_t ld : {int64_t{width}, int64_t{width} + 3}) {
        const std::vector<int> lengths = {1, 4, 1, 9};
        const std::vector<int32_t> cu = CuSeqlens(lengths);
        const int64_t tokens = cu.back();
        const std::string what = Describe(dtype, tokens, width, "gather ld=" + std::to_string(ld));
        SCOPED_TRACE(what);
        const std::vector<float> hidden = RoundTo(Random(rng, tokens * width, -2.0f, 2.0f), dtype);
        Guarded hb(dtype, tokens, width, ld);
        Guarded ob(dtype, 4, width, width);
        ASSERT_TRUE(hb.ok() && ob.ok());
        hb.Upload(hidden);
        const DeviceBuffer d_cu = ToDevice(cu);
        DFLASH_CUDA_OK(kernels::GatherFirstTokens(dtype, hb.get(), ld, d_cu.as<int32_t>(), 4, width,
                                                  ob.get(), nullptr));
        DFLASH_CUDA_OK(cudaDeviceSynchronize());
        const std::vector<float> got = ob.Download(what);
        for (int s = 0; s < 4; ++s) {
          for (int c = 0; c < width; ++c) {
            ASSERT_EQ(got[s * width + c], hidden[int64_t{cu[s]} * width + c]) << what;
          }
        }
      }
    }
    for (int64_t count : {0, 1, 7, 1000, 4099}) {
      for (int64_t offset : {0, 1}) {
        const std::string what = std::string(Name(dtype)) +
                                 " convert count=" + std::to_string(count) +
                                 " offset=" + std::to_string(offset);
        SCOPED_TRACE(what);
        const std::vector<float> in = RoundTo(Random(rng, count, -100.0f, 100.0f), dtype);
        Guarded ib(dtype, 1, count, count, offset);
        Guarded ob(DataType::kFloat32, 1, count, count, offset);
        ASSERT_TRUE(ib.ok() && ob.ok());
        ib.Upload(in);
        DFLASH_CUDA_OK(kernels::ConvertToFloat(dtype, ib.get(), count,
                                               static_cast<float*>(ob.get()), nullptr));
        DFLASH_CUDA_OK(cudaDeviceSynchronize());
        const std::vector<float> got = ob.Download(what);
        for (int64_t i = 0; i < count; ++i) ASSERT_EQ(got[i], in[i]) << what << " i=" << i;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// ConvolutionColumns, and the documented weight layout: one GEMM per group over the columns with
// the taps as [groups][Cg_out][kernel_size][Cg] gives the HF Conv1d.

void RunConvolution(DataType dtype, int width, int groups, int kernel,
                    const std::vector<int>& lengths, int64_t ld, uint32_t seed) {
  const std::vector<int32_t> cu = CuSeqlens(lengths);
  const int sequences = static_cast<int>(lengths.size());
  const int64_t tokens = cu.back();
  const std::string what =
      Describe(dtype, tokens, width,
               "groups=" + std::to_string(groups) + " kernel=" + std::to_string(kernel) +
                   " ld=" + std::to_string(ld) + " sequences=" + std::to_string(sequences));
  SCOPED_TRACE(what);
  std::mt19937 rng(seed);
  const std::vector<float> x = RoundTo(Random(rng, tokens * width, -1.0f, 1.0f), dtype);
  const int64_t row = int64_t{kernel} * width;
  Guarded xb(dtype, tokens, width, ld);
  Guarded cb(dtype, tokens, row, row);
  ASSERT_TRUE(xb.ok() && cb.ok());
  xb.Upload(x);
  const DeviceBuffer d_cu = ToDevice(cu);
  DFLASH_CUDA_OK(kernels::ConvolutionColumns(dtype, xb.get(), ld, tokens, width, groups, kernel,
                                             d_cu.as<int32_t>(), sequences, cb.get(), nullptr));
  DFLASH_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = cb.Download(what);
  const int cg = width / groups;
  const int pad = (kernel - 1) / 2;
  for (int s = 0; s < sequences; ++s) {
    for (int64_t t = cu[s]; t < cu[s + 1]; ++t) {
      for (int g = 0; g < groups; ++g) {
        for (int q = 0; q < kernel; ++q) {
          const int64_t source = t + q - pad;
          const bool inside = source >= cu[s] && source < cu[s + 1];
          for (int c = 0; c < cg; ++c) {
            const float want = inside ? x[source * width + g * cg + c] : 0.0f;
            ASSERT_EQ(got[t * row + (int64_t{g} * kernel + q) * cg + c], want)
                << what << " t=" << t << " g=" << g << " q=" << q << " c=" << c;
          }
        }
      }
    }
  }
  // The GEMM contract on the columns against the direct HF formula (float64, small cases).
  if (tokens * width * width > 4'000'000) return;
  const std::vector<float> w = Random(rng, int64_t{width} * cg * kernel, -1.0f, 1.0f);  // [H,Cg,k]
  std::vector<double> reordered(w.size());  // [groups][Cg_out][k][Cg]
  for (int g = 0; g < groups; ++g) {
    for (int o = 0; o < cg; ++o) {
      for (int q = 0; q < kernel; ++q) {
        for (int c = 0; c < cg; ++c) {
          reordered[((int64_t{g} * cg + o) * kernel + q) * cg + c] =
              w[((int64_t{g} * cg + o) * cg + c) * kernel + q];
        }
      }
    }
  }
  double worst = 0.0;
  for (int s = 0; s < sequences; ++s) {
    for (int64_t t = cu[s]; t < cu[s + 1]; ++t) {
      for (int o = 0; o < width; ++o) {
        const int g = o / cg;
        double direct = 0.0;
        for (int ch = 0; ch < cg; ++ch) {
          for (int q = 0; q < kernel; ++q) {
            const int64_t source = t + q - pad;
            if (source < cu[s] || source >= cu[s + 1]) continue;
            direct +=
                double{w[(int64_t{o} * cg + ch) * kernel + q]} * x[source * width + g * cg + ch];
          }
        }
        double gemm = 0.0;
        const int64_t k_dim = int64_t{kernel} * cg;
        for (int64_t k = 0; k < k_dim; ++k) {
          gemm += double{got[t * row + g * k_dim + k]} *
                  reordered[(int64_t{g} * cg + (o - g * cg)) * k_dim + k];
        }
        worst = std::max(worst, std::abs(gemm - direct));
      }
    }
  }
  EXPECT_LE(worst, 1e-9) << what << ": GEMM over the columns differs from the HF convolution";
}

TEST(EncoderKernels, ConvolutionColumns) {
  DFLASH_REQUIRE_GPU();
  uint32_t seed = 9000;
  // Sequences shorter than the kernel (1, 2), and longer ones, packed.
  const std::vector<int> lengths = {1, 2, 7, 1, 40, 3};
  for (DataType dtype : kTypes) {
    for (int width : {1, 7, 32, 64, 768}) {
      for (int groups : {1, 2}) {
        if (width % groups != 0) continue;
        for (int kernel : {1, 3, 5}) {
          RunConvolution(dtype, width, groups, kernel, lengths, width, seed++);
          RunConvolution(dtype, width, groups, kernel, {2}, width + 8, seed++);
          if (HasFatalFailure()) return;
        }
      }
    }
    RunConvolution(dtype, 1536, 2, 3, {100, 1, 27}, 1536, seed++);
  }
}

// ---------------------------------------------------------------------------------------------
// Bandwidth probe (not a check; run with --gtest_also_run_disabled_tests): median of 20 runs after
// a warm-up, effective GB/s of the bytes each kernel must move.

template <typename F>
double MedianMs(F&& launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  launch();
  cudaDeviceSynchronize();
  std::vector<float> times;
  for (int i = 0; i < 20; ++i) {
    cudaEventRecord(start);
    launch();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

TEST(EncoderKernels, DISABLED_Bandwidth) {
  DFLASH_REQUIRE_GPU();
  std::mt19937 rng(3);
  auto report = [](const char* what, double ms, double bytes) {
    std::cout << "[bandwidth] " << what << ": " << ms * 1e3 << " us, " << bytes / (ms * 1e6)
              << " GB/s\n";
  };
  const DataType dtype = DataType::kFloat16;
  for (int width : {768, 1024, 4096}) {
    const int64_t rows = 16384;
    const std::vector<float> values = Random(rng, rows * width, -1.0f, 1.0f);
    Guarded x(dtype, rows, width, width), r(dtype, rows, width, width);
    x.Upload(values);
    r.Upload(values);
    const DeviceBuffer g = ToDevice(Random(rng, width, 0.5f, 1.5f));
    const double ms = MedianMs([&] {
      kernels::AddLayerNorm(dtype, x.get(), width, r.get(), width, g.as<float>(), g.as<float>(),
                            1e-7f, rows, width, x.get(), width, nullptr);
    });
    report(("AddLayerNorm fp16 16384 x " + std::to_string(width) + " (x, residual, out)").c_str(),
           ms, 3.0 * rows * width * 2);
    const double act_ms = MedianMs([&] {
      kernels::BiasActivation(dtype, x.get(), rows, width, width, r.get(), Activation::kGeluErf,
                              nullptr);
    });
    report(("BiasActivation gelu fp16 16384 x " + std::to_string(width)).c_str(), act_ms,
           2.0 * rows * width * 2);
  }
  {
    const int width = 1024;
    const std::vector<int32_t> cu = {0, 32768};
    const int64_t rows = 32768;
    Guarded h(dtype, rows, width, width);
    h.Upload(Random(rng, rows * width, -1.0f, 1.0f));
    Guarded out(DataType::kFloat32, 1, width, width);
    const DeviceBuffer d_cu = ToDevice(cu);
    const double ms = MedianMs([&] {
      kernels::PoolSequences(dtype, h.get(), width, d_cu.as<int32_t>(), 1, width, Pooling::kMean,
                             true, static_cast<float*>(out.get()), nullptr);
    });
    report("PoolSequences mean+l2 fp16 1 x 32768 x 1024", ms, 1.0 * rows * width * 2);
    std::vector<int> lengths(256, 128);
    const std::vector<int32_t> cu256 = CuSeqlens(lengths);
    Guarded out256(DataType::kFloat32, 256, width, width);
    const DeviceBuffer d_cu256 = ToDevice(cu256);
    const double ms256 = MedianMs([&] {
      kernels::PoolSequences(dtype, h.get(), width, d_cu256.as<int32_t>(), 256, width,
                             Pooling::kMean, true, static_cast<float*>(out256.get()), nullptr);
    });
    report("PoolSequences mean+l2 fp16 256 x 128 x 1024", ms256, 1.0 * rows * width * 2);
    Guarded cols(dtype, rows, 3 * width, 3 * width);
    const double conv_ms = MedianMs([&] {
      kernels::ConvolutionColumns(dtype, h.get(), width, rows, width, 1, 3, d_cu256.as<int32_t>(),
                                  256, cols.get(), nullptr);
    });
    report("ConvolutionColumns fp16 32768 x 1024 k=3", conv_ms, 4.0 * rows * width * 2);
    std::vector<int32_t> ids(rows);
    for (int64_t t = 0; t < rows; ++t) ids[t] = static_cast<int32_t>(rng() % 1000);
    const DeviceBuffer d_ids = ToDevice(ids);
    Guarded word(dtype, 1000, width, width);
    word.Upload(Random(rng, 1000 * width, -1.0f, 1.0f));
    const DeviceBuffer g = ToDevice(Random(rng, width, 0.5f, 1.5f));
    kernels::EmbeddingProblem p;
    p.dtype = dtype;
    p.tokens = rows;
    p.width = width;
    p.token_ids = d_ids.as<int32_t>();
    p.word = word.get();
    p.position_ids = d_ids.as<int32_t>();
    p.position = word.get();
    p.token_type = word.get();
    p.gamma = g.as<float>();
    p.beta = g.as<float>();
    p.out = cols.get();
    const double emb_ms = MedianMs([&] { kernels::EmbeddingForward(p, nullptr); });
    report("EmbeddingForward fp16 32768 x 1024 (word+pos+type, LN)", emb_ms,
           4.0 * rows * width * 2);
  }
}

}  // namespace
}  // namespace dflash
