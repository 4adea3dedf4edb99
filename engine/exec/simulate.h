/* simulate.c's step log, for tests/c/test_engine_simulate.c: every part's
 * start and end in the order the driver processed them, so a test can
 * replay the same sequence of events on the threaded schedulers. */
#ifndef HWTUNE_EXEC_SIMULATE_H
#define HWTUNE_EXEC_SIMULATE_H
#include "hwtune/simulate.h"

typedef struct {
  int end;          /* 1: the part ended (the driver released it), 0: it started */
  int op, w, tid, nth;
  double t;         /* virtual seconds: its start or end */
} hwt_sim_step;

/* hwt_sim_run, also writing up to max_steps steps and their count. */
HWT_API int hwt_sim_run_steps(hwt_sim *s, const hwt_engine_config *cfg, const hwt_sim_costs *c,
                              double *makespan_s, hwt_op_event *events, int max_events,
                              hwt_sim_step *steps, int max_steps, int *n_steps);

#endif
