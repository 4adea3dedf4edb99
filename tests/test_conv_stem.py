"""The stem kernel (kernels/conv/stem.c, stem_body.c: NCHW CONVs of few
input channels, a CNN's first) vs the float64 numpy reference on every
supported ISA, and the plans that take it by default: the two zoo stems
(MobileNetV2's 3 -> 32 3x3 with ReLU6, ResNet's 3 -> 64 7x7 with ReLU) at
a reduced size, and EfficientNet's SiLU."""

import numpy as np
import pytest

from hwtune.graph.ops.eltwise import REFERENCES
from hwtune.native import conv
from hwtune.native.isa import supported_isas

from test_conv import make, ref_conv, tolerance

ISAS = supported_isas()

# (N, C, H, W, K, R, S, stride, pad): the stems at 40x40 and 38x38, a row of
# 125 pixels (several register blocks, a masked last vector), one channel,
# an output channel count leaving a partial block, two images.
CASES = [
    (1, 3, 40, 40, 32, 3, 3, 2, 1),
    (1, 3, 38, 38, 64, 7, 7, 2, 3),
    (1, 3, 7, 250, 10, 3, 3, 2, 1),
    (2, 1, 9, 11, 6, 5, 5, 2, 2),
]


def _expected(case, act):
    x, w, b, stride, pad = make(case, x_range=2.0, b_range=0.5)
    y = ref_conv(x, w, b, stride, pad, relu=act in ("relu", "relu6"))
    if act == "relu6":
        y = np.minimum(y, 6.0)
    elif act == "silu":
        y = REFERENCES["silu"].fn(y)
    return (x, w, b, stride, pad), y


def _run(args, act, **kw):
    x, w, b, stride, pad = args
    return conv.conv2d(x, w, b, stride=stride, pad=pad, relu=act in ("relu", "relu6"),
                       relu_max=6.0 if act == "relu6" else None,
                       act="silu" if act == "silu" else None, **kw)


@pytest.mark.parametrize("act", ["relu6", "relu", "silu"])
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])))
def test_stem_matches_the_reference(case, isa, act):
    args, want = _expected(case, act)
    tol = tolerance(*case[1:2], *case[5:7]) * max(1.0, float(np.abs(want).max()))
    for nth in (1, 2, 3):
        got = _run(args, act, layout="NCHW-stem", isa=isa, nth=nth)
        assert np.abs(got - want).max() <= tol, (isa, nth)
    # The default NCHW plan: the stem kernel on AVX2 / AVX-512, the template
    # on the portable variant (stem.c); the same result either way.
    got = _run(args, act, isa=isa, nth=2)
    assert np.abs(got - want).max() <= tol


@pytest.mark.parametrize("isa", ISAS)
def test_default_plan_of_the_zoo_stems(isa):
    want = "NCHW" if isa == "generic" else "NCHW-stem"
    for w_shape, pad in (((32, 3, 3, 3), 1), ((64, 3, 7, 7), 3)):
        assert conv.nchw_kernel((1, 3, 224, 224), w_shape, stride=2, pad=pad, isa=isa) == want
    # Stride 1, or five channels: not the stem's default.
    assert conv.nchw_kernel((1, 3, 32, 32), (16, 3, 3, 3), stride=1, pad=1, isa=isa) != \
        "NCHW-stem"
    assert conv.nchw_kernel((1, 5, 32, 32), (16, 5, 3, 3), stride=2, pad=1, isa=isa) != \
        "NCHW-stem"


def test_stem_plan_reports_no_template_params():
    w = np.ones((8, 3, 3, 3), np.float32)
    p = conv.Conv2dPlan((1, 3, 16, 16), w, stride=2, pad=1, layout="NCHW-stem")
    assert p.layout == "NCHW-stem" and p.params is None
    assert p.run(np.ones((1, 3, 16, 16), np.float32)).shape == (1, 8, 8, 8)
