/* Shared derived constants (hwtune/op.h): one table per engine, looked up
 * at prepare by (constant's address, form, size). A plain array: an engine
 * holds at most a few hundred packed weights and prepare runs once. */
#include <stdlib.h>
#include <string.h>
#include "hwtune/op.h"

typedef struct {
  const void *data;
  uint64_t form;
  size_t floats;
  float *buf;
  int refs;
} entry;

struct hwt_op_shared {
  entry *e;
  int n, cap;
};

uint64_t hwt_op_form_hash(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  if (!h) h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

hwt_op_shared *hwt_op_shared_create(void) { return calloc(1, sizeof(hwt_op_shared)); }

void hwt_op_shared_destroy(hwt_op_shared *s) {
  if (!s) return;
  /* Every holder released before the engine goes: free what a buggy op
   * kept rather than leak it. */
  for (int i = 0; i < s->n; i++) free(s->e[i].buf);
  free(s->e);
  free(s);
}

size_t hwt_op_shared_count(const hwt_op_shared *s, size_t *bytes) {
  size_t b = 0;
  for (int i = 0; s && i < s->n; i++) b += s->e[i].floats * sizeof(float);
  if (bytes) *bytes = b;
  return s ? (size_t)s->n : 0;
}

static float *alloc_floats(size_t floats) {
  size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
  return aligned_alloc(64, bytes ? bytes : 64);
}

float *hwt_op_shared_acquire(hwt_op_ctx *ctx, const void *data, uint64_t form, size_t floats,
                             int *fill) {
  hwt_op_shared *s = ctx->shared;
  *fill = 1;
  if (!s) return alloc_floats(floats);
  for (int i = 0; i < s->n; i++)
    if (s->e[i].data == data && s->e[i].form == form && s->e[i].floats == floats) {
      s->e[i].refs++;
      *fill = 0;
      return s->e[i].buf;
    }
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 16;
    entry *e = realloc(s->e, (size_t)cap * sizeof *e);
    if (!e) return NULL;
    s->e = e;
    s->cap = cap;
  }
  float *buf = alloc_floats(floats);
  if (!buf) return NULL;
  s->e[s->n++] = (entry){data, form, floats, buf, 1};
  return buf;
}

void hwt_op_shared_release(hwt_op_ctx *ctx, float *buf) {
  hwt_op_shared *s = ctx->shared;
  if (!buf) return;
  if (s)
    for (int i = 0; i < s->n; i++)
      if (s->e[i].buf == buf) {
        if (--s->e[i].refs == 0) {
          free(buf);
          s->e[i] = s->e[--s->n];
        }
        return;
      }
  free(buf); /* private (no table, or acquired before the table existed) */
}
