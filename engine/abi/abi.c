/* One table of what bindings mirror (hwtune/abi.h). A struct a binding
 * mirrors gets a SIZE row and one FIELD row per field; an enum a binding
 * spells gets one NAME row per value. */
#include <stddef.h>
#include <string.h>
#include "hwtune/abi.h"
#include "hwtune/config_check.h"
#include "hwtune/conv.h"
#include "hwtune/dynamic.h"
#include "hwtune/eltwise.h"
#include "hwtune/engine.h"
#include "hwtune/gemm.h"
#include "hwtune/graph.h"
#include "hwtune/isa.h"
#include "hwtune/op.h"
#include "hwtune/plan.h"
#include "hwtune/pool.h"
#include "hwtune/simulate.h"

typedef struct {
  const char *type, *field; /* field NULL: the size row */
  long value;
  const char *kind; /* the field's C type (hwt_abi_field_at), NULL: one a binding names */
} layout_row;

/* A field's C type as a binding builds its mirror from it. _Generic looks at
 * a pointer to the field, so an array or a struct member matches none of
 * these (no decay) and its binding names its type itself. */
#define KIND(t, f)                                                           \
  _Generic(&((t *)0)->f,                                                     \
      int *: "int", unsigned *: "unsigned", long *: "long",                  \
      unsigned long *: "unsigned long", long long *: "long long",            \
      unsigned long long *: "unsigned long long", float *: "float",          \
      double *: "double", char **: "char *", const char **: "char *",        \
      void **: "void *", const void **: "void *", int **: "int *",           \
      const int **: "int *", long **: "long *", const long **: "long *",     \
      float **: "float *", const float **: "float *", double **: "double *", \
      const double **: "double *", default: NULL)

#define SIZE(t) {#t, NULL, (long)sizeof(t), NULL}
#define FIELD(t, f) {#t, #f, (long)offsetof(t, f), KIND(t, f)}

static const layout_row LAYOUT[] = {
    SIZE(hwt_engine_config),
    FIELD(hwt_engine_config, executors),
    FIELD(hwt_engine_config, threads_per_executor),
    FIELD(hwt_engine_config, scheduler),
    FIELD(hwt_engine_config, pin),
    FIELD(hwt_engine_config, isa),
    FIELD(hwt_engine_config, op_threads),
    FIELD(hwt_engine_config, op_cost),
    FIELD(hwt_engine_config, op_priority),
    FIELD(hwt_engine_config, op_cand_threads),
    FIELD(hwt_engine_config, op_cand_seconds),
    FIELD(hwt_engine_config, op_cand_n),

    SIZE(hwt_op_event),
    FIELD(hwt_op_event, op),
    FIELD(hwt_op_event, executor),
    FIELD(hwt_op_event, threads),
    FIELD(hwt_op_event, start_s),
    FIELD(hwt_op_event, end_s),

    SIZE(hwt_sched_info),
    FIELD(hwt_sched_info, name),
    FIELD(hwt_sched_info, summary),
    FIELD(hwt_sched_info, single_team),
    FIELD(hwt_sched_info, worker_groups),
    FIELD(hwt_sched_info, in_order),
    FIELD(hwt_sched_info, needs_costs),
    FIELD(hwt_sched_info, pins),
    FIELD(hwt_sched_info, default_one),
    FIELD(hwt_sched_info, default_many),

    SIZE(hwt_sim_costs),
    FIELD(hwt_sim_costs, max_threads),
    FIELD(hwt_sim_costs, seconds),
    FIELD(hwt_sim_costs, mem_frac),
    FIELD(hwt_sim_costs, mem_bps),
    FIELD(hwt_sim_costs, bw_cap),
    FIELD(hwt_sim_costs, cores),
    FIELD(hwt_sim_costs, inline_s),
    FIELD(hwt_sim_costs, dispatch_s),
    FIELD(hwt_sim_costs, section_s),
    FIELD(hwt_sim_costs, run_s),
    FIELD(hwt_sim_costs, xfer_bps),
    FIELD(hwt_sim_costs, xfer_s),
    FIELD(hwt_sim_costs, park_s),
    FIELD(hwt_sim_costs, wake_s),

    SIZE(hwt_plan_options),
    FIELD(hwt_plan_options, reuse),
    FIELD(hwt_plan_options, reach_max_ops),
    FIELD(hwt_plan_options, flops_per_s),
    FIELD(hwt_plan_options, bytes_per_s),
    FIELD(hwt_plan_options, default_cost),

    SIZE(hwt_op_ctx),
    FIELD(hwt_op_ctx, g),
    FIELD(hwt_op_ctx, op),
    FIELD(hwt_op_ctx, n_in),
    FIELD(hwt_op_ctx, n_out),
    FIELD(hwt_op_ctx, in),
    FIELD(hwt_op_ctx, out),
    FIELD(hwt_op_ctx, isa),
    FIELD(hwt_op_ctx, max_threads),
    FIELD(hwt_op_ctx, state),
    FIELD(hwt_op_ctx, ws_floats),
    FIELD(hwt_op_ctx, flops),
    FIELD(hwt_op_ctx, shared),
    FIELD(hwt_op_ctx, const_in),

    SIZE(hwt_op_impl),
    FIELD(hwt_op_impl, type),
    FIELD(hwt_op_impl, prepare),
    FIELD(hwt_op_impl, run),
    FIELD(hwt_op_impl, release),

    SIZE(hwt_pool_config),
    FIELD(hwt_pool_config, n_teams),
    FIELD(hwt_pool_config, threads_per_team),
    FIELD(hwt_pool_config, pin),
    FIELD(hwt_pool_config, cpus),
    FIELD(hwt_pool_config, n_cpus),

    SIZE(hwt_cpu_features),
    FIELD(hwt_cpu_features, sse42),
    FIELD(hwt_cpu_features, avx),
    FIELD(hwt_cpu_features, avx2),
    FIELD(hwt_cpu_features, fma),
    FIELD(hwt_cpu_features, avx512f),
    FIELD(hwt_cpu_features, avx512bw),
    FIELD(hwt_cpu_features, avx512vl),
    FIELD(hwt_cpu_features, avx512dq),
    FIELD(hwt_cpu_features, avx512_bf16),
    FIELD(hwt_cpu_features, avx512_vnni),
    FIELD(hwt_cpu_features, amx_tile),
    FIELD(hwt_cpu_features, amx_bf16),
    FIELD(hwt_cpu_features, amx_int8),
    FIELD(hwt_cpu_features, neon),
    FIELD(hwt_cpu_features, os_avx),
    FIELD(hwt_cpu_features, os_avx512),
    FIELD(hwt_cpu_features, os_amx),

    SIZE(hwt_gemm_desc),
    FIELD(hwt_gemm_desc, M),
    FIELD(hwt_gemm_desc, N),
    FIELD(hwt_gemm_desc, K),
    FIELD(hwt_gemm_desc, trans_a),
    FIELD(hwt_gemm_desc, trans_b),
    FIELD(hwt_gemm_desc, lda),
    FIELD(hwt_gemm_desc, ldb),
    FIELD(hwt_gemm_desc, ldc),
    FIELD(hwt_gemm_desc, beta),

    SIZE(hwt_gemm_plan),
    FIELD(hwt_gemm_plan, d),
    FIELD(hwt_gemm_plan, isa),
    FIELD(hwt_gemm_plan, nth),
    FIELD(hwt_gemm_plan, mr),
    FIELD(hwt_gemm_plan, nr),
    FIELD(hwt_gemm_plan, mc),
    FIELD(hwt_gemm_plan, kc),
    FIELD(hwt_gemm_plan, nc),
    FIELD(hwt_gemm_plan, ws_floats),
    FIELD(hwt_gemm_plan, packed_b_floats),

    SIZE(hwt_cache_sizes),
    FIELD(hwt_cache_sizes, l1d),
    FIELD(hwt_cache_sizes, l2),
    FIELD(hwt_cache_sizes, l3),
    FIELD(hwt_cache_sizes, l3_cpus),

    SIZE(hwt_eltwise_desc),
    FIELD(hwt_eltwise_desc, op),
    FIELD(hwt_eltwise_desc, isa),
    FIELD(hwt_eltwise_desc, n),
    FIELD(hwt_eltwise_desc, nt_stores),
    FIELD(hwt_eltwise_desc, attr),

    SIZE(hwt_conv_desc),
    FIELD(hwt_conv_desc, N),
    FIELD(hwt_conv_desc, C),
    FIELD(hwt_conv_desc, H),
    FIELD(hwt_conv_desc, W),
    FIELD(hwt_conv_desc, K),
    FIELD(hwt_conv_desc, R),
    FIELD(hwt_conv_desc, S),
    FIELD(hwt_conv_desc, stride_h),
    FIELD(hwt_conv_desc, stride_w),
    FIELD(hwt_conv_desc, pad_h),
    FIELD(hwt_conv_desc, pad_w),
    FIELD(hwt_conv_desc, relu),
    FIELD(hwt_conv_desc, dil_h),
    FIELD(hwt_conv_desc, dil_w),
    FIELD(hwt_conv_desc, pad_h_end),
    FIELD(hwt_conv_desc, pad_w_end),
    FIELD(hwt_conv_desc, relu_max),
    FIELD(hwt_conv_desc, act),

    SIZE(hwt_conv_params),
    FIELD(hwt_conv_params, ic_bn),
    FIELD(hwt_conv_params, oc_bn),
    FIELD(hwt_conv_params, reg_n),
    FIELD(hwt_conv_params, unroll_ker),
    FIELD(hwt_conv_params, reg_h),
    FIELD(hwt_conv_params, winograd),

    SIZE(hwt_conv_knob),
    FIELD(hwt_conv_knob, n),
    FIELD(hwt_conv_knob, v),

    SIZE(hwt_conv_knobs_t),
    FIELD(hwt_conv_knobs_t, ic_bn),
    FIELD(hwt_conv_knobs_t, oc_bn),
    FIELD(hwt_conv_knobs_t, reg_n),
    FIELD(hwt_conv_knobs_t, unroll_ker),
    FIELD(hwt_conv_knobs_t, reg_h),
    FIELD(hwt_conv_knobs_t, winograd),

    SIZE(hwt_conv_plan),
    FIELD(hwt_conv_plan, d),
    FIELD(hwt_conv_plan, layout),
    FIELD(hwt_conv_plan, p),
    FIELD(hwt_conv_plan, isa),
    FIELD(hwt_conv_plan, nth),
    FIELD(hwt_conv_plan, OH),
    FIELD(hwt_conv_plan, OW),
    FIELD(hwt_conv_plan, Hp),
    FIELD(hwt_conv_plan, Wp),
    FIELD(hwt_conv_plan, copy_input),
    FIELD(hwt_conv_plan, rows_outer),
    FIELD(hwt_conv_plan, x_floats),
    FIELD(hwt_conv_plan, y_floats),
    FIELD(hwt_conv_plan, w_floats),
    FIELD(hwt_conv_plan, ws_floats),
    FIELD(hwt_conv_plan, wino_th),
    FIELD(hwt_conv_plan, wino_tw),
    FIELD(hwt_conv_plan, wino_tb),
    FIELD(hwt_conv_plan, wino_kb),
    FIELD(hwt_conv_plan, wino_bs),
    FIELD(hwt_conv_plan, wino_cpad),
    FIELD(hwt_conv_plan, wino_pack_full),
    FIELD(hwt_conv_plan, wino_pack_tail),
    FIELD(hwt_conv_plan, flat),
    FIELD(hwt_conv_plan, sub),
    FIELD(hwt_conv_plan, nhwc_gemm),
    FIELD(hwt_conv_plan, gemm_t),

    SIZE(hwt_samples_options),
    FIELD(hwt_samples_options, input),
    FIELD(hwt_samples_options, vocab),
    FIELD(hwt_samples_options, feature_width),
    FIELD(hwt_samples_options, arity),
    FIELD(hwt_samples_options, max_vertices),
    FIELD(hwt_samples_options, max_edges),
    FIELD(hwt_samples_options, max_samples),
    FIELD(hwt_samples_options, max_total_bytes),

    SIZE(hwt_dyn_role),
    FIELD(hwt_dyn_role, kind),
    FIELD(hwt_dyn_role, a),
    FIELD(hwt_dyn_role, b),

    SIZE(hwt_dyn_fn),
    FIELD(hwt_dyn_fn, g),
    FIELD(hwt_dyn_fn, roles),
    FIELD(hwt_dyn_fn, n_states),
    FIELD(hwt_dyn_fn, state_update),
    FIELD(hwt_dyn_fn, embedding),
    FIELD(hwt_dyn_fn, n_readouts),
    FIELD(hwt_dyn_fn, readout_at),
    FIELD(hwt_dyn_fn, readout_offsets),
    FIELD(hwt_dyn_fn, readout_outputs),
    FIELD(hwt_dyn_fn, op_flops),
    FIELD(hwt_dyn_fn, op_bytes),

    SIZE(hwt_dyn_config),
    FIELD(hwt_dyn_config, policy),
    FIELD(hwt_dyn_config, batch),
    FIELD(hwt_dyn_config, chunk),
    FIELD(hwt_dyn_config, executors),
    FIELD(hwt_dyn_config, threads_per_executor),
    FIELD(hwt_dyn_config, pin),
    FIELD(hwt_dyn_config, isa),
    FIELD(hwt_dyn_config, hoist),
    FIELD(hwt_dyn_config, op_threads),
};

typedef struct {
  const char *type;
  int value;
  const char *name;
} name_row;

static const name_row NAMES[] = {
    {"hwt_status", HWT_OK, "ok"},
    {"hwt_status", HWT_EINVAL, "invalid argument"},
    {"hwt_status", HWT_ENOMEM, "out of memory"},
    {"hwt_status", HWT_EISA, "ISA variant not supported on this CPU"},
    {"hwt_status", HWT_ESYS, "system call failed"},

    {"hwt_tensor_kind", HWT_TENSOR_INPUT, "input"},
    {"hwt_tensor_kind", HWT_TENSOR_PARAM, "param"},
    {"hwt_tensor_kind", HWT_TENSOR_ACTIVATION, "activation"},
    {"hwt_tensor_kind", HWT_TENSOR_OUTPUT, "output"},

    {"hwt_attr_kind", HWT_ATTR_NONE, "none"},
    {"hwt_attr_kind", HWT_ATTR_INTS, "ints"},
    {"hwt_attr_kind", HWT_ATTR_FLOATS, "floats"},

    {"hwt_reuse", HWT_REUSE_NONE, "none"},
    {"hwt_reuse", HWT_REUSE_SEQUENTIAL, "sequential"},
    {"hwt_reuse", HWT_REUSE_PARALLEL_SAFE, "parallel_safe"},

    {"hwt_sched_pinning", HWT_PIN_NEVER, "never"},
    {"hwt_sched_pinning", HWT_PIN_ON_REQUEST, "on_request"},
    {"hwt_sched_pinning", HWT_PIN_BY_DEFAULT, "by_default"},

    {"hwt_config_field", HWT_CFG_OK, "ok"},
    {"hwt_config_field", HWT_CFG_SCHEDULER, "scheduler"},
    {"hwt_config_field", HWT_CFG_EXECUTORS, "executors"},
    {"hwt_config_field", HWT_CFG_THREADS, "threads"},
    {"hwt_config_field", HWT_CFG_PIN, "pin"},
    {"hwt_config_field", HWT_CFG_CPUS, "cpus"},
    {"hwt_config_field", HWT_CFG_OP_THREADS, "op_threads"},
    {"hwt_config_field", HWT_CFG_OP_COST, "op_cost"},
    {"hwt_config_field", HWT_CFG_OP_PRIORITY, "op_priority"},
    {"hwt_config_field", HWT_CFG_OP_CANDIDATES, "op_candidates"},

    {"hwt_conv_layout", HWT_CONV_NCHW, "NCHW"},
    {"hwt_conv_layout", HWT_CONV_NCHWC, "NCHWc"},
    {"hwt_conv_layout", HWT_CONV_NCHW_DIRECT, "NCHW-direct"},
    {"hwt_conv_layout", HWT_CONV_NCHW_GEMM, "NCHW-gemm"},
    {"hwt_conv_layout", HWT_CONV_NCHW_STEM, "NCHW-stem"},

    {"hwt_conv_activation", HWT_CONV_ACT_NONE, "none"},
    {"hwt_conv_activation", HWT_CONV_ACT_SILU, "silu"},
    {"hwt_conv_activation", HWT_CONV_ACT_HARD_SWISH, "hard_swish"},

    {"hwt_dyn_input", HWT_DYN_INPUT_NONE, "none"},
    {"hwt_dyn_input", HWT_DYN_INPUT_TOKENS, "tokens"},
    {"hwt_dyn_input", HWT_DYN_INPUT_FEATURES, "features"},

    {"hwt_dyn_policy", HWT_DYN_BATCHED, "batched"},
    {"hwt_dyn_policy", HWT_DYN_BY_DEPTH, "by-depth"},
    {"hwt_dyn_policy", HWT_DYN_SERIAL, "serial"},

    {"hwt_dyn_role_kind", HWT_DYN_OP, "op"},
    {"hwt_dyn_role_kind", HWT_DYN_PARAM, "param"},
    {"hwt_dyn_role_kind", HWT_DYN_VERTEX_IN, "vertex_input"},
    {"hwt_dyn_role_kind", HWT_DYN_CHILD, "child"},
    {"hwt_dyn_role_kind", HWT_DYN_CHILD_SUM, "child_sum"},
    {"hwt_dyn_role_kind", HWT_DYN_CHILD_EACH, "child_each"},
    {"hwt_dyn_role_kind", HWT_DYN_TO_EDGES, "to_edges"},
    {"hwt_dyn_role_kind", HWT_DYN_SUM_EDGES, "sum_edges"},
    {"hwt_dyn_role_kind", HWT_DYN_STATE, "state"},

    {"hwt_dyn_at", HWT_DYN_AT_ROOT, "root"},
    {"hwt_dyn_at", HWT_DYN_AT_EVERY, "every"},
    {"hwt_dyn_at", HWT_DYN_AT_LAST, "last"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static long layout(const char *type, const char *field) {
  if (!type) return -1;
  for (size_t i = 0; i < COUNT(LAYOUT); i++) {
    const layout_row *r = &LAYOUT[i];
    if (strcmp(r->type, type) != 0) continue;
    if (field ? r->field && strcmp(r->field, field) == 0 : !r->field) return r->value;
  }
  return -1;
}

long hwt_abi_sizeof(const char *type) { return layout(type, NULL); }

long hwt_abi_offsetof(const char *type, const char *field) {
  return field ? layout(type, field) : -1;
}

const char *hwt_abi_field_at(const char *type, int i, long *offset, const char **kind) {
  for (size_t k = 0; type && k < COUNT(LAYOUT); k++)
    if (LAYOUT[k].field && strcmp(LAYOUT[k].type, type) == 0 && i-- == 0) {
      if (offset) *offset = LAYOUT[k].value;
      if (kind) *kind = LAYOUT[k].kind;
      return LAYOUT[k].field;
    }
  return NULL;
}

int hwt_abi_n_fields(const char *type) {
  int n = 0;
  for (size_t i = 0; type && i < COUNT(LAYOUT); i++)
    n += LAYOUT[i].field && strcmp(LAYOUT[i].type, type) == 0;
  return n;
}

const char *hwt_abi_enum_name(const char *type, int value) {
  for (size_t i = 0; type && i < COUNT(NAMES); i++)
    if (NAMES[i].value == value && strcmp(NAMES[i].type, type) == 0) return NAMES[i].name;
  return NULL;
}

int hwt_abi_enum_value(const char *type, const char *name, int fallback) {
  for (size_t i = 0; type && name && i < COUNT(NAMES); i++)
    if (strcmp(NAMES[i].type, type) == 0 && strcmp(NAMES[i].name, name) == 0)
      return NAMES[i].value;
  return fallback;
}

const char *hwt_abi_enum_at(const char *type, int i, int *value) {
  for (size_t k = 0; type && k < COUNT(NAMES); k++)
    if (strcmp(NAMES[k].type, type) == 0 && i-- == 0) {
      if (value) *value = NAMES[k].value;
      return NAMES[k].name;
    }
  return NULL;
}
