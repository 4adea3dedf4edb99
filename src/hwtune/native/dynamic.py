"""Binding for hwtune/dynamic.h: per-sample input graphs (Samples) and the
Cavs-style executor of a vertex function over them (DynExecutor).

hwtune.dynamic builds the vertex function and its roles from a model; this
module only moves them across the C boundary and checks statuses."""

import ctypes
import os
from typing import Dict, List, Sequence

import numpy as np

from hwtune.errors import UsageError
from hwtune.native._lib import enum_names, lib, sig, status_error
from hwtune.native.abi import mirror
from hwtune.native.handle import Handle, c_getter
from hwtune.native.ops import aligned_copy

INPUTS = enum_names("hwt_dyn_input")      # "none", "tokens", "features"
POLICIES = enum_names("hwt_dyn_policy")   # "batched", "by-depth", "serial"
ROLES = enum_names("hwt_dyn_role_kind")   # "op", "param", "vertex_input", ...
AT = enum_names("hwt_dyn_at")             # "root", "every", "last"
MAX_CHUNK = 4096                          # HWT_DYN_MAX_CHUNK


class SamplesError(UsageError):
    """An input-graph file that cannot be read: the message starts with the
    line of the problem."""


class DynamicError(UsageError):
    """The vertex function or the executor's config was refused."""


_c_i32_p = ctypes.POINTER(ctypes.c_int32)
_c_i64_p = ctypes.POINTER(ctypes.c_int64)
_c_dbl_p = ctypes.POINTER(ctypes.c_double)
_f_p = ctypes.POINTER(ctypes.c_float)
_vp, _ci, _cs, _sz, _i64 = (ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                            ctypes.c_int64)


SamplesOptions = mirror("hwt_samples_options")
Role = mirror("hwt_dyn_role")
_Fn = mirror("hwt_dyn_fn", g=_vp, roles=ctypes.POINTER(Role))
DynConfig = mirror("hwt_dyn_config")


sig("hwt_samples_options_init", None, ctypes.POINTER(SamplesOptions))
sig("hwt_samples_read", _ci, _cs, ctypes.POINTER(SamplesOptions), ctypes.POINTER(_vp), _cs, _sz)
sig("hwt_samples_parse", _ci, _cs, _sz, ctypes.POINTER(SamplesOptions), ctypes.POINTER(_vp),
    _cs, _sz)
sig("hwt_samples_destroy", None, _vp)
for _name in ("hwt_samples_count", "hwt_samples_n_vertices", "hwt_samples_n_edges"):
    sig(_name, _i64, _vp)
sig("hwt_samples_input", _ci, _vp)
sig("hwt_samples_feature_width", _ci, _vp)
sig("hwt_samples_vertex_offsets", _c_i64_p, _vp)
sig("hwt_samples_child_offsets", _c_i64_p, _vp)
sig("hwt_samples_children", _c_i32_p, _vp)
sig("hwt_samples_tokens", _c_i32_p, _vp)
sig("hwt_samples_features", _f_p, _vp)
sig("hwt_samples_lines", _c_i64_p, _vp)

sig("hwt_dyn_config_init", None, ctypes.POINTER(DynConfig))
sig("hwt_dyn_n_buckets", _ci, _ci)
sig("hwt_dyn_create", _ci, ctypes.POINTER(_Fn), ctypes.POINTER(DynConfig), ctypes.POINTER(_vp),
    _cs, _sz)
sig("hwt_dyn_destroy", None, _vp)
sig("hwt_dyn_error", _cs, _vp)
sig("hwt_dyn_bind", _ci, _vp, _ci, _f_p)
sig("hwt_dyn_prepare", _ci, _vp, _vp)
sig("hwt_dyn_run", _ci, _vp)
sig("hwt_dyn_readout_rows", _i64, _vp, _ci)
sig("hwt_dyn_readout", _f_p, _vp, _ci, _ci)
sig("hwt_dyn_keep_states", _ci, _vp, _ci)
sig("hwt_dyn_states", _f_p, _vp, _ci)
sig("hwt_dyn_profile", _ci, _vp, _ci)
sig("hwt_dyn_op_calls", _ci, _vp, _ci, _ci, _c_i64_p, _c_dbl_p)
sig("hwt_dyn_groups", _ci, _vp, _c_i64_p, _c_i64_p)
sig("hwt_dyn_record", _ci, _vp, _ci)
sig("hwt_dyn_eval_count", _c_i32_p, _vp)
sig("hwt_dyn_eval_group", _c_i32_p, _vp)


def _view(ptr, n: int, dtype) -> np.ndarray:
    """A copy of n elements at ptr (empty when n is 0 or ptr NULL)."""
    if n <= 0 or not ptr:
        return np.zeros(0, dtype)
    return np.ctypeslib.as_array(ptr, shape=(n,)).astype(dtype, copy=True)


def samples_options(input: str = "none", vocab: int = 0, feature_width: int = 0,
                    arity: int = 0, **limits) -> SamplesOptions:
    """The reader's options: what each vertex carries, the arity, and
    limits (max_vertices, max_edges, max_samples, max_total_bytes) where
    given (the C defaults otherwise)."""
    if input not in INPUTS:
        raise UsageError(f"unknown vertex input {input!r}: one of {', '.join(INPUTS)}")
    o = SamplesOptions()
    lib.hwt_samples_options_init(ctypes.byref(o))
    o.input, o.vocab, o.feature_width, o.arity = INPUTS[input], int(vocab), \
        int(feature_width), int(arity)
    for key, value in limits.items():
        if value is not None:
            setattr(o, key, int(value))
    return o


class Samples(Handle):
    """A parsed, validated set of input graphs (one sample a JSONL line)."""

    _destroy, _what, _usage = "hwt_samples_destroy", "sample set", SamplesError

    def __init__(self, h: int, label: str):
        self._adopt(h)
        self.label = label

    @classmethod
    def read(cls, path: str, options: SamplesOptions) -> "Samples":
        return cls._make(lambda out, err: lib.hwt_samples_read(
            os.fsencode(path), ctypes.byref(options), ctypes.byref(out), err, len(err)),
            str(path))

    @classmethod
    def parse(cls, text: str, options: SamplesOptions, label: str = "<samples>") -> "Samples":
        data = text.encode()
        return cls._make(lambda out, err: lib.hwt_samples_parse(
            data, len(data), ctypes.byref(options), ctypes.byref(out), err, len(err)), label)

    @classmethod
    def _make(cls, call, label: str) -> "Samples":
        out, err = _vp(), ctypes.create_string_buffer(512)
        st = call(out, err)
        if st < 0:
            text = err.value.decode(errors="replace")
            raise status_error(st, f"{label}: {text}" if text else "", usage=SamplesError)
        return cls(out.value, label)

    count = c_getter("hwt_samples_count")
    n_vertices = c_getter("hwt_samples_n_vertices")
    n_edges = c_getter("hwt_samples_n_edges")
    feature_width = c_getter("hwt_samples_feature_width")

    @property
    def input(self) -> str:
        value = lib.hwt_samples_input(self.handle)
        return next(k for k, v in INPUTS.items() if v == value)

    def arrays(self) -> Dict[str, np.ndarray]:
        """Copies of the flat arrays (hwtune/dynamic.h): vertex_offsets,
        child_offsets, children (local indices), tokens, features, lines."""
        h, n, v, e = self.handle, self.count, self.n_vertices, self.n_edges
        w = self.feature_width
        feats = _view(lib.hwt_samples_features(h), v * w, np.float32)
        return {
            "vertex_offsets": _view(lib.hwt_samples_vertex_offsets(h), n + 1, np.int64),
            "child_offsets": _view(lib.hwt_samples_child_offsets(h), v + 1, np.int64),
            "children": _view(lib.hwt_samples_children(h), e, np.int64),
            "tokens": _view(lib.hwt_samples_tokens(h), v, np.int64),
            "features": feats.reshape(v, w) if w else np.zeros((v, 0), np.float32),
            "lines": _view(lib.hwt_samples_lines(h), n, np.int64),
        }


class DynExecutor(Handle):
    """One vertex function's executor (hwt_dyn): create, bind params,
    prepare for a sample set, run. `graph` is the NativeGraph of F (kept
    alive here), roles one (kind, a, b) per tensor id."""

    _destroy, _error, _what, _usage = "hwt_dyn_destroy", "hwt_dyn_error", "dynamic executor", \
        DynamicError

    def __init__(self, graph, roles: Sequence[tuple], state_update: Sequence[int],
                 embedding: int, readouts: Sequence[tuple], config: Dict[str, object]):
        self._graph = graph  # F's C graph must outlive the executor
        nt = len(roles)
        self._roles = (Role * max(nt, 1))(*[Role(ROLES[k], a, b) for k, a, b in roles])
        self._update = (ctypes.c_int * max(len(state_update), 1))(*state_update)
        self._at = (ctypes.c_int * max(len(readouts), 1))(*[AT[at] for at, _ in readouts])
        offs = [0]
        outs: List[int] = []
        for _, tensors in readouts:
            outs += list(tensors)
            offs.append(len(outs))
        self._ro_off = (ctypes.c_int * len(offs))(*offs)
        self._ro_out = (ctypes.c_int * max(len(outs), 1))(*outs)
        self._out_widths = []
        fn = _Fn()
        fn.g = graph.handle
        fn.roles = self._roles
        fn.n_states = len(state_update)
        fn.state_update = self._update
        fn.embedding = embedding
        fn.n_readouts = len(readouts)
        fn.readout_at = self._at
        fn.readout_offsets = self._ro_off
        fn.readout_outputs = self._ro_out
        self._fn = fn
        cfg = DynConfig()
        lib.hwt_dyn_config_init(ctypes.byref(cfg))
        for key, value in config.items():
            if value is None:
                continue
            if key == "policy":
                if value not in POLICIES:
                    raise DynamicError(f"unknown policy {value!r}: one of "
                                       f"{', '.join(POLICIES)}")
                value = POLICIES[value]
            elif key == "pin":
                value = int(bool(value))
            elif key == "op_threads":  # copied by hwt_dyn_create
                self._op_threads = (ctypes.c_int * max(len(value), 1))(*value)
                cfg.op_threads = self._op_threads
                continue
            setattr(cfg, key, int(value))
        self.config = cfg
        out, err = _vp(), ctypes.create_string_buffer(512)
        st = lib.hwt_dyn_create(ctypes.byref(fn), ctypes.byref(cfg), ctypes.byref(out), err,
                                len(err))
        if st < 0:
            raise status_error(st, err.value.decode(errors="replace"), usage=DynamicError)
        self._adopt(out.value)
        self._needs(self._graph)
        self._params: Dict[int, np.ndarray] = {}
        self._samples = None
        self.n_readouts = len(readouts)
        self._ro_counts = [len(t) for _, t in readouts]

    def bind(self, tensor: int, values: np.ndarray) -> None:
        arr = aligned_copy(values)
        self._params[tensor] = arr  # the C side keeps the pointer
        self._check(lib.hwt_dyn_bind(self.handle, tensor, arr.ctypes.data_as(_f_p)),
                    "bind")

    def prepare(self, samples: Samples, *, keep_states: bool = False, record: bool = False,
                profile: bool = False) -> None:
        self._check(lib.hwt_dyn_keep_states(self.handle, int(keep_states)))
        self._check(lib.hwt_dyn_record(self.handle, int(record)))
        self._check(lib.hwt_dyn_profile(self.handle, int(profile)))
        self._samples = samples  # must outlive the prepared executor
        self._check(lib.hwt_dyn_prepare(self.handle, samples.handle))

    def run(self) -> None:
        self._check(lib.hwt_dyn_run(self.handle))

    def readout(self, r: int, k: int, width: int) -> np.ndarray:
        rows = lib.hwt_dyn_readout_rows(self.handle, r)
        if rows < 0:
            raise DynamicError(f"no readout {r}")
        arr = _view(lib.hwt_dyn_readout(self.handle, r, k), rows * width, np.float32)
        return arr.reshape(rows, width)

    def states(self, s: int, width: int) -> np.ndarray:
        v = self._samples.n_vertices if self._samples is not None else 0
        return _view(lib.hwt_dyn_states(self.handle, s), v * width,
                     np.float32).reshape(v, width)

    def groups(self) -> tuple:
        g, r = ctypes.c_int64(), ctypes.c_int64()
        self._check(lib.hwt_dyn_groups(self.handle, ctypes.byref(g), ctypes.byref(r)))
        return g.value, r.value

    def evaluations(self) -> tuple:
        """(eval_count, eval_group) per vertex, after a run with record on."""
        v = self._samples.n_vertices
        return (_view(lib.hwt_dyn_eval_count(self.handle), v, np.int64),
                _view(lib.hwt_dyn_eval_group(self.handle), v, np.int64))

    def op_calls(self, op: int, n_buckets: int) -> List[tuple]:
        """(calls, seconds) of op at each bucket (2^j rows)."""
        out = []
        for j in range(n_buckets):
            c, s = ctypes.c_int64(), ctypes.c_double()
            self._check(lib.hwt_dyn_op_calls(self.handle, op, j, ctypes.byref(c),
                                             ctypes.byref(s)))
            out.append((c.value, s.value))
        return out


def n_buckets(chunk: int) -> int:
    return lib.hwt_dyn_n_buckets(int(chunk))


def default_chunk() -> int:
    """The chunk hwt_dyn_config_init gives (most rows per op call)."""
    cfg = DynConfig()
    lib.hwt_dyn_config_init(ctypes.byref(cfg))
    return int(cfg.chunk)
