/* The C interface of libdflash_sentencepiece_shim.so, the only code that links libsentencepiece.
 *
 * Why a separate library in its own link namespace: Debian's libsentencepiece.so embeds a private
 * copy of protobuf-lite 3.14 and exports all of its symbols, while the server links the system's
 * libprotobuf 3.21 for gRPC. Loaded into one namespace, the two copies bind to each other's
 * symbols and the process aborts at start ("compiled against version 3.14.0 ... installed version
 * 3.21.12"). sentencepiece_model.cc loads this shim with dlmopen(LM_ID_NEWLM), where
 * libsentencepiece sees only its own protobuf. Across the boundary only C types and caller-owned
 * buffers pass: each namespace has its own C and C++ runtimes, so memory allocated on one side is
 * never freed on the other. */
#ifndef DFLASH_SERVER_TOKENIZER_SENTENCEPIECE_SHIM_API_H_
#define DFLASH_SERVER_TOKENIZER_SENTENCEPIECE_SHIM_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DflashSpmToken {
  int32_t id;
  uint32_t byte_begin;
  uint32_t byte_end;
} DflashSpmToken;

/* Error kinds written to *error_kind. */
enum {
  DFLASH_SPM_OK = 0,
  DFLASH_SPM_NOT_FOUND = 1,
  DFLASH_SPM_INVALID_MODEL = 2,
  DFLASH_SPM_ENCODE_FAILED = 3,
  DFLASH_SPM_DECODE_FAILED = 4
};

/* Loads a model file; NULL on failure with *error_kind set and a message in `message`. */
void* dflash_spm_load(const char* path, int* error_kind, char* message, size_t message_capacity);
void dflash_spm_free(void* model);
int32_t dflash_spm_piece_count(const void* model);
int32_t dflash_spm_unk_id(const void* model);
/* -1 when the model has no such piece. */
int32_t dflash_spm_piece_to_id(const void* model, const char* piece, size_t size);
/* The piece of `id` as a pointer into the model (valid while it is loaded); size 0 outside the
 * vocabulary. */
const char* dflash_spm_id_to_piece(const void* model, int32_t id, size_t* size);
/* Encodes `text`; returns the number of tokens, or -1 on failure (message filled). When the count
 * exceeds `capacity` nothing is written beyond it and the caller retries with a larger buffer. */
int64_t dflash_spm_encode(const void* model, const char* text, size_t size, DflashSpmToken* tokens,
                          size_t capacity, char* message, size_t message_capacity);
/* Decodes `count` ids, each in [0, piece count), into UTF-8 text; returns its size in bytes, or
 * -1 on failure (message filled). When the size exceeds `capacity` nothing is written and the
 * caller retries with a larger buffer. */
int64_t dflash_spm_decode(const void* model, const int32_t* ids, size_t count, char* text,
                          size_t capacity, char* message, size_t message_capacity);

#ifdef __cplusplus
}
#endif

#endif /* DFLASH_SERVER_TOKENIZER_SENTENCEPIECE_SHIM_API_H_ */
