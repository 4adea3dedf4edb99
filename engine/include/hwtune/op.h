/* Op implementations: how the engine runs one graph op.
 *
 * Each op family (linear, conv, eltwise, pool, norm, movement, rnn) lives in one
 * file engine/ops/<family>.c and exports a table of hwt_op_impl through
 * hwt_ops_<family>(). The engine looks an op type up once, at prepare time
 * (hwt_ops_find), never on the hot path.
 *
 * Contract, per op instance:
 *   prepare(ctx)  once, after every input/param/output pointer in ctx is
 *                 final: validate attributes and shapes, build kernel plans,
 *                 pack constant weights (params are readable now), set
 *                 ctx->state and ctx->ws_floats. May allocate.
 *   run(ctx, ws, tid, nth)
 *                 thread tid's share of nth (1 <= nth <= ctx->max_threads):
 *                 disjoint output, no synchronisation, no allocation; ws is
 *                 this thread's workspace of ctx->ws_floats floats (64-byte
 *                 aligned). The same prepared ctx runs many times.
 *   release(ctx)  frees what prepare allocated.
 * prepare may read params through ctx->in; run reads every tensor through
 * ctx->in / ctx->out and never keeps an activation's pointer in its state.
 * So a copy of a prepared ctx whose activation pointers are moved to other
 * buffers of the same shapes runs on those buffers: the dynamic executor
 * (hwtune/dynamic.h) runs one prepared ctx per row count on many rows.
 * Semantics of every op type and attribute are model.json's
 * (src/hwtune/graph/ops/, docs/model-format.md); string attributes arrive as
 * int arrays of character codes (src/hwtune/engine/lower.py).
 */
#ifndef HWTUNE_OP_H
#define HWTUNE_OP_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/graph.h"
#include "hwtune/isa.h"

#define HWT_OP_MAX_IO 64 /* inputs or outputs of one op (concat/sum/split) */

/* Derived forms of constant tensors (packed weights) that ops of one engine
 * share: the ops that pack the same param the same way hold one copy. An
 * LSTM unrolled over 40 steps has 40 matmuls on one recurrent weight; with a
 * packed copy each, lstm_large (4 x 1024 hidden) held 2.6 GB of packed
 * weights per engine instead of 64 MB, and every step streamed its own copy
 * from memory instead of finding the previous step's in cache. */
typedef struct hwt_op_shared hwt_op_shared;

typedef struct hwt_op_ctx {
  const hwt_graph *g;
  int op;                       /* op id in g: attributes and shapes via graph.h */
  int n_in, n_out;
  const float *in[HWT_OP_MAX_IO]; /* stable for the engine's lifetime */
  float *out[HWT_OP_MAX_IO];
  hwt_isa isa;
  int max_threads;              /* largest nth run() will be called with */
  void *state;                  /* owned by the implementation */
  size_t ws_floats;             /* per-thread workspace run() needs */
  double flops;                 /* set by prepare when known (cost estimates) */
  hwt_op_shared *shared;        /* the engine's shared constants; NULL: none */
  uint64_t const_in;            /* bit i: in[i] holds its final values at prepare and never
                                   changes (a param, or the output of an op folded at
                                   prepare, engine/exec/fold.c), so prepare may derive
                                   packed forms of it */
} hwt_op_ctx;

/* A 64-byte aligned buffer of `floats` floats holding the form `form` (the
 * caller's hash of everything the derivation depends on) of the constant
 * at `data`. *fill is 1 when the caller got a fresh buffer and must fill it
 * before prepare returns (then nobody else reads it yet); 0 when another op
 * filled it. Without ctx->shared every call gets a private buffer. NULL
 * when out of memory. Prepare-time only (not thread-safe). */
HWT_API float *hwt_op_shared_acquire(hwt_op_ctx *ctx, const void *data, uint64_t form,
                                     size_t floats, int *fill);
/* Gives back a buffer from hwt_op_shared_acquire (freed with its last
 * holder). */
HWT_API void hwt_op_shared_release(hwt_op_ctx *ctx, float *buf);
/* An engine's table (hwt_op_shared_destroy frees it; it must be empty). */
HWT_API hwt_op_shared *hwt_op_shared_create(void);
HWT_API void hwt_op_shared_destroy(hwt_op_shared *s);
/* Buffers held now, and their bytes (tests). */
HWT_API size_t hwt_op_shared_count(const hwt_op_shared *s, size_t *bytes);
/* FNV-1a over n bytes, continuing from h (0: start): builds form keys. */
HWT_API uint64_t hwt_op_form_hash(uint64_t h, const void *p, size_t n);

typedef struct {
  const char *type; /* op type as in model.json, e.g. "matmul" */
  int (*prepare)(hwt_op_ctx *ctx, char *err, size_t errlen); /* HWT_OK or negative */
  void (*run)(const hwt_op_ctx *ctx, float *ws, int tid, int nth);
  void (*release)(hwt_op_ctx *ctx); /* may be NULL */
} hwt_op_impl;

/* One table per family; *n receives its length. */
HWT_API const hwt_op_impl *hwt_ops_linear(int *n);   /* matmul */
HWT_API const hwt_op_impl *hwt_ops_conv(int *n);     /* conv2d, layout_transform */
HWT_API const hwt_op_impl *hwt_ops_eltwise(int *n);  /* the model ops of hwtune/eltwise_ops.def
                                                        (broadcasting) */
HWT_API const hwt_op_impl *hwt_ops_pool(int *n);     /* pool2d, global_pool2d */
HWT_API const hwt_op_impl *hwt_ops_norm(int *n);     /* batch_norm, softmax */
HWT_API const hwt_op_impl *hwt_ops_movement(int *n); /* concat split slice reshape flatten
                                                        transpose pad gather */
HWT_API const hwt_op_impl *hwt_ops_rnn(int *n);      /* lstm_cell */
HWT_API const hwt_op_impl *hwt_ops_indexing(int *n); /* take gather_elements cumsum expand
                                                        where (run-time indices, masks) */
HWT_API const hwt_op_impl *hwt_ops_attention(int *n); /* attention (fused softmax(q.kt).v) */
HWT_API const hwt_op_impl *hwt_ops_resize(int *n);   /* resize (nearest, bilinear) */
HWT_API const hwt_op_impl *hwt_ops_argmax(int *n);   /* argmax */
HWT_API const hwt_op_impl *hwt_ops_quant(int *n);    /* qmatmul qconv2d dynamic_quantize
                                                        (issue #43) */
/* Training ops (src/hwtune/graph/ops/train.py): what reverse-mode
 * differentiation emits, the fused losses and the optimizer updates. */
HWT_API const hwt_op_impl *hwt_ops_grad_pointwise(int *n); /* *_grad, sgd/adam */
HWT_API const hwt_op_impl *hwt_ops_grad_reduce(int *n);    /* reduce_sum, softmax_grad, losses,
                                                              slice/pool2d_grad */
HWT_API const hwt_op_impl *hwt_ops_grad_conv(int *n);      /* conv2d_grad_weight/_data and
                                                              conv_transpose2d (col2im GEMMs) */
HWT_API const hwt_op_impl *hwt_ops_grad_norm(int *n);      /* batch_norm_train(_grad), _grad */
/* Not part of the library: a test program may define it to add its own op
 * types (looked up after every real family). */
HWT_API const hwt_op_impl *hwt_ops_test(int *n);

/* The implementation of an op type, or NULL if no family provides it. */
HWT_API const hwt_op_impl *hwt_ops_find(const char *type);

#endif
