/* hwtune-run --config FILE: the graph and engine config to run, read from a
 * records file written by `hwtune db export` (JSON Lines: a header, one
 * object per row {"record": kind, "row": {column: value}}, an end record),
 * so a tuned config runs on a machine without the database. The choice is
 * the database's: tuned beats user for --host, else the newest tuned or
 * user config of the graph. */
#ifndef HWTUNE_RUNNER_RECORDS_FILE_H
#define HWTUNE_RUNNER_RECORDS_FILE_H
#include <stddef.h>

#include "rows.h"

/* The records format version this runner reads (hwtune.db.records.
 * FORMAT_VERSION). */
#define HR_RECORDS_VERSION 1

/* graph_prefix may be NULL when the file's configs name one graph; host
 * may be NULL. 0 with *g filled (and *c, c->found = 0 when no config
 * fits), or -1 with a one-line reason in err. */
int hr_records_load(const char *path, const char *graph_prefix, const char *host, graph_row *g,
                    config_row *c, char *err, size_t errlen);

#endif
