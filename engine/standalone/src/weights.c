/* Reader of the weights sidecar (see weights.h). One fread per tensor,
 * into the runner's own 64-byte-aligned param buffers. */
#include "weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* As hwtune.graph.weights.MAX_HEADER_BYTES (and the safetensors readers). */
#define MAX_HEADER_BYTES 100000000ull

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b) {
  snprintf(err, errlen, fmt, a, b);
  return -1;
}

static int little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

int hr_weights_open(hr_weights *w, const char *path, char *err, size_t errlen) {
  memset(w, 0, sizeof *w);
  w->path = path;
  w->f = fopen(path, "rb");
  if (!w->f) return fail(err, errlen, "weights file %s: cannot open it%s", path, "");
  unsigned char len8[8];
  if (fread(len8, 1, 8, w->f) != 8)
    return fail(err, errlen, "weights file %s: not a safetensors file (too short)%s", path, "");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | len8[i];
  if (fseek(w->f, 0, SEEK_END) != 0) return fail(err, errlen, "weights file %s: cannot seek%s",
                                                 path, "");
  long size = ftell(w->f);
  if (size < 0 || n > MAX_HEADER_BYTES || 8 + n > (uint64_t)size)
    return fail(err, errlen, "weights file %s: not a safetensors file (bad header length)%s",
                path, "");
  char *text = malloc(n + 1);
  if (!text) return fail(err, errlen, "weights file %s: out of memory%s", path, "");
  if (fseek(w->f, 8, SEEK_SET) != 0 || fread(text, 1, n, w->f) != n) {
    free(text);
    return fail(err, errlen, "weights file %s: truncated header%s", path, "");
  }
  char jerr[256];
  int rc = hj_parse(text, n, &w->header, jerr, sizeof jerr);
  free(text);
  if (rc || w->header.type != HJ_OBJECT) {
    if (!rc) hj_free(&w->header);
    memset(&w->header, 0, sizeof w->header);
    return fail(err, errlen, "weights file %s: corrupt header (%s)", path, rc ? jerr : "not an object");
  }
  w->data_start = 8 + n;
  w->data_len = (uint64_t)size - w->data_start;
  return 0;
}

int hr_weights_read(hr_weights *w, const char *name, int ndim, const int64_t *shape, float *dst,
                    char *err, size_t errlen) {
  const hj_value *e = hj_get(&w->header, name);
  if (!e || e->type != HJ_OBJECT)
    return fail(err, errlen, "weights file %s has no tensor \"%s\"", w->path, name);
  const hj_value *dtype = hj_get(e, "dtype"), *shp = hj_get(e, "shape");
  const hj_value *offs = hj_get(e, "data_offsets");
  if (!dtype || dtype->type != HJ_STRING || strcmp(dtype->str, "F32"))
    return fail(err, errlen, "weights file %s: tensor \"%s\" is not F32", w->path, name);
  /* The lowered graph writes 0-d params as [1]: compare element counts and,
   * when the ranks agree, every dimension. */
  int64_t count = 1, file_count = 1;
  for (int d = 0; d < ndim; d++) count *= shape[d];
  if (!shp || shp->type != HJ_ARRAY || !offs || offs->type != HJ_ARRAY || offs->len != 2)
    return fail(err, errlen, "weights file %s: tensor \"%s\": malformed entry", w->path, name);
  for (size_t d = 0; d < shp->len; d++) {
    double v = shp->items[d].num;
    if (shp->items[d].type != HJ_NUMBER || v < 0 || v != floor(v))
      return fail(err, errlen, "weights file %s: tensor \"%s\": bad shape", w->path, name);
    file_count *= (int64_t)v;
    if ((int)shp->len == ndim && (int64_t)v != shape[d])
      return fail(err, errlen, "weights file %s: tensor \"%s\" has another shape than the graph",
                  w->path, name);
  }
  if (file_count != count)
    return fail(err, errlen, "weights file %s: tensor \"%s\" has another size than the graph",
                w->path, name);
  double b = offs->items[0].num, end = offs->items[1].num;
  if (offs->items[0].type != HJ_NUMBER || offs->items[1].type != HJ_NUMBER || b < 0 ||
      end > (double)w->data_len || end - b != 4.0 * (double)count)
    return fail(err, errlen, "weights file %s: tensor \"%s\": offsets outside the data",
                w->path, name);
  if (fseek(w->f, (long)(w->data_start + (uint64_t)b), SEEK_SET) != 0 ||
      fread(dst, 4, (size_t)count, w->f) != (size_t)count)
    return fail(err, errlen, "weights file %s: cannot read tensor \"%s\"", w->path, name);
  if (!little_endian()) {
    unsigned char *p = (unsigned char *)dst;
    for (int64_t i = 0; i < count; i++, p += 4) {
      unsigned char t0 = p[0], t1 = p[1];
      p[0] = p[3], p[1] = p[2], p[2] = t1, p[3] = t0;
    }
  }
  w->n_read++;
  return 0;
}

void hr_weights_close(hr_weights *w) {
  if (w->f) fclose(w->f);
  if (w->header.type == HJ_OBJECT) hj_free(&w->header);
  memset(w, 0, sizeof *w);
}
