#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dlopen flags on older glibc under -std=c11 */
#endif
#include "sqlite_dyn.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The versioned soname first: distributions ship the unversioned
 * libsqlite3.so only with the -dev package. */
static const char *const sonames[] = {"libsqlite3.so.0", "libsqlite3.so"};

int hr_sqlite_load(hr_sqlite *api, char *err, size_t errlen) {
  void *h = NULL;
  for (size_t i = 0; i < sizeof sonames / sizeof sonames[0] && !h; i++)
    h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(err, errlen, "cannot load SQLite (libsqlite3.so.0): %s; install the sqlite3 "
             "runtime library (e.g. apt install libsqlite3-0)", dlerror());
    return -1;
  }
  struct {
    const char *name;
    void **slot;
  } syms[] = {
      {"sqlite3_open_v2", (void **)&api->open_v2},
      {"sqlite3_close", (void **)&api->close},
      {"sqlite3_errmsg", (void **)&api->errmsg},
      {"sqlite3_prepare_v2", (void **)&api->prepare_v2},
      {"sqlite3_bind_text", (void **)&api->bind_text},
      {"sqlite3_step", (void **)&api->step},
      {"sqlite3_column_type", (void **)&api->column_type},
      {"sqlite3_column_int", (void **)&api->column_int},
      {"sqlite3_column_text", (void **)&api->column_text},
      {"sqlite3_column_bytes", (void **)&api->column_bytes},
      {"sqlite3_finalize", (void **)&api->finalize},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    /* dlsym returns void *; POSIX guarantees it converts to a function
     * pointer, which ISO C does not, hence the copy through memcpy. */
    void *f = dlsym(h, syms[i].name);
    if (!f) {
      snprintf(err, errlen, "the loaded SQLite library lacks %s", syms[i].name);
      dlclose(h);
      return -1;
    }
    memcpy(syms[i].slot, &f, sizeof f);
  }
  return 0;
}
