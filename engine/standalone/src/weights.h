/* The weights sidecar of an imported model (hwtune.graph.weights): a
 * safetensors-layout file, an 8-byte little-endian header length, a JSON
 * header {name: {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}}
 * and the raw little-endian float32 data. The runner reads the tensors
 * whose lowered init is "file" from it, so it computes with the same
 * numbers as `hwtune run`. (The file's sha256 is checked by hwtune when it
 * loads the model; this reader checks names, dtype, shapes and offsets.) */
#ifndef HWTUNE_RUNNER_WEIGHTS_H
#define HWTUNE_RUNNER_WEIGHTS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"

typedef struct {
  FILE *f;
  const char *path;
  hj_value header;
  uint64_t data_start, data_len;
  int n_read;
} hr_weights;

/* 0, or -1 with a one-line reason in err. */
int hr_weights_open(hr_weights *w, const char *path, char *err, size_t errlen);
/* Copy tensor `name` (shape[0..ndim) float32 values) into dst. */
int hr_weights_read(hr_weights *w, const char *name, int ndim, const int64_t *shape, float *dst,
                    char *err, size_t errlen);
void hr_weights_close(hr_weights *w);

#endif
