/* What hwtune-run checks before it trusts a results.db, and the stored
 * config it reads from one: the same rules as `hwtune run`. The database
 * rules (application id, schema range) come from src/hwtune/db/
 * migrations.py through the build (standalone.cmake), the config rules from the
 * engine library (hwtune/config_check.h), so neither is a second list. */
#ifndef HWTUNE_RUNNER_CHECKS_H
#define HWTUNE_RUNNER_CHECKS_H
#include <stddef.h>

#include "hwtune/engine.h"
#include "json.h"

/* Set by standalone.cmake from src/hwtune/db/migrations.py. */
#ifndef HWTUNE_APPLICATION_ID
#error "HWTUNE_APPLICATION_ID comes from the build (standalone.cmake)"
#endif
#ifndef HWTUNE_SCHEMA_LATEST
#error "HWTUNE_SCHEMA_LATEST comes from the build (standalone.cmake)"
#endif
/* The oldest schema the runner reads: v3 added graphs.lowered_json. */
#define HWTUNE_SCHEMA_MIN 3

/* The database is hwtune's, of a schema this build reads: application id,
 * user_version in HWTUNE_SCHEMA_MIN..HWTUNE_SCHEMA_LATEST, and the
 * hwtune_meta marker (marker: its 'application' value, NULL if absent).
 * 0, or -1 with the reason in err (the path is the caller's to add). */
int hr_check_database(int application_id, int version, const char *marker, char *err,
                      size_t errlen);

/* A stored config's scalar fields (no CPU budget: that applies to the
 * config that runs, flags included). 0, or -1 with the reason in err. */
int hr_check_stored_config(const hwt_engine_config *c, char *err, size_t errlen);

/* The config about to run against the CPUs this process may use. */
int hr_check_budget(const hwt_engine_config *c, char *err, size_t errlen);

/* One op's stored value (field: HWT_CFG_OP_*) under config c; what names
 * the map ("op_threads"), key the op. 0, or -1 with the reason in err. */
int hr_check_op_value(const hwt_engine_config *c, int field, const char *what,
                      const char *key, double value, double value2, char *err, size_t errlen);

/* engine_configs.op_params_json: an object of objects (per op, its
 * template parameters). The runner does not apply them (the config's
 * lowered graph carries their effect) but refuses a row that is corrupt, as
 * `hwtune run` does. 0, or -1 with the reason in err. */
int hr_check_op_params(const char *json, char *err, size_t errlen);

/* A number an init spec gives (scale, low, high, value): a finite float32. */
int hr_check_init_number(const hj_value *v, const char *key, size_t tensor, char *err,
                         size_t errlen);

#endif
