/* Colibri C API: lets a host framework call the MoE layers of a Colibri
 * model (experts streamed from experts.bin through the L2/L1 caches and
 * computed on the CPU).
 *
 * Ownership: colibri_open returns an engine the caller frees with
 * colibri_close. Buffers passed to colibri_moe_forward stay the caller's.
 * Thread-safety: one engine must not be used by two threads at once; distinct
 * engines are independent.
 * Errors: every call returns a colibri_status; on failure
 * colibri_last_error(engine) (or colibri_open_error() after a failed open)
 * describes it. No call aborts on bad input. */
#ifndef COLIBRI_COLIBRI_H_
#define COLIBRI_COLIBRI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum colibri_status {
  COLIBRI_OK = 0,
  COLIBRI_INVALID_ARGUMENT = 1, /* bad options, layer index, null pointer */
  COLIBRI_NOT_FOUND = 2,        /* the model directory or a file is missing */
  COLIBRI_CORRUPTION = 3,       /* the model does not match its config.json */
  COLIBRI_IO_ERROR = 4,         /* the OS refused a read */
  COLIBRI_UNSUPPORTED = 5,      /* valid but unsupported here */
  COLIBRI_INTERNAL = 6
} colibri_status;

typedef struct colibri_options {
  const char* model_dir;  /* required */
  uint64_t l1_bytes;      /* L1 pool budget; 0 = off */
  uint64_t l2_bytes;      /* L2 host cache budget; 0 = off */
  uint32_t queue_depth;   /* NVMe reads in flight; 0 = 32 */
  uint32_t threads;       /* CPU compute threads; 0 = 1 */
  const char* policy;     /* L2 (and L1) cache policy, "lru" or "layer"; NULL = "lru" */
} colibri_options;

typedef struct colibri_engine colibri_engine;

/* Opens the model and carves the caches. On failure *engine is NULL. */
colibri_status colibri_open(const colibri_options* options, colibri_engine** engine);

/* One MoE layer (index 0 .. colibri_num_layers - 1) for n_tokens rows of
 * hidden states (n_tokens x hidden fp32, row-major): routes each token and
 * writes the weighted sum of its experts' outputs to out (same shape). */
colibri_status colibri_moe_forward(colibri_engine* engine, uint32_t layer, const float* hidden, size_t n_tokens,
                                   float* out);

uint32_t colibri_num_layers(const colibri_engine* engine);
uint32_t colibri_hidden_size(const colibri_engine* engine);

/* The message of the engine's last failed call ("" when none). Valid until the next call. */
const char* colibri_last_error(const colibri_engine* engine);
/* The message of the last failed colibri_open on this thread. */
const char* colibri_open_error(void);

void colibri_close(colibri_engine* engine);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_COLIBRI_H_ */
