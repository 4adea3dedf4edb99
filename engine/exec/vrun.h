/* A run in virtual time: what a scheduler's virtual-time functions (sched.h:
 * vinit, vstart, vdone) see of the simulation driver (simulate.c). The
 * driver owns the clock and the running parts; a scheduler reads the engine
 * (levels, flags, thread counts, as in a threaded run) and starts parts. */
#ifndef HWTUNE_EXEC_VRUN_H
#define HWTUNE_EXEC_VRUN_H

typedef struct hwt_engine hwt_engine;
typedef struct hwt_vrun hwt_vrun;

struct hwt_vrun {
  hwt_engine *e;
  double now; /* virtual seconds since the run started */
};

/* Worker w (an executor, or a worker_groups worker) starts part tid of op's
 * nth parts. handoff 1: the op was handed to a waiting worker (its wake-up
 * is a dispatch cost); 0: w goes on with it itself. Decisions taken inside
 * a serial section (hwt_vrun_section) start when that section ends. */
void hwt_vrun_start(hwt_vrun *v, int w, int op, int tid, int nth, int handoff);

/* The end of a master's turn, as the loop of a threaded master that runs
 * the tiny ops it made ready inline: w goes on with the newest op of its
 * inline stack (stack[0 .. *n), popped) with all of that op's threads and
 * no hand-off, and 1 is returned; 0 when the stack is empty. */
int hwt_vrun_next_inline(hwt_vrun *v, int w, const int *stack, int *n);

/* The scheduler takes its serial section (critical-path's token, the
 * shared queue's and corun's lock) for one decision: sections of concurrent
 * decisions queue behind each other. */
void hwt_vrun_section(hwt_vrun *v);

#endif
