/* The dynamic executor's private state, shared by its files:
 *   fn.c        create/destroy: F's analysis (spaces, node order), the pool
 *   prepare.c   fitting to a sample set: sizes, bucket contexts, arenas
 *   schedule.c  one batch's evaluation order under each policy
 *   exec.c      running batches: gathers, pieces, readouts */
#ifndef HWTUNE_DYN_INTERNAL_H
#define HWTUNE_DYN_INTERNAL_H
#include <stdatomic.h>
#include "hwtune/dynamic.h"
#include "hwtune/op.h"
#include "hwtune/pool.h"

/* Where a tensor's rows live, by what they are indexed with. */
enum {
  SP_PARAM = 0,   /* no rows: a param */
  SP_INPUT = 1,   /* one row per vertex of the batch, by slot (evaluation order) */
  SP_VERTEX = 2,  /* one row per vertex of the chunk being evaluated */
  SP_EDGE = 3,    /* one row per child link of the chunk's vertices */
  SP_READOUT = 4  /* one row per selected vertex of the readout chunk */
};

/* A step of F per chunk: an op, or a move filling a TO_EDGES / SUM_EDGES tensor. */
typedef struct {
  int is_op;
  int id; /* op id, or the moved tensor's id */
} dyn_node;

/* One executor team's memory: everything a batch touches. */
typedef struct {
  float **base;       /* [n_tensors] storage of each row tensor (NULL: param) */
  float **cur;        /* [n_tensors] this chunk's row 0 of each tensor */
  float **state;      /* [n_states] state tables, by slot */
  float *ws;          /* team_size x ws_stride floats */
  void *arena;        /* one block for all of the above floats */
  /* schedule scratch, [V_cap] unless said otherwise */
  int64_t *order;     /* slot -> batch vertex */
  int64_t *slot;      /* batch vertex -> slot */
  int64_t *step_off;  /* [V_cap + 1] slots where each group starts */
  int64_t *pending;   /* unfinished children; by-depth: depth */
  int64_t *poff;      /* [V_cap + 1] parents CSR */
  int32_t *parents;   /* [E_cap_batch] */
  int32_t *child;     /* [E_cap_batch] children as batch vertices */
  int64_t *cursor;    /* DFS: next child to visit */
  int64_t *seg;       /* [chunk + 1] a chunk's child links per vertex row */
  int64_t *edge_child;/* [edge rows] a chunk's child links: the child's slot */
  double *seconds;    /* [n_ops x n_buckets] profiled op time */
  int64_t groups, rows;
} dyn_team;

struct hwt_dyn {
  hwt_dyn_fn fn;
  hwt_op_shared *shared; /* packed params shared by every row count's contexts */
  hwt_dyn_config cfg;
  const hwt_graph *g;
  int n_tensors, n_ops, n_buckets, hoist;
  int *space;          /* [n_tensors] SP_* */
  int *width;          /* [n_tensors] floats per row (0 for params) */
  int *update_of;      /* [n_tensors] state index a tensor updates, or -1 */
  int *op_space;       /* [n_ops] */
  int *op_readout;     /* [n_ops] the readout an op belongs to, or -1 */
  int *state_width;    /* [n_states] */
  int x_tensor;        /* the VERTEX_IN tensor, or -1 */
  const float **param; /* [n_tensors] bound params */
  dyn_node *nodes;     /* every op and move in dependency order */
  int n_nodes;
  /* buckets: op k's context for 2^j rows is ctx[k * n_buckets + j] */
  hwt_graph **gb;      /* [n_buckets] F cloned at 2^j rows (NULL until needed) */
  const hwt_op_impl **impl; /* [n_ops] */
  hwt_op_ctx *ctx;
  unsigned char *prepared; /* [n_ops x n_buckets] */
  unsigned char *used;     /* [n_ops x n_buckets] the prepared set needs it */
  int *nth;            /* [n_ops x n_buckets] threads of each call */
  int64_t *calls;      /* [n_ops x n_buckets] calls per run (from the walk) */
  size_t ws_stride;    /* floats per thread */
  /* the prepared sample set */
  const hwt_samples *s;
  int64_t n_batches;
  int64_t v_cap, e_cap, edge_rows_cap; /* largest batch (vertices, links), chunk links */
  int64_t groups, group_rows;          /* per run */
  int64_t **sel;       /* [n_readouts] selected vertices (set numbering), by sample */
  int64_t **sel_off;   /* [n_readouts][count + 1] */
  float **out;         /* [readout outputs] rows x width, set order */
  float **states_out;  /* [n_states] with keep_states */
  int32_t *eval_count, *eval_group;
  /* execution */
  hwt_pool *pool;
  int team_size;
  dyn_team *teams;     /* [executors] */
  _Atomic int64_t next_batch;
  int failed;
  int profile, record, keep;
  char err[256];
};

/* fn.c */
void hwt_dyn_set_err(hwt_dyn *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int hwt_dyn_is_row(const hwt_dyn *d, int t);

/* prepare.c */
void hwt_dyn_release_prepared(hwt_dyn *d);

/* schedule.c: fills tm->order, tm->slot, tm->step_off for batch b; returns
 * the group count. Batch vertices are numbered from the batch's first. */
int64_t hwt_dyn_schedule(hwt_dyn *d, dyn_team *tm, int64_t batch);
/* The batch's first and last + 1 sample, and first set vertex. */
void hwt_dyn_batch_range(const hwt_dyn *d, int64_t batch, int64_t *s0, int64_t *s1,
                         int64_t *v0, int64_t *v1);

/* exec.c: evaluates (dry: only counts calls and sizes) one batch. */
int hwt_dyn_exec_batch(hwt_dyn *d, int team, int64_t batch, int dry);
/* The bucket and real rows of the next piece of `rem` rows. */
int hwt_dyn_piece(const hwt_dyn *d, int64_t rem, int64_t *rows_in_piece);

#endif
