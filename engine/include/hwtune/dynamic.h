/* Dynamic graphs the Cavs way (Xu et al., "Cavs: A Vertex-centric
 * Programming Interface for Dynamic Neural Networks"): a static vertex
 * function F, declared once, evaluated over a per-sample input graph (a
 * chain, a tree, a DAG) at every vertex once its children are done.
 *
 * Two objects:
 *
 *  hwt_samples  the input graphs of a data set, one sample per line of a
 *               JSON Lines file (docs/model-format.md, "Input graphs"),
 *               parsed and validated here with the line of every problem,
 *               and held as flat arrays (children in CSR form).
 *
 *  hwt_dyn      an executor for one F: F is an ordinary hwt_graph whose
 *               non-param tensors have one row per vertex ([1, width] in
 *               the graph: the row count is the batch's), plus a role per
 *               tensor saying where F's inputs come from (the vertex's own
 *               input, a child's state, a sum over children, ...). Per
 *               batch of samples the executor groups vertices by a policy,
 *               gathers the children's states of every vertex of a group
 *               into contiguous rows, runs F's ops on those rows through
 *               the engine's op table (hwtune/op.h) on a thread pool team,
 *               and writes the new states in place. Nothing is allocated
 *               per vertex or per batch: hwt_dyn_prepare sizes one arena
 *               per executor from the largest batch of the sample set.
 *
 * Policies (hwt_dyn_policy):
 *   batched   Cavs: every vertex whose children are all evaluated, across
 *             all samples of the batch, runs in one batched F (a frontier
 *             kept with per-vertex pending-children counts);
 *   by-depth  TensorFlow Fold: vertices grouped by depth (longest path from
 *             a leaf), computed by a depth pass and a bucket sort. For
 *             forward evaluation the groups equal the batched policy's
 *             (a vertex becomes ready exactly at step depth(v)); the two
 *             differ in how the groups are found;
 *   serial    one vertex at a time, sample after sample (F at one row).
 *
 * Rows and buckets: an op runs on a row count that changes from group to
 * group, but an op's context is prepared for fixed shapes. So each op is
 * prepared once per power-of-two row count ("bucket") up to the chunk,
 * sharing param pointers, and an op over r rows runs as a few bucket-sized
 * pieces (a power-of-two split, the last piece rounded up when that wastes
 * little), each a copy of the prepared context with its row pointers moved
 * (the op contract allows it: hwtune/op.h). Groups longer than the chunk
 * run chunk by chunk.
 *
 * Ops whose inputs are only the vertex's own input (and params) do not
 * depend on the children: with hoisting (default for the batched and
 * by-depth policies) they run once per batch over every vertex before the
 * first group, as one large op (Var-LSTM's x W for every token at once).
 *
 * Errors: negative status (hwtune/api.h) and a one-line reason in err or in
 * hwt_dyn_error(). */
#ifndef HWTUNE_DYNAMIC_H
#define HWTUNE_DYNAMIC_H
#include <stddef.h>
#include <stdint.h>
#include "hwtune/api.h"
#include "hwtune/graph.h"

/* ---- input graphs ------------------------------------------------------- */

typedef struct hwt_samples hwt_samples;

/* What a sample's vertices carry as the vertex function's input. */
typedef enum {
  HWT_DYN_INPUT_NONE = 0,     /* nothing (tokens or features are ignored) */
  HWT_DYN_INPUT_TOKENS = 1,   /* "tokens": an id per vertex (null: none) */
  HWT_DYN_INPUT_FEATURES = 2  /* "features": a row of floats per vertex (null: none) */
} hwt_dyn_input;

typedef struct {
  int input;                 /* hwt_dyn_input */
  int64_t vocab;             /* TOKENS: every id must be < vocab (> 0) */
  int feature_width;         /* FEATURES: every row's length (> 0) */
  int arity;                 /* most children of one vertex; 0: any number */
  int64_t max_vertices;      /* per sample; refused beyond ("max_vertices") */
  int64_t max_edges;         /* child links per sample ("max_edges") */
  int64_t max_samples;       /* samples per file ("max_samples") */
  int64_t max_total_bytes;   /* memory of the parsed set ("max_total_bytes") */
} hwt_samples_options;

/* Defaults: no input, any arity, 1,000,000 vertices and 4,000,000 edges per
 * sample, 10,000,000 samples, 4 GiB. */
HWT_API void hwt_samples_options_init(hwt_samples_options *o);

/* Parse a JSON Lines file (path) or text (len bytes); blank lines are
 * skipped. On error returns HWT_EINVAL (HWT_ENOMEM, HWT_ESYS for an
 * unreadable file) with *out NULL and a one-line reason in err that starts
 * with the line: "line 12: vertex 5 lists child 9, but the sample has 8
 * vertices". A limit's message names its field in parentheses. */
HWT_API int hwt_samples_read(const char *path, const hwt_samples_options *o,
                             hwt_samples **out, char *err, size_t errlen);
HWT_API int hwt_samples_parse(const char *text, size_t len, const hwt_samples_options *o,
                              hwt_samples **out, char *err, size_t errlen);
HWT_API void hwt_samples_destroy(hwt_samples *s);

HWT_API int64_t hwt_samples_count(const hwt_samples *s);
HWT_API int64_t hwt_samples_n_vertices(const hwt_samples *s); /* all samples */
HWT_API int64_t hwt_samples_n_edges(const hwt_samples *s);
HWT_API int hwt_samples_input(const hwt_samples *s);          /* hwt_dyn_input parsed */
HWT_API int hwt_samples_feature_width(const hwt_samples *s);
/* Arrays owned by s. Vertices are numbered across the set: sample i holds
 * vertices vertex_offsets[i] .. vertex_offsets[i+1]-1; children are local
 * indices (0 = the sample's first vertex), in the order the line gives them
 * (for N-ary vertex functions, child k is the k-th). */
HWT_API const int64_t *hwt_samples_vertex_offsets(const hwt_samples *s); /* [count+1] */
HWT_API const int64_t *hwt_samples_child_offsets(const hwt_samples *s);  /* [n_vertices+1] */
HWT_API const int32_t *hwt_samples_children(const hwt_samples *s);       /* [n_edges] */
HWT_API const int32_t *hwt_samples_tokens(const hwt_samples *s);   /* [n_vertices], -1 none */
HWT_API const float *hwt_samples_features(const hwt_samples *s);   /* [n_vertices x width] */
HWT_API const int64_t *hwt_samples_lines(const hwt_samples *s);    /* [count] 1-based line */

/* ---- the vertex function -------------------------------------------------- */

typedef enum {
  HWT_DYN_BATCHED = 0,
  HWT_DYN_BY_DEPTH = 1,
  HWT_DYN_SERIAL = 2
} hwt_dyn_policy;

/* Where each tensor of F comes from. a, b: the kind's arguments. */
typedef enum {
  HWT_DYN_OP = 0,         /* written by an op of F or of a readout */
  HWT_DYN_PARAM = 1,      /* a param (bound with hwt_dyn_bind) */
  HWT_DYN_VERTEX_IN = 2,  /* the vertex's own input row (zeros when it has none) */
  HWT_DYN_CHILD = 3,      /* state a of child b (zeros past the vertex's last child) */
  HWT_DYN_CHILD_SUM = 4,  /* state a summed over the children (zeros for a leaf) */
  HWT_DYN_CHILD_EACH = 5, /* one row per child link: the child's state a */
  HWT_DYN_TO_EDGES = 6,   /* per child link: the parent's row of tensor a */
  HWT_DYN_SUM_EDGES = 7,  /* per vertex: tensor a (one row per child link) summed */
  HWT_DYN_STATE = 8       /* readout a's selected vertex: its final state b */
} hwt_dyn_role_kind;

/* Which vertices a readout reads. */
typedef enum {
  HWT_DYN_AT_ROOT = 0,    /* every vertex no other vertex lists as a child */
  HWT_DYN_AT_EVERY = 1,   /* every vertex */
  HWT_DYN_AT_LAST = 2     /* the sample's last vertex (a chain's end) */
} hwt_dyn_at;

typedef struct {
  int kind; /* hwt_dyn_role_kind */
  int a, b;
} hwt_dyn_role;

typedef struct {
  const hwt_graph *g;         /* F's ops and every readout's; row tensors [1, width] */
  const hwt_dyn_role *roles;  /* [n_tensors of g] */
  int n_states;
  const int *state_update;    /* [n_states] the tensor (an op output) holding each new state */
  int embedding;              /* a param [vocab, width]: VERTEX_IN rows are its rows by
                                 token id; -1: VERTEX_IN rows are the samples' features */
  int n_readouts;
  const int *readout_at;      /* [n_readouts] hwt_dyn_at */
  const int *readout_offsets; /* [n_readouts + 1] into readout_outputs */
  const int *readout_outputs; /* tensors each readout returns */
  const double *op_flops;     /* optional [n_ops] work of one row (default thread counts) */
  const double *op_bytes;     /* optional [n_ops] */
} hwt_dyn_fn;

#define HWT_DYN_MAX_CHUNK 4096

typedef struct {
  int policy;               /* hwt_dyn_policy */
  int batch;                /* samples per batch, >= 1 */
  int chunk;                /* most rows one op call takes: a power of two 1..4096 */
  int executors;            /* teams, each evaluating whole batches, 1..64 */
  int threads_per_executor; /* threads an op call may fork onto, >= 1 */
  int pin;                  /* pin the teams to disjoint CPUs */
  int isa;                  /* hwt_isa, or -1: hwt_isa_select() */
  int hoist;                /* run input-only ops once per batch: 1, 0, or -1 (default:
                               all policies but serial) */
  const int *op_threads;    /* optional [n_ops x n_buckets]: threads of op k at bucket
                               j (2^j rows) at k * n_buckets + j; 0: the default */
} hwt_dyn_config;

typedef struct hwt_dyn hwt_dyn;

/* policy batched, batch 64, chunk 256, 1 executor x every allowed CPU,
 * pinned, best ISA, hoisting by policy. */
HWT_API void hwt_dyn_config_init(hwt_dyn_config *c);
/* log2(chunk) + 1: buckets 1, 2, 4, ..., chunk rows. */
HWT_API int hwt_dyn_n_buckets(int chunk);

/* Checks F (roles, spaces, that every op keeps rows independent of each
 * other) and the config, builds the pool. fn and its graph must outlive the
 * executor. */
HWT_API int hwt_dyn_create(const hwt_dyn_fn *fn, const hwt_dyn_config *cfg, hwt_dyn **out,
                           char *err, size_t errlen);
HWT_API void hwt_dyn_destroy(hwt_dyn *d);
HWT_API const char *hwt_dyn_error(const hwt_dyn *d);
/* A param's values (kept by pointer: must stay alive and unchanged). */
HWT_API int hwt_dyn_bind(hwt_dyn *d, int tensor, const float *data);
/* Fits the executor to a sample set (which must outlive it, or the next
 * prepare): checks its input against F's, walks every batch once without
 * computing to size the arenas and find the buckets each op needs, then
 * prepares those op contexts. */
HWT_API int hwt_dyn_prepare(hwt_dyn *d, const hwt_samples *s);
/* Evaluates every batch of the prepared set: schedules, gathers, F,
 * readouts. Allocates nothing. */
HWT_API int hwt_dyn_run(hwt_dyn *d);

/* Readout r's k-th output after a run: [hwt_dyn_readout_rows(d, r), width]
 * rows in sample order (within a sample: vertex order). */
HWT_API int64_t hwt_dyn_readout_rows(const hwt_dyn *d, int r);
HWT_API const float *hwt_dyn_readout(const hwt_dyn *d, int r, int k);
/* With keep on (before prepare), runs also copy every vertex's final
 * states out: hwt_dyn_states(d, s) is [n_vertices, width of state s] in
 * sample-set vertex order. */
HWT_API int hwt_dyn_keep_states(hwt_dyn *d, int keep);
HWT_API const float *hwt_dyn_states(const hwt_dyn *d, int s);

/* Instrumentation. Op calls per (op, bucket) over the prepared set are
 * known after prepare (the shapes F actually runs at); with profiling on,
 * runs also sum each (op, bucket)'s seconds. Groups: how many batched F
 * evaluations one run makes and over how many vertex rows. */
HWT_API int hwt_dyn_profile(hwt_dyn *d, int on);
HWT_API int hwt_dyn_op_calls(const hwt_dyn *d, int op, int bucket, int64_t *calls,
                             double *seconds);
HWT_API int hwt_dyn_groups(const hwt_dyn *d, int64_t *groups, int64_t *rows);
/* With record on (before a run), the run stores, for every vertex, how many
 * times F evaluated it and the index of the group that did (groups are
 * numbered per batch in evaluation order): the tests' check that each
 * vertex runs once, after its children. */
HWT_API int hwt_dyn_record(hwt_dyn *d, int on);
HWT_API const int32_t *hwt_dyn_eval_count(const hwt_dyn *d); /* [n_vertices] */
HWT_API const int32_t *hwt_dyn_eval_group(const hwt_dyn *d); /* [n_vertices] */

#endif
