/* The two rows hwtune-run runs from: a graph (its lowered form) and the
 * engine config chosen for it, read from results.db (hwtune_run.c) or from
 * an exported records file (records_file.c). Strings are malloc'ed; NULL
 * stands for an SQL NULL or a column the source lacks. */
#ifndef HWTUNE_RUNNER_ROWS_H
#define HWTUNE_RUNNER_ROWS_H

typedef struct {
  char *hash, *name, *lowered;
} graph_row;

typedef struct {
  int found, executors, threads, pin;
  char *scheduler, *source, *host, *op_threads, *op_priority, *op_params;
  char *op_cost, *op_candidates, *lowered; /* schema v4; NULL before */
} config_row;

#endif
