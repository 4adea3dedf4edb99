"""int8 benchmark (issue #43): hwtune's int8 path against ONNX Runtime's.

Run with the installed package:
    python benchmarks/bench_quant.py [--small] [--models resnet50,bert_base]
                                     [--threads 1,2] [--reps 7]

ResNet-50 is quantized with ONNX Runtime's own quantize_static (QDQ,
per-channel, u8 activations / s8 weights, a seeded calibration reader) and
BERT-base (sequence 128) with quantize_dynamic (DynamicQuantizeLinear +
MatMulInteger, s8 weights); both from benchmarks/zoo_models.py with seeded
weights (--small: the zoo's reduced sizes, for a quick check). Each model
is imported by hwtune and run on the C engine with the int8 GEMM's
AVX512-VNNI variant (where CPUID reports avx512_vnni) and its AVX2 variant
(HWTUNE_ISA-style isa=avx2), against an ORT session of the same quantized
file, at 1 and 2 threads; samples interleaved (bench_engine.interleaved),
medians. Every row first compares hwtune's output with ORT's own int8
output: within one quantisation step (dequantized outputs) or 1e-4 of the
output's scale (float outputs), else it says how far apart, and why when
the reason is known (docs/onnx.md: ORT's x86 QLinearAdd rounds with
fixed-point multipliers; one flipped residual sum compounds through the
later blocks).
Goal (issue #43): hwtune >= 1.0x ORT's int8 latency on a VNNI host.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

from bench_engine import interleaved  # noqa: E402 (benchmarks/ is sys.path[0])
from bench_load import load1, load_note  # noqa: E402
import zoo_models as Z  # noqa: E402

from hwtune.errors import HwtuneError
from hwtune.graph import load_model
from hwtune.native.isa import supported_isas
from hwtune.onnx.errors import OnnxImportError
from hwtune.onnx.importer import import_onnx

TOL = 1e-4
CALIBRATION_BATCHES = 4  # seeded; what ORT's examples use is a few dozen real images


def _quantize(name, small, d):
    from onnxruntime import quantization as Q
    built = Z.BY_NAME[name].build(small)
    src = Z.export(built, os.path.join(d, f"{name}.onnx"))
    dst = os.path.join(d, f"{name}_int8.onnx")
    if built.family == "cnn":
        rng = np.random.default_rng(0)
        batches = iter([{k: rng.standard_normal(v.shape).astype(np.float32)
                         for k, v in built.inputs.items()} for _ in range(CALIBRATION_BATCHES)])

        class Reader(Q.CalibrationDataReader):
            def get_next(self):
                return next(batches, None)
        Q.quantize_static(src, dst, Reader(), quant_format=Q.QuantFormat.QDQ, per_channel=True,
                          activation_type=Q.QuantType.QUInt8, weight_type=Q.QuantType.QInt8)
    else:
        Q.quantize_dynamic(src, dst, weight_type=Q.QuantType.QInt8)
    return dst, built


def _ort(path, threads, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, feeds)


def _step(path, output):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if output in n.output and n.op_type == "DequantizeLinear" and n.input[1] in inits:
            return float(inits[n.input[1]].max())
    return None


def _fp32_outputs(name, d, feeds):
    """The fp32 model's output on the same feeds (ORT on the exported file
    the quantized one was made from)."""
    return np.asarray(_ort(os.path.join(d, f"{name}.onnx"), 1, feeds)()[0])


def _vs_fp32(got, want, ref):
    """How far hwtune's and ORT's int8 outputs each are from the fp32
    model's (ref), relative to its scale: two int8 results that part by
    about the quantisation error itself are equally good approximations."""
    scale = max(float(np.abs(ref).max()), 1e-30)
    return (f"from fp32: hwtune {float(np.abs(got - ref).max()) / scale:.4f}, ORT int8 "
            f"{float(np.abs(want - ref).max()) / scale:.4f} of its scale)")



def bench(name, small, threads, reps, d):
    from hwtune.engine.runner import native_engine
    from hwtune.native.isa import ISA_NAMES
    path, built = _quantize(name, small, d)
    try:
        g = load_model(import_onnx(path, os.path.join(d, f"{name}.json")).model)
    except (OnnxImportError, HwtuneError) as exc:
        print(f"{name}: hwtune cannot import it in this build: {exc}")
        return
    feeds = {k: np.asarray(v) for k, v in built.inputs.items()}
    out = built.output_names[0]
    step = _step(path, out)
    fp32 = _fp32_outputs(name, d, feeds).reshape(-1)
    isas = [i for i in ("avx512", "avx2") if i in supported_isas()]
    print(f"\n{name}{' (small)' if small else ''}: ms per inference (median of {reps}, "
          "interleaved; the load is measured per thread count)")
    for t in threads:
        fns, labels, ok = [_ort(path, t, feeds)], ["ORT int8"], ["-"]
        want = np.asarray(fns[0]()[0])
        for isa in isas:
            eng = native_engine().NativeEngine(g, threads=t, isa=ISA_NAMES.index(isa))
            for k, v in feeds.items():
                eng.set_input(k, v.astype(np.float32))
            eng.run()
            got = eng.outputs()[out].reshape(want.shape)
            err = float(np.abs(got - want).max())
            if step:  # a dequantized output: the difference in quantisation steps
                steps = err / step
                # 1e-4: two dequantized values (q - z) * s one step apart differ
                # from s by float rounding of products up to 255 s (~3e-5 s)
                verdict = (f"ok ({steps:.0f} step)" if steps <= 1 + 1e-4 else
                           f"{steps:.1f} steps apart (ORT's fixed-point QLinearAdd, "
                           "docs/onnx.md)")
            else:
                good = err <= TOL * float(np.abs(want).max())
                verdict = "ok" if good else f"WRONG (max diff {err:.3g}; " + \
                    _vs_fp32(got.reshape(-1), want.reshape(-1), fp32)
            fns.append(eng.run)
            labels.append(f"hwtune {'avx512_vnni' if isa == 'avx512' else isa}")
            ok.append(verdict)
        before = load1()
        times = interleaved(fns, reps)
        print(f"  {t} thr  {load_note(before, load1(), t)}")
        for label, s, k in zip(labels, times, ok):
            ratio = times[0] / s
            print(f"  {t} thr  {label:20s} {s * 1e3:9.2f} ms  {ratio:5.2f}x ORT  {k}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,bert_base")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--small", action="store_true", help="the zoo's reduced sizes")
    a = ap.parse_args(argv)
    threads = [int(t) for t in a.threads.split(",")]
    with tempfile.TemporaryDirectory() as d:
        for name in a.models.split(","):
            bench(name, a.small, threads, a.reps, d)


if __name__ == "__main__":
    sys.exit(main())
