"""Every quantize_static form ONNX Runtime writes, imported by hwtune.

    python benchmarks/quant_forms.py [--workdir DIR]

For the small models of tests/onnx_models.py (resnet_cnn, mobilenet_block,
mlp, transformer): QDQ and QOperator, u8 and s8 activations, s8 and u8
weights, per-channel on and off, each quantized with a seeded calibration
reader; prints per form whether ORT quantizes and runs it, whether hwtune
imports it (or its one error line) and the max error against ORT's own int8
output relative to the output's scale (correctness only: no timing).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import onnx_models as M  # noqa: E402


def main(argv=None):
    from onnxruntime import quantization as Q
    from hwtune.engine.ops_harness import run_ops
    from hwtune.errors import HwtuneError
    from hwtune.graph import load_model
    from hwtune.onnx.importer import import_onnx

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default=None)
    d = ap.parse_args(argv).workdir or tempfile.mkdtemp(prefix="quant-forms-")
    os.makedirs(d, exist_ok=True)

    class Reader(Q.CalibrationDataReader):
        def __init__(self, shape):
            rng = np.random.default_rng(0)
            self.it = iter([{"x": rng.standard_normal(shape).astype(np.float32)}
                            for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    for name in ("resnet_cnn", "mobilenet_block", "mlp", "transformer"):
        model, x = getattr(M, name)()
        src = M.export(model, x, os.path.join(d, f"{name}.onnx"))
        for fmt, act, wt, pc in itertools.product(("QDQ", "QOperator"), ("QUInt8", "QInt8"),
                                                  ("QInt8", "QUInt8"), (True, False)):
            label = f"{name:16s} {fmt:9s} act {act:6s} w {wt:6s} per-channel {pc!s:5s}"
            dst = os.path.join(d, f"{name}_{fmt}_{act}_{wt}_{pc}.onnx")
            try:
                Q.quantize_static(src, dst, Reader(tuple(x.shape)),
                                  quant_format=getattr(Q.QuantFormat, fmt), per_channel=pc,
                                  activation_type=getattr(Q.QuantType, act),
                                  weight_type=getattr(Q.QuantType, wt))
                want = M.ort_outputs(dst, {"x": x.numpy()})["y"]
            except Exception as exc:  # ORT's own refusal: not hwtune's
                print(f"{label} ORT: {str(exc).splitlines()[0][:90]}", flush=True)
                continue
            try:
                g = load_model(import_onnx(dst, dst + ".json").model)
                got = run_ops(g, nth=2, inputs={"x": x.numpy()})["y"]
            except HwtuneError as exc:
                print(f"{label} hwtune: {str(exc)[:150]}", flush=True)
                continue
            print(f"{label} max err vs ORT int8 {M.rel_err(got, want):.2e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
