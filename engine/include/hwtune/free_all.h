/* Freeing an object's owned arrays in one call: a destroy function lists
 * what it owns instead of writing a free() line per array. Internal, not
 * part of the library's API; header-only, like hwtune/errorf.h. */
#ifndef HWTUNE_FREE_ALL_H
#define HWTUNE_FREE_ALL_H
#include <stddef.h>
#include <stdlib.h>

static inline void hwt_free_each(void *const *ptrs, size_t n) {
  for (size_t i = 0; i < n; i++) free(ptrs[i]);
}

/* HWT_FREE_ALL(p->a, p->b, ...): free() on each pointer, in order; every
 * argument is read once, before the first free(). */
#define HWT_FREE_ALL(...) \
  hwt_free_each((void *[]){__VA_ARGS__}, sizeof((void *[]){__VA_ARGS__}) / sizeof(void *))

#endif
