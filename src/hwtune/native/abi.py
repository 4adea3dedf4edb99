"""ctypes mirrors of C structs, checked against the compiler's layout.

Every mirror derives from CStruct and names its C type in _c_name_; the
library describes each such type (hwtune/abi.h: size, field offsets), and
tests/test_native_abi.py compares every registered mirror with it, so a
field added, removed or reordered on one side fails a test instead of
corrupting memory."""

import ctypes
from typing import List

from hwtune.native._lib import sig

_sizeof = sig("hwt_abi_sizeof", ctypes.c_long, ctypes.c_char_p)
_offsetof = sig("hwt_abi_offsetof", ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p)
_n_fields = sig("hwt_abi_n_fields", ctypes.c_int, ctypes.c_char_p)


class CStruct(ctypes.Structure):
    """Base of every struct mirror; subclasses set _c_name_ and _fields_
    (named as the C fields; a trailing underscore escapes a Python keyword)."""

    _c_name_ = ""
    mirrors: List[type] = []  # every subclass with a _c_name_, in definition order

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.__dict__.get("_c_name_"):
            CStruct.mirrors.append(cls)


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
