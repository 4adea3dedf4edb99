"""Every ctypes signature the bindings declare (hwtune.native: sig() sets a
function's restype and argtypes) matches its HWT_API prototype in the C
headers: the same number of arguments, and each type the one C declares
(int as c_int, size_t as c_size_t, a pointer as a pointer: a mirrored
struct's pointer names that struct, a scalar's pointer that scalar). A
binding that drifts from its header passes garbage to C without an error;
this test fails instead. The headers are parsed from the source tree."""

import ctypes
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADERS = [ROOT / "engine" / "include", ROOT / "kernels" / "include"]

# C scalar types and the ctypes types that are the same type on this ABI.
SCALARS = {
    "int": {ctypes.c_int}, "unsigned": {ctypes.c_uint}, "unsigned int": {ctypes.c_uint},
    "long": {ctypes.c_long}, "unsigned long": {ctypes.c_ulong},
    "long long": {ctypes.c_longlong}, "unsigned long long": {ctypes.c_ulonglong},
    "size_t": {ctypes.c_size_t}, "double": {ctypes.c_double}, "float": {ctypes.c_float},
    "int64_t": {ctypes.c_int64}, "uint64_t": {ctypes.c_uint64},
    "int32_t": {ctypes.c_int32}, "uint32_t": {ctypes.c_uint32},
    "int8_t": {ctypes.c_int8}, "uint8_t": {ctypes.c_uint8}, "uint16_t": {ctypes.c_uint16},
    "char": {ctypes.c_char}, "_Bool": {ctypes.c_bool}, "bool": {ctypes.c_bool},
}
_PROTO = re.compile(r"HWT_API\s+([^;{]*?)\b(hwt_\w+)\s*\(([^)]*)\)\s*;", re.S)


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def _param_type(param: str):
    """(base, depth) of one parameter, its name dropped."""
    param = re.sub(r"\[[^\]]*\]", "*", param)  # int x[4] is a pointer
    stars = param.count("*")
    words = param.replace("*", " ").replace("const", " ").replace("restrict", " ").split()
    if stars == 0 and len(words) > 1 and words[-1] not in ("int", "long", "char", "double",
                                                           "float", "unsigned"):
        words = words[:-1]   # the name
    elif stars and len(words) > 1:
        # "T *name": the name follows the last star when there is one
        after = param.rsplit("*", 1)[1].split()
        if after:
            words = words[:-1]
    return " ".join(words), stars


def prototypes():
    """name -> (return (base, depth), [(base, depth) per argument])."""
    out = {}
    for folder in HEADERS:
        for h in sorted(folder.rglob("*.h")):
            text = _strip_comments(h.read_text(encoding="utf-8"))
            for ret, name, params in _PROTO.findall(text):
                ret = " ".join(ret.replace("static", " ").replace("inline", " ").split())
                rbase = " ".join(ret.replace("*", " ").replace("const", " ").split())
                args = [] if params.strip() in ("", "void") else \
                    [_param_type(p) for p in params.split(",")]
                out[name] = ((rbase, ret.count("*")), args, h.relative_to(ROOT).as_posix())
    return out


def declared():
    """name -> ctypes function, for every function some binding gave a
    signature (argtypes set), after importing every hwtune.native module."""
    import hwtune.native as pkg
    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"hwtune.native.{mod.name}")
    from hwtune.native._lib import lib
    return {name: fn for name, fn in vars(lib).items()
            if name.startswith("hwt_") and getattr(fn, "argtypes", None) is not None}


def _name(py_type) -> str:
    return getattr(py_type, "__name__", str(py_type))


def _mismatch(c_type, py_type, what: str):
    """Why py_type is not C's (base, depth); None when it is."""
    base, depth = c_type
    if depth == 0:
        if base == "void":
            return None if py_type is None else f"{what}: C void, ctypes {py_type}"
        if base in SCALARS:
            ok = any(py_type is t for t in SCALARS[base])
            return None if ok else f"{what}: C {base}, ctypes {_name(py_type)}"
        if base.startswith(("hwt_", "enum")) and py_type is ctypes.c_int:
            return None  # a C enum (hwt_status, hwt_isa ...) passed as int
        if py_type is not None and getattr(py_type, "_c_name_", None) == base:
            return None  # a struct by value, mirrored
        if base.startswith("hwt_") and base.endswith("_fn"):
            return None if py_type is not None else f"{what}: C {base}, ctypes None"
        return f"{what}: C {base}, ctypes {_name(py_type)}"
    # pointers
    if py_type is None:
        return f"{what}: C {base}{'*' * depth}, ctypes None"
    if py_type is ctypes.c_void_p:
        return None
    if py_type is ctypes.c_char_p:
        return None if (base == "char" and depth == 1) else \
            f"{what}: C {base}{'*' * depth}, ctypes c_char_p"
    target = getattr(py_type, "_type_", None)
    if target is None or not isinstance(target, type):
        return f"{what}: C {base}{'*' * depth}, ctypes {_name(py_type)}"
    if depth > 1:
        return _mismatch((base, depth - 1), target, what)
    if base == "void":
        return None  # void * taken as a typed pointer
    if base in SCALARS:
        return None if target in SCALARS[base] else \
            f"{what}: C {base}*, ctypes POINTER({target.__name__})"
    c_name = getattr(target, "_c_name_", None)
    if c_name is not None:
        return None if c_name == base else f"{what}: C {base}*, ctypes POINTER({c_name})"
    if base.startswith("hwt_") and issubclass(target, ctypes.Structure):
        return None  # an opaque handle's own Structure
    if base.startswith("hwt_") and target is ctypes.c_int:
        return f"{what}: C {base}*, ctypes POINTER(c_int)" if not base.endswith(
            ("status", "isa", "_t")) else None
    return f"{what}: C {base}*, ctypes POINTER({target.__name__})"


PROTOS = prototypes()


def test_the_headers_and_the_bindings_are_read():
    # A wrong root, pattern or import would make the tests below pass on nothing.
    assert len(PROTOS) > 150 and "hwt_conv_knobs" in PROTOS and "hwt_now" in PROTOS
    assert len(declared()) > 100 and "hwt_conv_knobs" in declared()


def test_every_binding_names_a_prototype():
    missing = sorted(set(declared()) - set(PROTOS))
    assert not missing, ("bound in hwtune.native but no HWT_API prototype in the headers: "
                         + ", ".join(missing))


def test_every_signature_matches_its_prototype():
    bad = []
    for name, fn in sorted(declared().items()):
        if name not in PROTOS:
            continue
        (ret, args, header) = PROTOS[name]
        where = f"{name} ({header})"
        if len(fn.argtypes) != len(args):
            bad.append(f"{where}: {len(args)} arguments in C, {len(fn.argtypes)} bound")
            continue
        why = _mismatch(ret, fn.restype, f"{where} returns")
        if why:
            bad.append(why)
        for i, (c, py) in enumerate(zip(args, fn.argtypes)):
            why = _mismatch(c, py, f"{where} argument {i + 1}")
            if why:
                bad.append(why)
    assert not bad, "ctypes signatures differ from the C prototypes:\n" + "\n".join(bad)


@pytest.mark.parametrize("c_type,py_type,ok", [
    (("int", 0), ctypes.c_int, True),
    (("int", 0), ctypes.c_long, False),
    (("size_t", 0), ctypes.c_size_t, True),
    (("double", 1), ctypes.POINTER(ctypes.c_double), True),
    (("double", 1), ctypes.POINTER(ctypes.c_float), False),
    (("char", 1), ctypes.c_char_p, True),
    (("float", 1), ctypes.c_char_p, False),
    (("void", 0), None, True),
    (("int", 0), None, False),
    (("float", 1), ctypes.c_void_p, True),
])
def test_the_comparison_can_fail(c_type, py_type, ok):
    assert (_mismatch(c_type, py_type, "f") is None) is ok
