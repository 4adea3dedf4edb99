"""Pointwise (1x1) CONVs of MobileNetV2 / EfficientNet-B0 at batch 1, one
thread, interleaved in one process (thread CPU time, medians):

- conv: hwtune's NCHW CONV as the engine runs it (NCHW-gemm: weights packed
  once as the GEMM's A at plan time, + bias epilogue; on AVX-512 small
  images (7x7, 14x14) the NCHW[x]c template, kernels/conv/nchwc_body.c);
- gemm/A per run: the same GEMM, y = W . x, through hwt_gemm_run_part on the
  plain weights, which packs W in every call (what the 1x1 CONV did before
  its weights were packed once; no bias);
- ort: ONNX Runtime's Conv with bias, one intra-op thread;
- with --baseline-lib OTHER/libhwtune.so (another build, e.g. the main
  checkout's): that build's NCHW CONV through the same ctypes calls as
  `conv` (plan, pack weights, run_part), so the two builds differ only in
  their C code.

    python benchmarks/bench_pointwise.py [--reps 31] [--isa avx512] [--set resnet]
        [--shapes 256,1024,7 2048,512,7]
        [--baseline-lib /work/main/.venv/lib/python3.11/site-packages/hwtune/_lib/libhwtune.so]

Ratios are ort / hwtune (above 1.0 hwtune is faster). On a shared machine a
row decides little; the conv vs gemm/A-per-run column is the A/B.
"""

import argparse
import ctypes
import statistics

import numpy as np

from hwtune.measure import clock
from hwtune.native import gemm as G
from hwtune.native.conv import Conv2dPlan
from hwtune.native._lib import lib

# (C, K, H=W): MobileNetV2's expand / project 1x1 CONVs at 112..7, a few of
# EfficientNet-B0's (K >= 16, AVX2's least K for hwtune's NCHW 1x1 GEMM path).
SHAPES = [(24, 144, 56), (16, 96, 112), (32, 16, 112), (96, 24, 56), (144, 24, 56), (32, 192, 28), (192, 32, 28), (64, 384, 14),
          (384, 64, 14), (96, 576, 14), (576, 96, 14), (160, 960, 7), (960, 160, 7),
          (960, 320, 7), (320, 1280, 7), (672, 192, 7), (1152, 320, 7),
          # EfficientNet-B0's squeeze-excitation CONVs (1x1 images)
          (1152, 48, 1), (48, 1152, 1), (672, 32, 1)]
# --set resnet: the 1x1 CONVs of ResNet-50 / ResNeXt-50 (32x4d), each stage.
RESNET = [(64, 128, 56), (64, 256, 56), (128, 256, 56), (256, 128, 56), (256, 64, 56),
          (256, 256, 56), (256, 512, 28), (512, 256, 28), (128, 512, 28), (512, 512, 28),
          (512, 1024, 14), (1024, 512, 14), (256, 1024, 14), (1024, 256, 14),
          (1024, 2048, 7), (2048, 1024, 7), (512, 2048, 7), (2048, 512, 7)]


def ort_session(w, b, shape):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    K, C = w.shape[:2]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"])
    g = helper.make_graph([node], "pw", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def raw_conv(lib_, x, w, b, isa, shared=None):
    """A closure running one NCHW CONV through lib_'s C API, and its output.

    shared: a dict of the output and workspace both builds write (filled by
    the first call, reused by the next): with buffers of their own, the same
    build on both sides (--baseline-lib naming this build) read 0.98-1.23x
    on single shapes (Zen 3, 1 thread, 31 alternated samples), where the
    two copies of a 1-5 MB output compete for the caches in turn."""
    from hwtune.native.conv import LAYOUTS, _desc, _Plan
    from hwtune.native.isa import resolve_isa
    for name in ("hwt_conv_plan_make", "hwt_conv_pack_weights", "hwt_conv_run_part"):
        f = getattr(lib_, name)
        f.argtypes, f.restype = getattr(lib, name).argtypes, getattr(lib, name).restype
    d = _desc(x.shape, w.shape, 1, 0)
    plan = _Plan()
    assert lib_.hwt_conv_plan_make(ctypes.byref(d), LAYOUTS.index("NCHW"), None,
                                   resolve_isa(isa), 1, ctypes.byref(plan)) == 0
    wp = G.workspace(plan.w_floats)
    assert lib_.hwt_conv_pack_weights(ctypes.byref(plan), G._ptr(w), G._ptr(wp)) == 0
    shared = {} if shared is None else shared
    # Generously sized once, so a build whose plan needs a little more
    # workspace than the other's still shares it.
    if "ws" not in shared or shared["ws"].size < plan.ws_floats:
        shared["ws"] = G.workspace(max(plan.ws_floats * 2, 1 << 16))
        shared.setdefault("keep", []).append(shared["ws"])  # the other closure's, if replaced
    if "y" not in shared:
        shared["y"] = np.empty((1, w.shape[0], x.shape[2], x.shape[3]), np.float32)
    ws, y = shared["ws"], shared["y"]
    args = (ctypes.byref(plan), G._ptr(x), G._ptr(wp), G._ptr(b), G._ptr(y), G._ptr(ws), 0, 1)
    return (lambda: lib_.hwt_conv_run_part(*args)), y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--isa", default=None)
    ap.add_argument("--baseline-lib", default=None)
    ap.add_argument("--set", choices=("mobile", "resnet"), default="mobile",
                    help="mobile: MobileNetV2 / EfficientNet-B0 shapes; resnet: ResNet-50 / "
                         "ResNeXt-50's")
    ap.add_argument("--shapes", nargs="+", metavar="C,K,H", default=None,
                    help="these CONVs (C input channels, K output channels, H x H image) "
                         "instead of a --set")
    args = ap.parse_args()
    shapes = ([tuple(int(v) for v in s.split(",")) for s in args.shapes] if args.shapes else
              SHAPES if args.set == "mobile" else RESNET)
    base = ctypes.CDLL(args.baseline_lib) if args.baseline_lib else None
    rng = np.random.default_rng(0)
    print(f"{'C->K @HxW':>16} {'conv us':>9} {'gemm/A per run us':>18} {'ort us':>8} "
          f"{'ort/conv':>9} {'ort/gemm':>9}" + (f" {'base us':>8} {'base/conv':>9}"
                                                 if base else ""))
    for C, K, H in shapes:
        x = rng.standard_normal((1, C, H, H), dtype=np.float32)
        w = (rng.standard_normal((K, C, 1, 1)) / np.sqrt(C)).astype(np.float32)
        b = rng.standard_normal(K, dtype=np.float32)
        plan = G.make_plan(G.make_desc(K, C, H * H), args.isa, 1)
        ws = G.workspace(plan.ws_floats)
        w2 = np.ascontiguousarray(w.reshape(K, C))
        x2 = x.reshape(C, H * H)
        yg = np.empty((K, H * H), np.float32)
        gargs = (ctypes.byref(plan), G._ptr(w2), G._ptr(x2), G._ptr(yg), None, G._ptr(ws), 0, 1)
        sess = ort_session(w.copy(), b, list(x.shape))
        feeds = {"x": x}
        shared = {}
        run_new, y = raw_conv(lib, x, w, b, args.isa, shared)
        sides = {
            "conv": run_new,
            "gemm": lambda: lib.hwt_gemm_run_part(*gargs),
            "ort": lambda: sess.run(None, feeds),
        }
        if base is not None:
            sides["base"], y_base = raw_conv(base, x, w, b, args.isa, shared)
        ref = sess.run(None, feeds)[0]
        scale = float(np.abs(ref).max())
        for k in ("conv", "base"):
            if k in sides:
                sides[k]()
                err = float(np.abs((y if k == "conv" else y_base) - ref).max()) / scale
                assert err < 1e-4, (k, C, K, H, err)
        times = {k: [] for k in sides}
        for f in sides.values():
            f()
        # The order reverses every other repetition: in one fixed order each
        # side always ran after the same neighbour (the build under test right
        # after --baseline-lib, which had just read the same x; the baseline
        # after ORT), and rows whose code was identical in both builds read
        # base/conv 1.02-1.04 (Zen 3, 1 thread).
        order = list(sides.items())
        for r in range(args.reps):
            for k, f in (order if r % 2 == 0 else order[::-1]):
                times[k].append(clock.cpu_per_call(f, 1) * 1e6)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{f'{C}->{K} @{H}x{H}':>16} {med['conv']:9.1f} {med['gemm']:18.1f} "
              f"{med['ort']:8.1f} {med['ort'] / med['conv']:9.2f} "
              f"{med['ort'] / med['gemm']:9.2f}" +
              (f" {med['base']:8.1f} {med['base'] / med['conv']:9.2f}" if base else ""),
              flush=True)


if __name__ == "__main__":
    main()
