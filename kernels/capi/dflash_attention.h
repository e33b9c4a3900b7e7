/* A plain C interface to the fused disentangled-attention forward
 * (kernels/attention/disentangled_attention.h), for callers that cannot or should not link C++:
 * the PyTorch package (python/) loads it with ctypes, so no PyTorch C++ ABI is involved.
 *
 * ABI rules: C types only; every argument struct starts with `struct_size` (the caller's
 * sizeof), so fields can be appended in later versions and a library refuses a struct smaller than
 * the version it was built for. DFLASH_ATTENTION_ABI_VERSION changes when an existing field or
 * function changes meaning; callers compare it with dflash_attention_abi_version() at load.
 *
 * Threading: every function may be called from any thread. Errors: each function returns a
 * dflash_attention_status; dflash_attention_last_error() gives the calling thread's message of its
 * last failure.
 *
 * Streams and memory: nothing here allocates device memory, synchronises or copies between host
 * and device during a forward. The caller passes the stream and a workspace of
 * dflash_attention_workspace_bytes() bytes (256-byte aligned); the forward only enqueues work, so
 * it may be captured into a CUDA graph (after one uncaptured call per device and thread, which
 * creates that thread's cuBLAS handle). */
#ifndef DFLASH_KERNELS_CAPI_DFLASH_ATTENTION_H_
#define DFLASH_KERNELS_CAPI_DFLASH_ATTENTION_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define DFLASH_ATTENTION_API __declspec(dllexport)
#else
#define DFLASH_ATTENTION_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define DFLASH_ATTENTION_ABI_VERSION 1

typedef enum dflash_attention_status {
  DFLASH_ATTENTION_OK = 0,
  /* A malformed argument: null pointer, bad enum, unknown positions id, short struct. */
  DFLASH_ATTENTION_INVALID_ARGUMENT = 1,
  /* Well formed, but the kernel has no variant for it (head dim, alignment, a config that does
   * not apply, a position table it refuses). */
  DFLASH_ATTENTION_UNSUPPORTED = 2,
  /* The workspace passed is smaller than dflash_attention_workspace_bytes(). */
  DFLASH_ATTENTION_WORKSPACE_TOO_SMALL = 3,
  /* A CUDA runtime or cuBLAS error; the message names it. */
  DFLASH_ATTENTION_CUDA_ERROR = 4,
} dflash_attention_status;

typedef enum dflash_attention_dtype {
  DFLASH_ATTENTION_FLOAT16 = 0,
  DFLASH_ATTENTION_BFLOAT16 = 1,
  DFLASH_ATTENTION_FLOAT32 = 2,
} dflash_attention_dtype;

/* A kernel variant (kernels/attention/attention_kernel_config.h), as tuning profiles name it. */
typedef struct dflash_attention_config {
  uint32_t struct_size;
  int32_t windows; /* 0: tables, 1: computed */
  int32_t mma;     /* 0: mma.sync, 1: wgmma (sm_90a builds on compute capability 9.0) */
  int32_t min_blocks_per_sm;
  int32_t key_groups; /* 0: chosen at launch; 1, 2 or 4 pin it */
  int32_t block_m;    /* 64 */
  int32_t block_n;    /* 64 */
  int32_t warps;      /* 4 */
} dflash_attention_config;

/* One forward. Q, K, V and out are row-major token rows of num_heads * head_dim columns (head h
 * at column h * head_dim) with the given row strides in elements; pos_key / pos_query are
 * [2 * span, num_heads * head_dim] in the same dtype, null to drop c2p / p2c.
 *
 * Layout: packed when key_padding_mask is null (cu_seqlens: device int32 [num_sequences + 1],
 * max_seqlen its longest sequence, total_tokens = cu_seqlens[num_sequences], all known to the
 * host); padded otherwise (row b * padded_length + i is token i of sequence b;
 * key_padding_mask[b * padded_length + j] == 0 removes key j; a row without keys is written as
 * zeros). */
typedef struct dflash_attention_args {
  uint32_t struct_size;
  int32_t device; /* CUDA device ordinal all pointers live on */
  int32_t dtype;  /* dflash_attention_dtype */
  int32_t allow_tf32;
  int32_t num_heads;
  int32_t head_dim; /* 32, 64 or 128 */
  const void* q;
  const void* k;
  const void* v;
  int64_t q_row_stride;
  int64_t k_row_stride;
  int64_t v_row_stride;
  void* out;
  int64_t out_row_stride;
  const void* pos_key;
  const void* pos_query;
  const int32_t* cu_seqlens;
  int32_t num_sequences;
  int32_t max_seqlen;
  int32_t total_tokens;
  int32_t padded_length;
  const uint8_t* key_padding_mask;
  float scale; /* 1 / sqrt(head_dim * (1 + number of position terms)) for DeBERTa */
  /* The relative-position slot table: the id from dflash_attention_register_positions (its host
   * copy plans the launch) and the same table on `device`. Ignored without position terms. */
  int32_t positions_id;
  const int32_t* slot_table;
  /* Optional: natural-log log-sum-exp of each row's scores, float32 [num_heads, rows] with rows
   * = total_tokens (packed) or num_sequences * padded_length (padded). */
  float* lse;
  /* Optional kernel variant (a tuning profile's entry); null runs the built-in heuristic. */
  const dflash_attention_config* config;
} dflash_attention_args;

/* DFLASH_ATTENTION_ABI_VERSION of the library. */
DFLASH_ATTENTION_API uint32_t dflash_attention_abi_version(void);

/* The calling thread's message for its last failed call ("" when none). Valid until that
 * thread's next call into the library. */
DFLASH_ATTENTION_API const char* dflash_attention_last_error(void);

/* cudaRuntimeGetVersion of the runtime the library was built with (1000 * major + 10 * minor):
 * the toolkit that tuning profiles are matched against. */
DFLASH_ATTENTION_API int32_t dflash_attention_cuda_version(void);

/* 1 when the library holds the sm_90a (warpgroup) kernels. */
DFLASH_ATTENTION_API int32_t dflash_attention_wgmma_compiled(void);

/* Registers a relative-position slot table: table[delta + band] = idx(delta) for delta in
 * [-band, band], slots 0 .. 2 * span - 1, constant beyond +-band. The library keeps a host copy
 * for the life of the process (equal tables share one id) and writes its id to *id. */
DFLASH_ATTENTION_API dflash_attention_status
dflash_attention_register_positions(const int32_t* table, int64_t band, int32_t span, int32_t* id);

/* Bytes of device workspace `args` needs with args->config (null: the heuristic's variant).
 * Reads pointers only for alignment (float32); touches no device memory. */
DFLASH_ATTENTION_API dflash_attention_status
dflash_attention_workspace_bytes(const dflash_attention_args* args, size_t* bytes);

/* The built-in heuristic's variant for `args` on args->device. */
DFLASH_ATTENTION_API dflash_attention_status dflash_attention_heuristic_config(
    const dflash_attention_args* args, dflash_attention_config* config);

/* DFLASH_ATTENTION_OK when `config` names a variant this library has that can run `args`. */
DFLASH_ATTENTION_API dflash_attention_status dflash_attention_check_config(
    const dflash_attention_args* args, const dflash_attention_config* config);

/* Enqueues the forward on `stream` (a cudaStream_t; null is the legacy default stream). */
DFLASH_ATTENTION_API dflash_attention_status dflash_attention_forward(
    const dflash_attention_args* args, void* workspace, size_t workspace_bytes, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* DFLASH_KERNELS_CAPI_DFLASH_ATTENTION_H_ */
