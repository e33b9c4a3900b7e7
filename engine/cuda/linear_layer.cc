#include "engine/cuda/linear_layer.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_status.h"

namespace dflash::cuda {
namespace {

#define DFLASH_RETURN_IF_CUBLAS_ERROR(expr, what)                                                  \
  do {                                                                                             \
    if (cublasStatus_t dflash_blas_status_ = (expr); dflash_blas_status_ != CUBLAS_STATUS_SUCCESS) \
      return CublasStatus(dflash_blas_status_, what);                                              \
  } while (false)

cudaDataType_t CudaType(kernels::DataType dtype) {
  switch (dtype) {
    case kernels::DataType::kFloat16:
      return CUDA_R_16F;
    case kernels::DataType::kBFloat16:
      return CUDA_R_16BF;
    case kernels::DataType::kFloat32:
      break;
  }
  return CUDA_R_32F;
}

// The largest power of two (<= 256) dividing every operand address: cuBLASLt picks vectorised
// kernels only for operands it is told are aligned.
int CommonAlignment(const LinearCall& call) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(call.x) | reinterpret_cast<uintptr_t>(call.w) |
                   reinterpret_cast<uintptr_t>(call.y) |
                   reinterpret_cast<uintptr_t>(call.residual) |
                   reinterpret_cast<uintptr_t>(call.bias) | uintptr_t{256};
  return static_cast<int>(bits & (~bits + 1));
}

// Exact shapes whose descriptors are kept (a few per layer kind and batch size seen).
constexpr size_t kMaxCachedShapes = 4096;

int64_t BucketOf(int64_t m) {
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(m)));
}

absl::Status CheckCall(const LinearCall& call) {
  if (call.m < 0 || call.n <= 0 || call.k <= 0 || call.x == nullptr || call.w == nullptr ||
      call.y == nullptr || call.ldx < call.k || call.ldw < call.k || call.ldy < call.n ||
      (call.residual != nullptr && call.ld_residual < call.n)) {
    return absl::InternalError(absl::StrCat("invalid linear layer call: m=", call.m, " n=", call.n,
                                            " k=", call.k, " ldx=", call.ldx, " ldw=", call.ldw,
                                            " ldy=", call.ldy));
  }
  return absl::OkStatus();
}

}  // namespace

// Owns the descriptors of one shape.
class MatmulDescriptors {
 public:
  ~MatmulDescriptors() {
    if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, c, d}) {
      if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
    }
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }

  // Column-major view of the row-major product: D^T[n, m] = W[n, k] . X^T[k, m], so A = W read
  // transposed (col-major [k, n], ld ldw), B = X (col-major [k, m], ld ldx), C = residual^T and
  // D = Y^T (col-major [n, m]).
  absl::Status Build(const LinearCall& call, int64_t m, bool allow_tf32) {
    const cudaDataType_t type = CudaType(call.dtype);
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (call.dtype == kernels::DataType::kFloat32 && allow_tf32) {
      compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    }
    DFLASH_RETURN_IF_CUBLAS_ERROR(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F),
                                  "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T;
    DFLASH_RETURN_IF_CUBLAS_ERROR(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                                 &transpose, sizeof(transpose)),
                                  "cublasLtMatmulDescSetAttribute(TRANSA)");
    if (call.bias != nullptr) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      DFLASH_RETURN_IF_CUBLAS_ERROR(
          cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                         sizeof(epilogue)),
          "cublasLtMatmulDescSetAttribute(EPILOGUE)");
      DFLASH_RETURN_IF_ERROR(SetBias(call.bias));
    }
    DFLASH_RETURN_IF_CUBLAS_ERROR(cublasLtMatrixLayoutCreate(&a, type, call.k, call.n, call.ldw),
                                  "cublasLtMatrixLayoutCreate(A)");
    DFLASH_RETURN_IF_CUBLAS_ERROR(cublasLtMatrixLayoutCreate(&b, type, call.k, m, call.ldx),
                                  "cublasLtMatrixLayoutCreate(B)");
    const int64_t ld_c = call.residual != nullptr ? call.ld_residual : call.ldy;
    DFLASH_RETURN_IF_CUBLAS_ERROR(cublasLtMatrixLayoutCreate(&c, type, call.n, m, ld_c),
                                  "cublasLtMatrixLayoutCreate(C)");
    DFLASH_RETURN_IF_CUBLAS_ERROR(cublasLtMatrixLayoutCreate(&d, type, call.n, m, call.ldy),
                                  "cublasLtMatrixLayoutCreate(D)");
    return absl::OkStatus();
  }

  // The bias pointer changes from layer to layer of one shape: set before every call.
  absl::Status SetBias(const void* bias) {
    DFLASH_RETURN_IF_CUBLAS_ERROR(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
        "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    return absl::OkStatus();
  }

  absl::Status Prefer(size_t workspace_bytes, uint32_t alignment) {
    DFLASH_RETURN_IF_CUBLAS_ERROR(cublasLtMatmulPreferenceCreate(&preference),
                                  "cublasLtMatmulPreferenceCreate");
    DFLASH_RETURN_IF_CUBLAS_ERROR(
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace_bytes, sizeof(workspace_bytes)),
        "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
    for (cublasLtMatmulPreferenceAttributes_t attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      DFLASH_RETURN_IF_CUBLAS_ERROR(cublasLtMatmulPreferenceSetAttribute(
                                        preference, attribute, &alignment, sizeof(alignment)),
                                    "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
    }
    return absl::OkStatus();
  }

  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
};

absl::StatusOr<std::unique_ptr<LinearLayers>> LinearLayers::Create(void* workspace,
                                                                   size_t workspace_bytes,
                                                                   const Options& options) {
  cublasLtHandle_t handle = nullptr;
  DFLASH_RETURN_IF_CUBLAS_ERROR(cublasLtCreate(&handle), "cublasLtCreate");
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  if (const cudaError_t error = cudaEventCreate(&start); error != cudaSuccess) {
    cublasLtDestroy(handle);
    return CudaStatus(error, "cudaEventCreate");
  }
  if (const cudaError_t error = cudaEventCreate(&stop); error != cudaSuccess) {
    cudaEventDestroy(start);
    cublasLtDestroy(handle);
    return CudaStatus(error, "cudaEventCreate");
  }
  return std::unique_ptr<LinearLayers>(
      new LinearLayers(handle, start, stop, workspace, workspace_bytes, options));
}

LinearLayers::LinearLayers(cublasLtHandle_t handle, cudaEvent_t start, cudaEvent_t stop,
                           void* workspace, size_t workspace_bytes, const Options& options)
    : handle_(handle),
      start_(start),
      stop_(stop),
      workspace_(workspace),
      workspace_bytes_(workspace_bytes),
      options_(options) {}

LinearLayers::~LinearLayers() {
  descriptors_.clear();
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
  cublasLtDestroy(handle_);
}

absl::Status LinearLayers::Run(const LinearCall& call, cudaStream_t stream) {
  DFLASH_RETURN_IF_ERROR(CheckCall(call));
  if (call.m == 0) return absl::OkStatus();
  const int alignment = CommonAlignment(call);
  const ShapeKey key{static_cast<int>(call.dtype),
                     BucketOf(call.m),
                     call.n,
                     call.k,
                     call.ldx,
                     call.ldw,
                     call.ldy,
                     call.residual != nullptr ? call.ld_residual : 0,
                     call.bias != nullptr,
                     call.residual != nullptr,
                     alignment};
  ShapeKey exact = key;
  exact.m_bucket = call.m;
  auto built = descriptors_.find(exact);
  if (built == descriptors_.end()) {
    if (descriptors_.size() >= kMaxCachedShapes) descriptors_.clear();
    auto made = std::make_unique<MatmulDescriptors>();
    DFLASH_RETURN_IF_ERROR(made->Build(call, call.m, options_.allow_tf32));
    built = descriptors_.emplace(exact, std::move(made)).first;
  } else if (call.bias != nullptr) {
    DFLASH_RETURN_IF_ERROR(built->second->SetBias(call.bias));
  }
  const MatmulDescriptors& descriptors = *built->second;
  auto cached = algorithms_.find(key);
  if (cached == algorithms_.end()) {
    DFLASH_ASSIGN_OR_RETURN(cublasLtMatmulAlgo_t algorithm,
                            ChooseAlgorithm(call, key, descriptors, stream));
    cached = algorithms_.emplace(key, algorithm).first;
  }
  const absl::Status launched = Launch(call, descriptors, cached->second, stream);
  if (launched.ok()) return launched;
  // The bucket's algorithm was chosen at one token count of the bucket; should cuBLASLt refuse it
  // at this one, the heuristic's first choice for the exact shape runs instead (not cached).
  DFLASH_ASSIGN_OR_RETURN(const std::vector<cublasLtMatmulHeuristicResult_t> exact_choice,
                          Candidates(call, call.m, alignment, 1));
  return Launch(call, descriptors, exact_choice[0].algo, stream);
}

absl::Status LinearLayers::Launch(const LinearCall& call, const MatmulDescriptors& descriptors,
                                  const cublasLtMatmulAlgo_t& algorithm, cudaStream_t stream) {
  const float alpha = 1.0f;
  const float beta = call.residual != nullptr ? 1.0f : 0.0f;
  const void* c = call.residual != nullptr ? call.residual : call.y;
  DFLASH_RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmul(handle_, descriptors.op, &alpha, call.w, descriptors.a, call.x, descriptors.b,
                     &beta, c, descriptors.c, call.y, descriptors.d, &algorithm, workspace_,
                     workspace_bytes_, stream),
      absl::StrCat("cublasLtMatmul ", call.m, "x", call.n, "x", call.k));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<cublasLtMatmulHeuristicResult_t>> LinearLayers::Candidates(
    const LinearCall& call, int64_t m, int alignment, int count) const {
  MatmulDescriptors shape;
  DFLASH_RETURN_IF_ERROR(shape.Build(call, m, options_.allow_tf32));
  DFLASH_RETURN_IF_ERROR(shape.Prefer(workspace_bytes_, static_cast<uint32_t>(alignment)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  DFLASH_RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmulAlgoGetHeuristic(handle_, shape.op, shape.a, shape.b, shape.c, shape.d,
                                     shape.preference, count, results.data(), &found),
      "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) {
    return absl::InternalError(
        absl::StrCat("cuBLASLt has no algorithm for a ", m, "x", call.n, "x", call.k, " GEMM"));
  }
  results.resize(static_cast<size_t>(found));
  return results;
}

absl::StatusOr<cublasLtMatmulAlgo_t> LinearLayers::ChooseAlgorithm(const LinearCall& call,
                                                                   const ShapeKey& key,
                                                                   const MatmulDescriptors& exact,
                                                                   cudaStream_t stream) {
  // The heuristic sees the bucket's token count; the chosen algorithm serves every count in it.
  DFLASH_ASSIGN_OR_RETURN(
      const std::vector<cublasLtMatmulHeuristicResult_t> results,
      Candidates(call, key.m_bucket, key.alignment, std::max(1, options_.timed_candidates)));
  const int found = static_cast<int>(results.size());
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  DFLASH_RETURN_IF_CUDA_ERROR(cudaStreamIsCapturing(stream, &capturing), "cudaStreamIsCapturing");
  // Repeated runs on an in-place residual (Y == residual) would compound: not timed.
  if (found == 1 || capturing != cudaStreamCaptureStatusNone || call.y == call.residual) {
    return results[0].algo;
  }
  // Each candidate: one untimed run (first-launch costs), then kRuns back to back between two
  // events; a candidate cuBLASLt refuses for the exact shape is skipped.
  constexpr int kRuns = 5;
  int best = 0;
  float best_ms = std::numeric_limits<float>::infinity();
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulAlgo_t& algorithm = results[static_cast<size_t>(i)].algo;
    if (!Launch(call, exact, algorithm, stream).ok()) continue;
    DFLASH_RETURN_IF_CUDA_ERROR(cudaEventRecord(start_, stream), "cudaEventRecord");
    for (int run = 0; run < kRuns; ++run) {
      DFLASH_RETURN_IF_ERROR(Launch(call, exact, algorithm, stream));
    }
    DFLASH_RETURN_IF_CUDA_ERROR(cudaEventRecord(stop_, stream), "cudaEventRecord");
    DFLASH_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(stop_), "timing GEMM candidates");
    float ms = 0.0f;
    DFLASH_RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    if (ms < best_ms) {
      best = i;
      best_ms = ms;
    }
  }
  return results[static_cast<size_t>(best)].algo;
}

}  // namespace dflash::cuda
