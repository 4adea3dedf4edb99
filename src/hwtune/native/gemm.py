"""Binding for hwtune/gemm.h: plan an FP32 GEMM and run its thread shares.

`gemm()` runs every share of the partition one after another in this thread:
that exercises the partition exactly as a pool would (shares are disjoint and
need no synchronisation); the parallel pool lives in hwtune.native.threads.
`PackedGemm` packs a constant B (weights) once (hwt_gemm_pack_b) and runs each
call without packing B (hwt_gemm_run_part_packed).
"""

import ctypes
from typing import Optional

import numpy as np

from hwtune.errors import UsageError
from hwtune.native._lib import check, lib, sig
from hwtune.native.abi import mirror
from hwtune.native.isa import ISA_NAMES, resolve_isa

_c_float_p = ctypes.POINTER(ctypes.c_float)

# One zero-copy guard: workspace alignment promised by gemm.h.
_WS_ALIGN = 64
# Partition contract: run_part is exercised up to this many shares.
MAX_THREADS = 256


# hwt_gemm_desc (row-major; leading dimensions in elements).
GemmDesc = mirror("hwt_gemm_desc")
# hwt_gemm_plan, as filled by hwt_gemm_plan_make.
GemmPlan = mirror("hwt_gemm_plan", d=GemmDesc)
# hwt_cache_sizes: bytes (0 = unknown); l3 is shared by l3_cpus CPUs.
CacheSizes = mirror("hwt_cache_sizes")


sig("hwt_cache_sizes_host", None, ctypes.POINTER(CacheSizes))
sig("hwt_gemm_plan_make_for", ctypes.c_int, ctypes.POINTER(GemmDesc), ctypes.c_int, ctypes.c_int,
    ctypes.POINTER(CacheSizes), ctypes.POINTER(GemmPlan))
sig("hwt_gemm_plan_make", ctypes.c_int, ctypes.POINTER(GemmDesc), ctypes.c_int, ctypes.c_int,
    ctypes.POINTER(GemmPlan))
_run_part = sig("hwt_gemm_run_part", None, ctypes.POINTER(GemmPlan), _c_float_p, _c_float_p,
                _c_float_p, _c_float_p, _c_float_p, ctypes.c_int, ctypes.c_int)
sig("hwt_gemm_pack_b", ctypes.c_int, ctypes.POINTER(GemmPlan), _c_float_p, _c_float_p)
sig("hwt_gemm_run_part_packed", None, *_run_part.argtypes)
sig("hwt_gemm_ref", ctypes.c_int, ctypes.POINTER(GemmDesc), _c_float_p, _c_float_p, _c_float_p,
    _c_float_p)


def _check_dims(M: int, K: int, N: int, nth: int) -> None:
    for name, v in (("M", M), ("K", K), ("N", N)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise UsageError(f"GEMM dimension {name} must be an integer >= 0, got {v!r}")
        if v >= 2**31:
            raise UsageError(f"GEMM dimension {name}={v} does not fit the C int API")
    if isinstance(nth, bool) or not isinstance(nth, (int, np.integer)) or not 1 <= nth <= MAX_THREADS:
        raise UsageError(f"nth must be an integer in 1..{MAX_THREADS}, got {nth!r}")


def make_desc(M, K, N, *, trans_a=False, trans_b=False, beta=0.0, lda=None, ldb=None,
              ldc=None) -> GemmDesc:
    """A descriptor for C[M,N] = op(A) op(B) + beta*C; tight leading dims by default."""
    _check_dims(M, K, N, 1)
    return GemmDesc(
        int(M), int(N), int(K), int(bool(trans_a)), int(bool(trans_b)),
        int(lda if lda is not None else max(1, M if trans_a else K)),
        int(ldb if ldb is not None else max(1, K if trans_b else N)),
        int(ldc if ldc is not None else max(1, N)),
        float(beta),
    )


def host_caches() -> dict:
    """The cache sizes the C library blocks for on this host (bytes, 0 if
    unknown): l1d, l2, l3 and the CPUs sharing one L3."""
    c = CacheSizes()
    lib.hwt_cache_sizes_host(ctypes.byref(c))
    return {"l1d": c.l1d, "l2": c.l2, "l3": c.l3, "l3_cpus": c.l3_cpus}


def _cache_struct(caches: Optional[dict]):
    if caches is None:
        return None
    bad = set(caches) - {"l1d", "l2", "l3", "l3_cpus"}
    if bad:
        raise UsageError(f"unknown cache field(s) {sorted(bad)}: use l1d, l2, l3, l3_cpus")
    vals = {k: caches.get(k) or 0 for k in ("l1d", "l2", "l3", "l3_cpus")}
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0
           for v in vals.values()):
        raise UsageError(f"cache sizes must be integers >= 0, got {caches!r}")
    return ctypes.byref(CacheSizes(int(vals["l1d"]), int(vals["l2"]), int(vals["l3"]),
                                   int(vals["l3_cpus"])))


def make_plan(desc: GemmDesc, isa: Optional[str] = None, nth: int = 1,
              caches: Optional[dict] = None) -> GemmPlan:
    """hwt_gemm_plan_make for a descriptor (for bindings that drive run_part);
    caches (host_caches()'s keys) blocks for another machine's caches."""
    _check_dims(desc.M, desc.K, desc.N, nth)
    idx = resolve_isa(isa)
    out = GemmPlan()
    check(lib.hwt_gemm_plan_make_for(ctypes.byref(desc), idx, int(nth), _cache_struct(caches),
                                     ctypes.byref(out)),
          f"gemm plan [{desc.M},{desc.K}]x[{desc.K},{desc.N}] isa={ISA_NAMES[idx]} nth={nth}")
    return out


def _plan_dict(p: GemmPlan) -> dict:
    return {"mr": p.mr, "nr": p.nr, "mc": p.mc, "kc": p.kc, "nc": p.nc,
            "ws_floats": int(p.ws_floats), "packed_b_floats": int(p.packed_b_floats),
            "isa": ISA_NAMES[p.isa], "nth": p.nth}


def plan(M: int, K: int, N: int, *, trans_a: bool = False, trans_b: bool = False,
         beta: float = 0.0, isa: Optional[str] = None, nth: int = 1,
         caches: Optional[dict] = None) -> dict:
    """Blocking and workspace the C library chose for this shape, ISA and nth
    (for this host's caches, or the given ones)."""
    _check_dims(M, K, N, nth)
    desc = make_desc(M, K, N, trans_a=trans_a, trans_b=trans_b, beta=beta)
    return _plan_dict(make_plan(desc, isa, nth, caches))


def workspace(ws_floats: int) -> np.ndarray:
    """A float32 buffer of ws_floats elements whose data is 64-byte aligned."""
    n = max(int(ws_floats), 1)
    raw = np.empty(n + _WS_ALIGN // 4, dtype=np.float32)
    off = (-raw.ctypes.data % _WS_ALIGN) // 4
    return raw[off:off + n]


def _ptr(a: Optional[np.ndarray]):
    return None if a is None else a.ctypes.data_as(_c_float_p)


def _as_f32_2d(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise UsageError(f"{name} must be a 2-D matrix, got shape {arr.shape}")
    if arr.dtype != np.float32:
        if not np.issubdtype(arr.dtype, np.number):
            raise UsageError(f"{name} must be numeric, got dtype {arr.dtype}")
        arr = arr.astype(np.float32)
    return np.ascontiguousarray(arr)


def _check_c_bias(M, N, beta, c, bias):
    if beta != 0.0 and c is None:
        raise UsageError("beta != 0 needs an input c to scale")
    if c is None:
        C = np.empty((M, N), dtype=np.float32)
    else:
        if not isinstance(c, np.ndarray) or c.dtype != np.float32 or c.shape != (M, N) \
                or not c.flags.c_contiguous or not c.flags.writeable:
            raise UsageError(f"c must be a writeable C-contiguous float32 array of shape "
                             f"({M}, {N}), got {getattr(c, 'shape', type(c).__name__)}")
        C = c
    bias_arr = None
    if bias is not None:
        bias_arr = np.ascontiguousarray(np.asarray(bias, dtype=np.float32))
        if bias_arr.shape != (N,):
            raise UsageError(f"bias must have shape ({N},), got {bias_arr.shape}")
    return C, bias_arr


def gemm(a, b, *, trans_a: bool = False, trans_b: bool = False, beta: float = 0.0,
         c: Optional[np.ndarray] = None, bias=None, isa: Optional[str] = None,
         nth: int = 1) -> np.ndarray:
    """C = op(a) @ op(b) + beta*c (+ bias per column), float32, via every share
    of an nth-thread partition run in turn. If c is given (C-contiguous float32
    [M,N]) it is updated in place and returned."""
    A = _as_f32_2d(a, "a")
    B = _as_f32_2d(b, "b")
    M, K = (A.shape[1], A.shape[0]) if trans_a else A.shape
    Kb, N = (B.shape[1], B.shape[0]) if trans_b else B.shape
    if K != Kb:
        raise UsageError(
            f"inner dimensions differ: op(a) is [{M},{K}] but op(b) is [{Kb},{N}]")
    C, bias_arr = _check_c_bias(M, N, beta, c, bias)
    desc = make_desc(M, K, N, trans_a=trans_a, trans_b=trans_b, beta=beta)
    p = make_plan(desc, isa, nth)
    ws = workspace(p.ws_floats)
    args = (ctypes.byref(p), _ptr(A), _ptr(B), _ptr(C), _ptr(bias_arr), _ptr(ws))
    for tid in range(int(nth)):
        lib.hwt_gemm_run_part(*args, tid, int(nth))
    return C


class PackedGemm:
    """C = op(a) @ B (+ beta*c, + bias) for a constant B (weights), packed once
    with hwt_gemm_pack_b for an [M,K]x[K,N] plan; every call then runs
    hwt_gemm_run_part_packed for each share, with no B packing."""

    def __init__(self, b, M: int, *, trans_a: bool = False, trans_b: bool = False,
                 beta: float = 0.0, isa: Optional[str] = None, nth: int = 1):
        B = _as_f32_2d(b, "b")
        K, N = (B.shape[1], B.shape[0]) if trans_b else B.shape
        self.trans_a = bool(trans_a)
        self.beta = float(beta)
        self.nth = int(nth) if not isinstance(nth, bool) else nth
        desc = make_desc(M, K, N, trans_a=trans_a, trans_b=trans_b, beta=beta)
        self.plan = make_plan(desc, isa, nth)
        self.M, self.K, self.N = int(M), int(K), int(N)
        self.packed = workspace(self.plan.packed_b_floats)
        check(lib.hwt_gemm_pack_b(ctypes.byref(self.plan), _ptr(B), _ptr(self.packed)),
              f"gemm pack_b [{K},{N}]")
        self._ws = workspace(self.plan.ws_floats)

    def __call__(self, a, *, c: Optional[np.ndarray] = None, bias=None) -> np.ndarray:
        A = _as_f32_2d(a, "a")
        want = (self.K, self.M) if self.trans_a else (self.M, self.K)
        if A.shape != want:
            raise UsageError(f"a must have shape {want} for this packed plan, got {A.shape}")
        C, bias_arr = _check_c_bias(self.M, self.N, self.beta, c, bias)
        args = (ctypes.byref(self.plan), _ptr(A), _ptr(self.packed), _ptr(C), _ptr(bias_arr),
                _ptr(self._ws))
        for tid in range(self.nth):
            lib.hwt_gemm_run_part_packed(*args, tid, self.nth)
        return C
