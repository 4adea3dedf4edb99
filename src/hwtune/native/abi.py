"""ctypes mirrors of C structs, built from and checked against the
compiler's layout.

Every mirror derives from CStruct and names its C type in _c_name_; the
library describes each such type (hwtune/abi.h: size, fields, their offsets
and C types). c_fields() builds a mirror's _fields_ from that description,
so a struct's fields are written once, in its C header; a binding names
only the types C cannot describe (arrays, nested structs, typed pointers to
structs, function pointers). tests/test_native_abi.py compares every
registered mirror with the C layout, so a mirror that disagrees fails a
test instead of corrupting memory."""

import ctypes
import keyword
from typing import List

from hwtune.errors import NativeError
from hwtune.native._lib import sig

_sizeof = sig("hwt_abi_sizeof", ctypes.c_long, ctypes.c_char_p)
_offsetof = sig("hwt_abi_offsetof", ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p)
_n_fields = sig("hwt_abi_n_fields", ctypes.c_int, ctypes.c_char_p)
_field_at = sig("hwt_abi_field_at", ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_char_p))

# hwt_abi_field_at's kinds. int64_t is long (LP64), size_t unsigned long.
_KINDS = {
    "int": ctypes.c_int, "unsigned": ctypes.c_uint, "long": ctypes.c_long,
    "unsigned long": ctypes.c_ulong, "long long": ctypes.c_longlong,
    "unsigned long long": ctypes.c_ulonglong, "float": ctypes.c_float,
    "double": ctypes.c_double, "char *": ctypes.c_char_p, "void *": ctypes.c_void_p,
    "int *": ctypes.POINTER(ctypes.c_int), "long *": ctypes.POINTER(ctypes.c_long),
    "float *": ctypes.POINTER(ctypes.c_float), "double *": ctypes.POINTER(ctypes.c_double),
}


def c_fields(c_name: str, **types) -> list:
    """The _fields_ of the mirror of C struct c_name, in C's order, each
    field of the type C gives it; `types` names the type of each field C
    cannot describe (field=ctype; a Python keyword gets a trailing
    underscore: in_=...), and may narrow one it can (a void * that points
    to a known struct)."""
    out, offset, kind, i = [], ctypes.c_long(), ctypes.c_char_p(), 0
    while True:
        name = _field_at(c_name.encode(), i, ctypes.byref(offset), ctypes.byref(kind))
        if name is None:
            break
        field = name.decode() + ("_" if keyword.iskeyword(name.decode()) else "")
        c_type = (kind.value or b"").decode()
        ctype = types.pop(field, None) or _KINDS.get(c_type)
        if ctype is None:
            raise NativeError(f"{c_name}.{field}: the mirror must name the ctypes type of "
                              f"this {c_type or 'array, struct or function pointer'}")
        out.append((field, ctype))
        i += 1
    if not out or types:
        raise NativeError(f"{c_name}: the library describes no field "
                          f"{', '.join(types) or '(no struct of that name)'}: the library "
                          "and the Python package are from different builds (reinstall "
                          "hwtune)")
    return out


class CStruct(ctypes.Structure):
    """Base of every struct mirror; subclasses set _c_name_ and _fields_
    (named as the C fields; a trailing underscore escapes a Python keyword)."""

    _c_name_ = ""
    mirrors: List[type] = []  # every subclass with a _c_name_, in definition order

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.__dict__.get("_c_name_"):
            CStruct.mirrors.append(cls)


def mirror(c_name: str, **types) -> type:
    """The CStruct mirror of C struct c_name, named after it, with the fields
    C declares (c_fields: `types` names those C cannot describe)."""
    return type(CStruct)(c_name, (CStruct,),
                         {"_c_name_": c_name, "_fields_": c_fields(c_name, **types)})


def layout_mismatches(cls) -> List[str]:
    """How the mirror cls differs from its C struct (empty: identical size,
    fields and offsets)."""
    name = cls._c_name_.encode()
    c_size = _sizeof(name)
    if c_size < 0:
        return [f"{cls._c_name_}: the library does not describe this struct"]
    out = []
    if ctypes.sizeof(cls) != c_size:
        out.append(f"{cls._c_name_}: ctypes size {ctypes.sizeof(cls)} != C size {c_size}")
    fields = [f[0] for f in cls._fields_]
    if len(fields) != _n_fields(name):
        out.append(f"{cls._c_name_}: {len(fields)} fields mirrored, C has {_n_fields(name)}")
    for field in fields:
        c_off = _offsetof(name, field.rstrip("_").encode())
        py_off = getattr(cls, field).offset
        if c_off != py_off:
            out.append(f"{cls._c_name_}.{field}: offset {py_off} here, "
                       f"{'missing' if c_off < 0 else c_off} in C")
    return out
