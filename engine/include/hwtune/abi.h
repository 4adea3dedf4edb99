/* The library's binary interface as its bindings see it, described by the
 * C compiler: the size and field offsets of every struct a binding mirrors
 * (src/hwtune/native/ mirrors them with ctypes), and the names of the enums
 * a binding spells as strings. A binding reads names from here instead of
 * repeating them, and its tests compare each mirror's layout with these
 * figures, so a field added on one side only fails a test instead of
 * corrupting memory. Implementation: engine/abi/abi.c (one table). */
#ifndef HWTUNE_ABI_H
#define HWTUNE_ABI_H
#include "hwtune/api.h"

/* sizeof(type), by the type's C name ("hwt_engine_config"); -1 if the table
 * does not describe it. */
HWT_API long hwt_abi_sizeof(const char *type);
/* offsetof(type, field); -1 if the table does not describe that field. */
HWT_API long hwt_abi_offsetof(const char *type, const char *field);
/* How many fields of type the table describes (all of them: a test checks
 * that each mirror has exactly these). */
HWT_API int hwt_abi_n_fields(const char *type);
/* The i-th field of type (i = 0, 1, ...: in declaration order): its name,
 * its offset into *offset and its C type into *kind ("int", "double",
 * "int *", ...: a scalar or a pointer to one; NULL for an array, a struct, a
 * function pointer or a pointer to a struct, which a binding names itself);
 * NULL past the last. Bindings build their struct mirrors from these. */
HWT_API const char *hwt_abi_field_at(const char *type, int i, long *offset,
                                     const char **kind);

/* The name of value in enum type ("hwt_tensor_kind", 2 -> "activation"), as
 * bindings and stored data spell it; NULL if the value has none. Status
 * codes ("hwt_status") name their meaning ("out of memory"). */
HWT_API const char *hwt_abi_enum_name(const char *type, int value);
/* The value of that name, or fallback when it has none. */
HWT_API int hwt_abi_enum_value(const char *type, const char *name, int fallback);
/* The i-th named value of enum type (i = 0, 1, ...: in declaration order)
 * into *value, and its name; NULL past the last. */
HWT_API const char *hwt_abi_enum_at(const char *type, int i, int *value);

#endif
