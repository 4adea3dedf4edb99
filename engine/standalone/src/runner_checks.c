/* hwtune-run's checks (runner_checks.h): each returns 0 or -1 with one
 * line in err, worded as `hwtune run` words the same refusal. */
#include "runner_checks.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hwtune/config_check.h"
#include "hwtune/errorf.h"

/* A refusal: -1, the reason in err. */
#define refuse(...) hwt_errorf(-1, __VA_ARGS__)

int hr_check_database(int application_id, int version, const char *marker, char *err,
                      size_t errlen) {
  if (application_id == 0)
    return refuse(err, errlen, "is a SQLite database but not hwtune's (no application_id)");
  if ((unsigned)application_id != (unsigned)HWTUNE_APPLICATION_ID)
    return refuse(err, errlen, "belongs to another application (application_id 0x%08x)",
                  (unsigned)application_id);
  if (version > HWTUNE_SCHEMA_LATEST)
    return refuse(err, errlen, "was written by a newer hwtune (schema %d > %d); upgrade hwtune",
                  version, HWTUNE_SCHEMA_LATEST);
  if (!marker || strcmp(marker, "hwtune") != 0)
    return refuse(err, errlen, "carries hwtune's id but has no hwtune_meta marker (damaged?); "
                  "move it away");
  if (version < HWTUNE_SCHEMA_MIN)
    return refuse(err, errlen, "has schema v%d; hwtune-run needs v%d or later: run `hwtune run` "
                  "on it once to upgrade it", version, HWTUNE_SCHEMA_MIN);
  return 0;
}

int hr_check_stored_config(const hwt_engine_config *c, char *err, size_t errlen) {
  return hwt_config_check(c, 0, err, errlen) == HWT_CFG_OK ? 0 : -1;
}

int hr_check_budget(const hwt_engine_config *c, char *err, size_t errlen) {
  return hwt_config_check(c, -1, err, errlen) == HWT_CFG_OK ? 0 : -1;
}

int hr_check_op_value(const hwt_engine_config *c, int field, const char *what,
                      const char *key, double value, double value2, char *err, size_t errlen) {
  char why[256];
  if (hwt_config_check_op(c, field, value, value2, why, sizeof why) == HWT_CFG_OK) return 0;
  return refuse(err, errlen, "%s['%s']: %s", what, key, why);
}

int hr_check_op_params(const char *json, char *err, size_t errlen) {
  if (!json) return 0;
  hj_value m;
  char why[256];
  if (hj_parse(json, strlen(json), &m, why, sizeof why))
    return refuse(err, errlen, "op_params_json: %s", why);
  int rc = 0;
  if (m.type != HJ_OBJECT) {
    rc = refuse(err, errlen, "op_params_json: expected an object");
  } else {
    for (size_t k = 0; k < m.len && rc == 0; k++)
      if (m.items[k].type != HJ_OBJECT)
        rc = refuse(err, errlen, "op_params['%s']: must be an object of template parameters",
                    m.keys[k]);
  }
  hj_free(&m);
  return rc;
}

int hr_check_init_number(const hj_value *v, const char *key, size_t tensor, char *err,
                         size_t errlen) {
  if (!v) return 0;
  if (v->type != HJ_NUMBER || !isfinite(v->num) || fabs(v->num) > FLT_MAX)
    return refuse(err, errlen, "tensors[%zu].init.%s: expected a finite float32", tensor, key);
  return 0;
}
