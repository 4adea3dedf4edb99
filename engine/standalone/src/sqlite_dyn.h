/* SQLite, loaded at run time: the runner reads results.db without a build
 * dependency on SQLite headers or libraries (the Python side uses the
 * interpreter's sqlite3; any libsqlite3.so.0 reads the same file format). */
#ifndef HWTUNE_RUNNER_SQLITE_DYN_H
#define HWTUNE_RUNNER_SQLITE_DYN_H
#include <stddef.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

/* The subset of sqlite3.h the runner needs; values are SQLite's stable ABI. */
#define HR_SQLITE_OK 0
#define HR_SQLITE_ROW 100
#define HR_SQLITE_DONE 101
#define HR_SQLITE_NULL 5
#define HR_SQLITE_OPEN_READONLY 0x00000001

typedef struct {
  int (*open_v2)(const char *path, sqlite3 **db, int flags, const char *vfs);
  int (*close)(sqlite3 *db);
  const char *(*errmsg)(sqlite3 *db);
  int (*prepare_v2)(sqlite3 *db, const char *sql, int n, sqlite3_stmt **st, const char **tail);
  int (*bind_text)(sqlite3_stmt *st, int i, const char *s, int n, void (*dtor)(void *));
  int (*step)(sqlite3_stmt *st);
  int (*column_type)(sqlite3_stmt *st, int col);
  int (*column_int)(sqlite3_stmt *st, int col);
  const unsigned char *(*column_text)(sqlite3_stmt *st, int col);
  int (*column_bytes)(sqlite3_stmt *st, int col);
  int (*finalize)(sqlite3_stmt *st);
} hr_sqlite;

/* 0 and *api filled, or -1 with a one-line reason (library or symbol
 * missing) in err. The library stays loaded for the process's life. */
int hr_sqlite_load(hr_sqlite *api, char *err, size_t errlen);

#endif
