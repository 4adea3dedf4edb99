"""Binding for hwtune/graph.h: the engine's graph IR, built call by call
(hwtune.engine.lower drives it from a validated model)."""

import ctypes
from typing import Dict, Sequence

from hwtune.errors import EngineGraphError
from hwtune.native._lib import STATUS, enum_names, lib, sig, status_error
from hwtune.native.handle import Handle, c_getter

TENSOR_KINDS = enum_names("hwt_tensor_kind")  # "input" -> 0, ...
_ATTR = enum_names("hwt_attr_kind")           # "none", "ints", "floats"
MAX_DIMS = 8  # HWT_GRAPH_MAX_DIMS

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_i64_p = ctypes.POINTER(ctypes.c_int64)
_c_dbl_p = ctypes.POINTER(ctypes.c_double)
_vp, _ci, _cs, _sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t

sig("hwt_graph_create", _vp)
sig("hwt_graph_destroy", None, _vp)
sig("hwt_graph_add_tensor", _ci, _vp, _cs, _ci, _c_i64_p, _ci)
sig("hwt_graph_add_op", _ci, _vp, _cs, _cs, _ci, _c_int_p, _ci, _c_int_p)
sig("hwt_graph_op_set_ints", _ci, _vp, _ci, _cs, _ci, _c_i64_p)
sig("hwt_graph_op_set_floats", _ci, _vp, _ci, _cs, _ci, _c_dbl_p)
sig("hwt_graph_op_attr_kind", _ci, _vp, _ci, _cs)
sig("hwt_graph_op_get_ints", _ci, _vp, _ci, _cs, _c_i64_p, _ci)
sig("hwt_graph_op_get_floats", _ci, _vp, _ci, _cs, _c_dbl_p, _ci)
sig("hwt_graph_op_set_cost", _ci, _vp, _ci, ctypes.c_double)
sig("hwt_graph_op_set_work", _ci, _vp, _ci, ctypes.c_double, ctypes.c_double)
sig("hwt_graph_validate", _ci, _vp, _cs, _sz)
sig("hwt_graph_error", _cs, _vp)
sig("hwt_graph_n_ops", _ci, _vp)
sig("hwt_graph_n_tensors", _ci, _vp)


def _ids(values: Sequence[int]):
    return (ctypes.c_int * max(len(values), 1))(*values)


class NativeGraph(Handle):
    """A C graph under construction. Ids are assigned in call order."""

    _destroy, _error, _what, _usage = "hwt_graph_destroy", "hwt_graph_error", "graph", \
        EngineGraphError

    def __init__(self):
        h = lib.hwt_graph_create()
        if not h:
            raise status_error(STATUS["out of memory"], what="cannot create a graph")
        self._adopt(h)
        self.tensor_ids: Dict[str, int] = {}
        self.op_ids: Dict[str, int] = {}

    def add_tensor(self, name: str, shape: Sequence[int], kind: str) -> int:
        if kind not in TENSOR_KINDS:
            raise EngineGraphError(f'tensor "{name}": unknown kind "{kind}" '
                                   f"(one of: {', '.join(TENSOR_KINDS)})")
        dims = (ctypes.c_int64 * max(len(shape), 1))(*[int(d) for d in shape])
        tid = self._check(lib.hwt_graph_add_tensor(self.handle, name.encode(), len(shape),
                                                   dims, TENSOR_KINDS[kind]))
        self.tensor_ids[name] = tid
        return tid

    def add_op(self, name: str, op_type: str, inputs: Sequence[int],
               outputs: Sequence[int]) -> int:
        oid = self._check(lib.hwt_graph_add_op(self.handle, name.encode(), op_type.encode(),
                                               len(inputs), _ids(inputs), len(outputs),
                                               _ids(outputs)))
        self.op_ids[name] = oid
        return oid

    def set_ints(self, op: int, key: str, values: Sequence[int]) -> None:
        arr = (ctypes.c_int64 * max(len(values), 1))(*[int(v) for v in values])
        self._check(lib.hwt_graph_op_set_ints(self.handle, op, key.encode(), len(values), arr))

    def set_floats(self, op: int, key: str, values: Sequence[float]) -> None:
        arr = (ctypes.c_double * max(len(values), 1))(*[float(v) for v in values])
        self._check(lib.hwt_graph_op_set_floats(self.handle, op, key.encode(), len(values), arr))

    def get_attr(self, op: int, key: str):
        """The attribute's values as a list of int or float; None if absent."""
        kind = lib.hwt_graph_op_attr_kind(self.handle, op, key.encode())
        if kind == _ATTR["none"]:
            return None
        get, ctype = ((lib.hwt_graph_op_get_ints, ctypes.c_int64) if kind == _ATTR["ints"]
                      else (lib.hwt_graph_op_get_floats, ctypes.c_double))
        n = self._check(get(self.handle, op, key.encode(), None, 0))
        buf = (ctype * max(n, 1))()
        get(self.handle, op, key.encode(), buf, n)
        return list(buf[:n])

    def set_cost(self, op: int, seconds: float) -> None:
        self._check(lib.hwt_graph_op_set_cost(self.handle, op, float(seconds)))

    def set_work(self, op: int, flops: float, nbytes: float) -> None:
        self._check(lib.hwt_graph_op_set_work(self.handle, op, float(flops), float(nbytes)))

    n_ops = c_getter("hwt_graph_n_ops")
    n_tensors = c_getter("hwt_graph_n_tensors")

    def validate(self) -> None:
        err = ctypes.create_string_buffer(512)
        if lib.hwt_graph_validate(self.handle, err, len(err)) != 0:
            raise EngineGraphError(err.value.decode(errors="replace"))
