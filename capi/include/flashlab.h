/* flashlab's C ABI (libflashlab.so): attention, the simulator and the tiled walk for any caller that
 * can pass a struct and pointers (Python's ctypes in python/flashlab/, C, Julia, ...).
 *
 * Versioning: every struct opens with `struct_size` (sizeof the struct as the caller compiled it) and
 * `abi_version` (FLASHLAB_ABI_VERSION of the caller's header). The library refuses a struct whose size
 * or version it does not know, with a message saying which header to build against; fields are only
 * ever appended, and a new field makes a new version. Versions:
 *   1  the first: flashlab_problem up to cu_seqlens_k, flashlab_tensors up to pad0
 *   2  masks: flashlab_problem's mask fields (mask_kind ... pad2), flashlab_tensors' `mask` (a prepared
 *      device mask, flashlab_mask_prepare_v2); flashlab_decode is unchanged
 *   3  fa3's options: flashlab_tensors' descale_q, descale_k, descale_v (the FP8 forward, impl "fa3-fp8")
 *      and pack_gqa; flashlab_problem and flashlab_decode are unchanged
 * A version-1 or -2 struct (its own size and abi_version) is still accepted, as if its missing fields
 * were 0: no mask, the device mask built per call, descales of 1, PackGQA by fa3's rule.
 *
 * Errors: every entry point returns 0 on success, and otherwise a non-zero code with a one-line reason
 * written into `error` (at most error_len bytes, always NUL-terminated). Nothing throws across the ABI.
 *
 * Layouts are flash_attn_func's (core/include/flashlab/problem.hpp has the table):
 *   q, o     (batch, seqlen_q, heads_q,  head_dim[_v])   varlen: (total_q, heads_q,  head_dim[_v])
 *   k, v     (batch, seqlen_k, heads_kv, head_dim[_v])   varlen: (total_k, heads_kv, head_dim[_v])
 *   lse      (batch, heads_q, seqlen_q) fp32             varlen: (heads_q, total_q)
 * contiguous, row-major. On the CPU (host memory) every tensor is fp32 holding values of `dtype`
 * (inputs are rounded to it); on the GPU (device memory) tensors are stored in `dtype` itself.
 */
#ifndef FLASHLAB_H
#define FLASHLAB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLASHLAB_ABI_VERSION 3

#if defined(__GNUC__)
#define FLASHLAB_API __attribute__((visibility("default")))
#else
#define FLASHLAB_API
#endif

enum flashlab_dtype { FLASHLAB_FP32 = 0, FLASHLAB_FP16 = 1, FLASHLAB_BF16 = 2 };

/* A mask function beyond causal / window (core/include/flashlab/mask.hpp has the definitions), with
 * diag(i) = i + seqlen_k - seqlen_q:
 *   PREFIX_LM  j < prefix_b or j <= diag(i)               mask_prefix: one length, or one per batch entry
 *   DOCUMENT   doc(i) == doc(j) [and j <= i if causal]     doc_lengths: the packed documents, sum = seqlen
 *   CHUNKED    chunk(diag(i)) == chunk(j), j <= diag(i)    chunk: keys per chunk
 *   DENSE      dense_mask[b, h, i, j] != 0                 host bytes, (sq, sk) or (batch|1, heads|1, sq, sk) */
enum flashlab_mask_kind {
  FLASHLAB_MASK_NONE = 0,
  FLASHLAB_MASK_PREFIX_LM = 1,
  FLASHLAB_MASK_DOCUMENT = 2,
  FLASHLAB_MASK_CHUNKED = 3,
  FLASHLAB_MASK_DENSE = 4
};

/* One attention call, described completely (flashlab::Problem's fields, C types). */
typedef struct flashlab_problem {
  uint32_t struct_size;         /* sizeof(flashlab_problem) */
  uint32_t abi_version;         /* FLASHLAB_ABI_VERSION */
  int64_t batch;
  int64_t heads_q, heads_kv;    /* heads_q % heads_kv == 0 (GQA; MQA when heads_kv == 1) */
  int64_t seqlen_q, seqlen_k;   /* varlen: the largest length in the batch (max_seqlen_q/k) */
  int64_t head_dim, head_dim_v; /* head_dim_v 0: head_dim */
  int32_t dtype;                /* enum flashlab_dtype */
  int32_t causal;               /* bottom-right aligned when seqlen_q != seqlen_k */
  int64_t window_left, window_right; /* -1: unbounded side */
  double scale;                 /* 0: 1/sqrt(head_dim) */
  double softcap;               /* 0: off */
  int32_t alibi;                /* 1: ALiBi; slopes below, or the paper's 2^(-8(h+1)/heads) when NULL */
  int32_t pad0;
  const double* alibi_slopes;   /* (heads_q,) or NULL */
  double dropout_p;
  uint64_t seed;                /* dropout's seed; the walk's random inputs when it is given no tensors */
  const int32_t* cu_seqlens_q;  /* host memory, (batch + 1,) cumulative offsets; NULL: fixed length */
  const int32_t* cu_seqlens_k;
  /* ABI 2: the mask (enum flashlab_mask_kind above). Host memory, read during the call only (copied).
   * The fields of kinds other than mask_kind must be 0 / NULL. */
  int32_t mask_kind;            /* enum flashlab_mask_kind; 0: none */
  int32_t pad1;
  const int64_t* mask_prefix;   /* PREFIX_LM: (mask_prefix_count,), 1 or batch entries */
  int64_t mask_prefix_count;
  const int64_t* doc_lengths;   /* DOCUMENT: (doc_lengths_count,), positive, summing to seqlen_q == seqlen_k */
  int64_t doc_lengths_count;
  int64_t chunk;                /* CHUNKED: keys per chunk, > 0 */
  const uint8_t* dense_mask;    /* DENSE: one byte per element, nonzero = may attend, C order of dense_shape */
  int64_t dense_shape[4];       /* the first dense_ndim used: (sq, sk) or (batch|1, heads|1, sq, sk) */
  int32_t dense_ndim;           /* 2 or 4 (0 without a dense mask) */
  int32_t pad2;
} flashlab_problem;

/* A mask uploaded to the device once (flashlab_mask_prepare_v2) for many calls: FlexAttention's
 * create_block_mask. Opaque; freed with flashlab_mask_free. */
typedef struct flashlab_device_mask flashlab_device_mask;

/* The tensors of one call. Forward reads q, k, v and writes o, lse; backward reads q, k, v, o, lse, d_o
 * and writes dq, dk, dv (dq, dk, dv shaped like q, k, v). Host memory for the CPU implementations,
 * device memory for the GPU kernels (which also take the device copies of cu_seqlens and a stream). */
typedef struct flashlab_tensors {
  uint32_t struct_size;         /* sizeof(flashlab_tensors) */
  uint32_t abi_version;         /* FLASHLAB_ABI_VERSION */
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  const void* d_o;
  void* dq;
  void* dk;
  void* dv;
  const int32_t* cu_seqlens_q_device; /* GPU varlen: (batch + 1,) int32 on the device */
  const int32_t* cu_seqlens_k_device;
  void* stream;                 /* GPU: a cudaStream_t (NULL: the default stream) */
  int32_t deterministic;        /* GPU fa2 backward: dQ without atomics */
  int32_t pad0;
  /* ABI 2 */
  const flashlab_device_mask* mask; /* GPU: the problem's mask, prepared; NULL: uploaded for this call.
                                       Refused when made for another shape or mask. The CPU ignores it. */
  /* ABI 3 */
  float descale_q, descale_k, descale_v; /* "fa3-fp8": q, k, v hold float8 e4m3, x = e4m3 x descale (one a
                                            tensor; 0: 1); o is bf16 (the problem's dtype must be bf16) */
  int32_t pack_gqa;             /* fa3's forward: 0 by its rule (FA3's), 1 a kv head's query heads packed
                                   into one tile (refused where they cannot be), -1 never packed */
} flashlab_tensors;

/* One KV-cache decoding call on the GPU (flash_attn_with_kvcache; core/include/flashlab/decode_problem.hpp
 * has the rules): rotary and append of k_new, v_new into the cache in place, then attention of q_len
 * queries per entry over its cache_seqlens[b] + new_len keys, split over the keys and combined. Device
 * memory, stored in `dtype` (bf16 or fp16):
 *   q, o (batch, q_len, heads_q, head_dim); lse (batch, heads_q, q_len) fp32
 *   k_cache, v_cache (batch, cache_len, heads_kv, head_dim), or paged (num_pages, page_size, heads_kv,
 *     head_dim) through block_table (batch, max_pages) int32
 *   cache_seqlens (batch,) int32; k_new, v_new (batch, new_len, heads_kv, head_dim) or NULL;
 *   rotary_cos, rotary_sin (rows, rotary_dim / 2) or NULL */
typedef struct flashlab_decode {
  uint32_t struct_size;         /* sizeof(flashlab_decode) */
  uint32_t abi_version;         /* FLASHLAB_ABI_VERSION */
  int64_t batch, heads_q, heads_kv, head_dim, q_len;
  int64_t cache_len;            /* contiguous: rows per entry (0 when paged) */
  int64_t page_size, max_pages; /* paged: rows per page, block table columns (0 when contiguous) */
  int64_t new_len;              /* rows of k_new, v_new per entry (0: no append) */
  int64_t max_seqlen_k;         /* the longest cache_seqlens[b] + new_len (host-known: picks the splits) */
  int32_t rotary;               /* 0 none, 1 interleaved (GPT-J), 2 half (GPT-NeoX) */
  int32_t rotary_dim;           /* 0: head_dim */
  int32_t num_splits;           /* 0: the heuristic (gpu/shapes.hpp decode_split_count) */
  int32_t dtype;                /* FLASHLAB_FP16 or FLASHLAB_BF16 */
  int32_t causal;
  int32_t pad0;
  double scale;                 /* 0: 1/sqrt(head_dim) */
  double softcap;               /* 0: off */
  const void* q;
  void* o;
  float* lse;
  void* k_cache;
  void* v_cache;
  const int32_t* block_table;   /* NULL: contiguous */
  const int32_t* cache_seqlens;
  const void* k_new;
  const void* v_new;
  const void* rotary_cos;
  const void* rotary_sin;
  void* stream;                 /* a cudaStream_t (NULL: the default stream) */
} flashlab_decode;

FLASHLAB_API int flashlab_abi_version(void);
/* 1 when the library was built with CUDA (the GPU kernels can be called), else 0. */
FLASHLAB_API int flashlab_has_cuda(void);

/* Frees text the library returned (estimate, walk, check, implementations). */
FLASHLAB_API void flashlab_free(char* text);

/* The implementations: JSON [{"name", "description", "memory": "host"|"device", "has_backward"}, ...]. */
FLASHLAB_API int flashlab_implementations(char** json_out, char* error, size_t error_len);

/* Attention. `impl` is a name from flashlab_implementations: a harness implementation (reference,
 * tiled-fa1, tiled-fa2, gpu-fa2, ...) on host memory, or a GPU kernel (fa2, fa3, standard; fa3-fp8,
 * forward only) on device memory. */
FLASHLAB_API int flashlab_forward_v1(const char* impl, const flashlab_problem* problem, const flashlab_tensors* tensors,
                        char* error, size_t error_len);
FLASHLAB_API int flashlab_backward_v1(const char* impl, const flashlab_problem* problem, const flashlab_tensors* tensors,
                         char* error, size_t error_len);

/* The problem's mask on the device, for calls of `kernel` (fa2: prefix-lm, document, chunked) with
 * problems of the same batch, seqlen_q, seqlen_k, causal / window and mask (a call with another is
 * refused): the per-call host work (each row's key interval) and upload done once. Made on `stream` (a
 * cudaStream_t, NULL: the default stream), which frees it; free it once the calls using it are done.
 * Without CUDA it fails with the reason. A problem without a mask gives a handle that sets none. */
FLASHLAB_API int flashlab_mask_prepare_v2(const char* kernel, const flashlab_problem* problem, void* stream,
                                          flashlab_device_mask** out, char* error, size_t error_len);
/* Frees a prepared mask (NULL: nothing). */
FLASHLAB_API void flashlab_mask_free(flashlab_device_mask* mask);

/* The simulator's records for one problem, exactly `flashlab estimate --format json` (a JSON array).
 * gpu: a preset name; algo: standard | math | fa1 | fa2 | fa3 | all; pass: fwd | bwd | fwd+bwd;
 * impl: upstream | flashlab | cudnn. *json_out is freed with flashlab_free. */
FLASHLAB_API int flashlab_estimate(const flashlab_problem* problem, const char* gpu, const char* algo, const char* pass,
                      const char* impl, char** json_out, char* error, size_t error_len);

/* The tiled executor's events for one walk, exactly `flashlab trace --format jsonl` (one JSON object a
 * line). order: fa1 | fa2 | bwd | fa1-bwd; br, bc: the tile. With tensors NULL the inputs are the
 * random ones `flashlab trace` uses (seeded by problem->seed); otherwise host fp32 q, k, v (and d_o for
 * a backward order). *jsonl_out is freed with flashlab_free. */
FLASHLAB_API int flashlab_walk(const flashlab_problem* problem, const char* order, int64_t br, int64_t bc,
                  const flashlab_tensors* tensors, char** jsonl_out, char* error, size_t error_len);

/* The harness's check of one implementation on random inputs (seeded by problem->seed) against the
 * fp64 oracle, by the official tolerance rule: JSON {"impl", "skipped", "pass", "fields": [{"field",
 * "error", "tolerance", "pass"}], "fwd_seconds", "bwd_seconds"}. pass: fwd | bwd | fwd+bwd. */
FLASHLAB_API int flashlab_check(const char* impl, const flashlab_problem* problem, const char* pass, char** json_out,
                   char* error, size_t error_len);

/* KV-cache decoding on the GPU (flashlab_decode above); the split count it ran is written to
 * *num_splits_out when that is not NULL. Scratch is allocated and freed on the stream. */
FLASHLAB_API int flashlab_decode_v1(const flashlab_decode* call, int32_t* num_splits_out, char* error,
                                    size_t error_len);

#ifdef __cplusplus
}
#endif

#endif /* FLASHLAB_H */
