// The C interface of kernels/capi/dflash_attention.h over DisentangledAttentionForward: argument
// checks with messages, the registry of host slot tables, a cuBLAS handle per device and thread,
// and the current device of this library's (static) CUDA runtime.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/attention/disentangled_attention.h"
#include "kernels/capi/dflash_attention.h"

namespace {

using dflash::kernels::AttentionKernelConfig;
using dflash::kernels::AttentionMma;
using dflash::kernels::AttentionProblem;
using dflash::kernels::AttentionWindows;
using dflash::kernels::DataType;

thread_local std::string last_error;

dflash_attention_status Fail(dflash_attention_status status, std::string message) {
  last_error = std::move(message);
  return status;
}

// A host copy of a registered slot table. Entries are never freed, so the pointers handed to the
// kernel stay valid without locking during a forward.
struct PositionsEntry {
  std::vector<int32_t> table;
  int64_t band = 0;
  int32_t span = 0;
};

class PositionsRegistry {
 public:
  int32_t Register(const int32_t* table, int64_t band, int32_t span) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t count = static_cast<size_t>(2 * band + 1);
    for (size_t id = 0; id < entries_.size(); ++id) {
      const PositionsEntry& entry = *entries_[id];
      if (entry.band == band && entry.span == span &&
          std::memcmp(entry.table.data(), table, count * sizeof(int32_t)) == 0) {
        return static_cast<int32_t>(id);
      }
    }
    auto entry = std::make_unique<PositionsEntry>();
    entry->table.assign(table, table + count);
    entry->band = band;
    entry->span = span;
    entries_.push_back(std::move(entry));
    return static_cast<int32_t>(entries_.size() - 1);
  }

  const PositionsEntry* Find(int32_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (id < 0 || static_cast<size_t>(id) >= entries_.size()) return nullptr;
    return entries_[static_cast<size_t>(id)].get();
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<PositionsEntry>> entries_;
};

PositionsRegistry& Registry() {
  static PositionsRegistry* registry = new PositionsRegistry;  // Outlives every caller.
  return *registry;
}

// Makes `device` current for this library's runtime while alive, restoring the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) status_ = cudaSetDevice(device);
    switched_ = previous_ != device && previous_ >= 0 && status_ == cudaSuccess;
  }
  ~DeviceScope() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  // OK, or CUDA_ERROR with the reason recorded when `device` could not be made current.
  dflash_attention_status status() const {
    if (status_ == cudaSuccess) return DFLASH_ATTENTION_OK;
    return Fail(DFLASH_ATTENTION_CUDA_ERROR,
                std::string("cudaSetDevice: ") + cudaGetErrorString(status_));
  }

 private:
  int previous_ = -1;
  bool switched_ = false;
  cudaError_t status_ = cudaSuccess;
};

// One handle per (thread, device): a handle is bound to a stream per call, so threads must not
// share one. Handles are never destroyed: at process exit the CUDA context may already be gone.
dflash_attention_status BlasHandle(int device, cublasHandle_t* handle) {
  thread_local std::map<int, cublasHandle_t> handles;
  if (auto found = handles.find(device); found != handles.end()) {
    *handle = found->second;
    return DFLASH_ATTENTION_OK;
  }
  cublasHandle_t created = nullptr;
  if (const cublasStatus_t status = cublasCreate(&created); status != CUBLAS_STATUS_SUCCESS) {
    return Fail(DFLASH_ATTENTION_CUDA_ERROR,
                std::string("cublasCreate failed: ") + cublasGetStatusString(status));
  }
  handles.emplace(device, created);
  *handle = created;
  return DFLASH_ATTENTION_OK;
}

dflash_attention_status ToConfig(const dflash_attention_config* in, AttentionKernelConfig* out) {
  if (in->struct_size < sizeof(dflash_attention_config)) {
    return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT,
                "dflash_attention_config.struct_size is " + std::to_string(in->struct_size) +
                    ", expected at least " + std::to_string(sizeof(*in)));
  }
  if (in->windows != 0 && in->windows != 1) {
    return Fail(
        DFLASH_ATTENTION_INVALID_ARGUMENT,
        "config.windows must be 0 (tables) or 1 (computed), got " + std::to_string(in->windows));
  }
  if (in->mma != 0 && in->mma != 1) {
    return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT,
                "config.mma must be 0 (sync) or 1 (wgmma), got " + std::to_string(in->mma));
  }
  out->windows = in->windows == 1 ? AttentionWindows::kComputed : AttentionWindows::kTables;
  out->mma = in->mma == 1 ? AttentionMma::kWarpgroup : AttentionMma::kSync;
  out->min_blocks_per_sm = in->min_blocks_per_sm;
  out->key_groups = in->key_groups;
  out->block_m = in->block_m;
  out->block_n = in->block_n;
  out->warps = in->warps;
  return DFLASH_ATTENTION_OK;
}

void FromConfig(const AttentionKernelConfig& in, dflash_attention_config* out) {
  out->struct_size = sizeof(dflash_attention_config);
  out->windows = in.windows == AttentionWindows::kComputed ? 1 : 0;
  out->mma = in.mma == AttentionMma::kWarpgroup ? 1 : 0;
  out->min_blocks_per_sm = in.min_blocks_per_sm;
  out->key_groups = in.key_groups;
  out->block_m = in.block_m;
  out->block_n = in.block_n;
  out->warps = in.warps;
}

// The kernel's problem for `args`; `config` receives args->config when given (then
// problem->config points at it).
dflash_attention_status ToProblem(const dflash_attention_args* args, AttentionProblem* problem,
                                  AttentionKernelConfig* config) {
  if (args == nullptr) return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "args is null");
  if (args->struct_size < sizeof(dflash_attention_args)) {
    return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT,
                "dflash_attention_args.struct_size is " + std::to_string(args->struct_size) +
                    ", expected at least " + std::to_string(sizeof(*args)));
  }
  switch (args->dtype) {
    case DFLASH_ATTENTION_FLOAT16:
      problem->dtype = DataType::kFloat16;
      break;
    case DFLASH_ATTENTION_BFLOAT16:
      problem->dtype = DataType::kBFloat16;
      break;
    case DFLASH_ATTENTION_FLOAT32:
      problem->dtype = DataType::kFloat32;
      break;
    default:
      return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT,
                  "unknown dtype " + std::to_string(args->dtype));
  }
  if (args->head_dim != 32 && args->head_dim != 64 && args->head_dim != 128) {
    return Fail(DFLASH_ATTENTION_UNSUPPORTED,
                "head_dim " + std::to_string(args->head_dim) + " (supported: 32, 64, 128)");
  }
  if (args->num_heads < 1 || args->num_sequences < 1) {
    return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "num_heads and num_sequences must be >= 1");
  }
  if (args->key_padding_mask != nullptr) {
    if (args->padded_length < 1) {
      return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "padded layout with padded_length < 1");
    }
  } else if (args->cu_seqlens == nullptr || args->max_seqlen < 1 || args->total_tokens < 1) {
    return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT,
                "packed layout needs cu_seqlens, max_seqlen >= 1 and total_tokens >= 1");
  }
  problem->allow_tf32 = args->allow_tf32 != 0;
  problem->num_heads = args->num_heads;
  problem->head_dim = args->head_dim;
  problem->q = args->q;
  problem->k = args->k;
  problem->v = args->v;
  problem->q_row_stride = args->q_row_stride;
  problem->k_row_stride = args->k_row_stride;
  problem->v_row_stride = args->v_row_stride;
  problem->out = args->out;
  problem->out_row_stride = args->out_row_stride;
  problem->pos_key = args->pos_key;
  problem->pos_query = args->pos_query;
  problem->cu_seqlens = args->cu_seqlens;
  problem->num_sequences = args->num_sequences;
  problem->max_seqlen = args->max_seqlen;
  problem->total_tokens = args->total_tokens;
  problem->key_padding_mask = args->key_padding_mask;
  problem->padded_length = args->padded_length;
  problem->scale = args->scale;
  problem->lse = args->lse;
  if (args->pos_key != nullptr || args->pos_query != nullptr) {
    const PositionsEntry* entry = Registry().Find(args->positions_id);
    if (entry == nullptr) {
      return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT,
                  "unknown positions_id " + std::to_string(args->positions_id) +
                      " (dflash_attention_register_positions gives ids)");
    }
    if (args->slot_table == nullptr) {
      return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "position terms without a slot_table");
    }
    problem->positions.host = entry->table.data();
    problem->positions.device = args->slot_table;
    problem->positions.band = entry->band;
    problem->positions.span = entry->span;
    problem->positions.settled = true;
  }
  if (args->config != nullptr) {
    if (const dflash_attention_status status = ToConfig(args->config, config);
        status != DFLASH_ATTENTION_OK) {
      return status;
    }
    problem->config = config;
  }
  return DFLASH_ATTENTION_OK;
}

}  // namespace

extern "C" {

uint32_t dflash_attention_abi_version(void) { return DFLASH_ATTENTION_ABI_VERSION; }

const char* dflash_attention_last_error(void) { return last_error.c_str(); }

int32_t dflash_attention_cuda_version(void) {
  int version = 0;
  return cudaRuntimeGetVersion(&version) == cudaSuccess ? version : 0;
}

int32_t dflash_attention_wgmma_compiled(void) {
  return dflash::kernels::AttentionWgmmaCompiled() ? 1 : 0;
}

dflash_attention_status dflash_attention_register_positions(const int32_t* table, int64_t band,
                                                            int32_t span, int32_t* id) {
  last_error.clear();
  if (table == nullptr || id == nullptr) {
    return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "table and id must not be null");
  }
  if (band < 0 || band > (int64_t{1} << 24) || span < 1) {
    return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "band must be in [0, 2^24] and span >= 1");
  }
  for (int64_t entry = 0; entry <= 2 * band; ++entry) {
    if (table[entry] < 0 || table[entry] >= 2 * span) {
      return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "slot table entry " + std::to_string(entry) +
                                                         " is " + std::to_string(table[entry]) +
                                                         ", outside [0, 2 * span)");
    }
  }
  *id = Registry().Register(table, band, span);
  return DFLASH_ATTENTION_OK;
}

dflash_attention_status dflash_attention_workspace_bytes(const dflash_attention_args* args,
                                                         size_t* bytes) {
  last_error.clear();
  if (bytes == nullptr) return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "bytes is null");
  AttentionProblem problem;
  AttentionKernelConfig config;
  if (const dflash_attention_status status = ToProblem(args, &problem, &config);
      status != DFLASH_ATTENTION_OK) {
    return status;
  }
  DeviceScope scope(args->device);
  if (const dflash_attention_status status = scope.status(); status != DFLASH_ATTENTION_OK) {
    return status;
  }
  *bytes = dflash::kernels::AttentionWorkspaceBytes(problem);
  return DFLASH_ATTENTION_OK;
}

dflash_attention_status dflash_attention_heuristic_config(const dflash_attention_args* args,
                                                          dflash_attention_config* config) {
  last_error.clear();
  if (config == nullptr) return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "config is null");
  AttentionProblem problem;
  AttentionKernelConfig given;
  if (const dflash_attention_status status = ToProblem(args, &problem, &given);
      status != DFLASH_ATTENTION_OK) {
    return status;
  }
  DeviceScope scope(args->device);
  if (const dflash_attention_status status = scope.status(); status != DFLASH_ATTENTION_OK) {
    return status;
  }
  FromConfig(dflash::kernels::HeuristicAttentionConfig(problem), config);
  return DFLASH_ATTENTION_OK;
}

dflash_attention_status dflash_attention_check_config(const dflash_attention_args* args,
                                                      const dflash_attention_config* config) {
  last_error.clear();
  if (config == nullptr) return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "config is null");
  AttentionProblem problem;
  AttentionKernelConfig unused;
  if (const dflash_attention_status status = ToProblem(args, &problem, &unused);
      status != DFLASH_ATTENTION_OK) {
    return status;
  }
  AttentionKernelConfig candidate;
  if (const dflash_attention_status status = ToConfig(config, &candidate);
      status != DFLASH_ATTENTION_OK) {
    return status;
  }
  DeviceScope scope(args->device);
  if (const dflash_attention_status status = scope.status(); status != DFLASH_ATTENTION_OK) {
    return status;
  }
  if (dflash::kernels::CheckAttentionConfig(problem, candidate) != cudaSuccess) {
    return Fail(DFLASH_ATTENTION_UNSUPPORTED, "the config does not apply to this problem");
  }
  return DFLASH_ATTENTION_OK;
}

dflash_attention_status dflash_attention_forward(const dflash_attention_args* args, void* workspace,
                                                 size_t workspace_bytes, void* stream) {
  last_error.clear();
  AttentionProblem problem;
  AttentionKernelConfig config;
  if (const dflash_attention_status status = ToProblem(args, &problem, &config);
      status != DFLASH_ATTENTION_OK) {
    return status;
  }
  if (args->q == nullptr || args->k == nullptr || args->v == nullptr || args->out == nullptr) {
    return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "q, k, v and out must not be null");
  }
  DeviceScope scope(args->device);
  if (const dflash_attention_status status = scope.status(); status != DFLASH_ATTENTION_OK) {
    return status;
  }
  const size_t needed = dflash::kernels::AttentionWorkspaceBytes(problem);
  if (workspace_bytes < needed) {
    return Fail(DFLASH_ATTENTION_WORKSPACE_TOO_SMALL,
                "workspace of " + std::to_string(workspace_bytes) + " bytes; the problem needs " +
                    std::to_string(needed));
  }
  if (needed > 0 && (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 256 != 0)) {
    return Fail(DFLASH_ATTENTION_INVALID_ARGUMENT, "workspace must be 256-byte aligned");
  }
  cublasHandle_t blas = nullptr;
  if (const dflash_attention_status status = BlasHandle(args->device, &blas);
      status != DFLASH_ATTENTION_OK) {
    return status;
  }
  const cudaError_t error = dflash::kernels::DisentangledAttentionForward(
      problem, workspace, blas, static_cast<cudaStream_t>(stream));
  if (error == cudaErrorInvalidValue) {
    return Fail(DFLASH_ATTENTION_UNSUPPORTED,
                "the kernel refused the problem (shape, alignment, scale, position table or "
                "config; kernels/attention/disentangled_attention.h)");
  }
  if (error != cudaSuccess) {
    return Fail(DFLASH_ATTENTION_CUDA_ERROR, std::string("disentangled attention: ") +
                                                 cudaGetErrorName(error) + ": " +
                                                 cudaGetErrorString(error));
  }
  return DFLASH_ATTENTION_OK;
}

}  // extern "C"
