"""conv_transpose2d: the transposed 2-D convolution (ONNX ConvTranspose,
PyTorch's ConvTranspose2d), NCHW only.

Each input pixel spreads its w-weighted values over a KH x KW window of the
output, the windows `stride` apart and their taps `dilation` apart; then
`padding` rows/columns are cropped from the start of that full output and
`padding_end` from its end, and `output_padding` adds rows/columns at the
end (holding the bias only). It is the data gradient of the convolution
from the output's shape to the input's, and the engine runs it as one
(GEMM + col2im, engine/ops/grad_conv.c). The layout pass leaves it NCHW.
"""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, check_bias, expect_rank, register
from hwtune.graph.ops.conv import DILATION, STRIDE, conv_pads


def _geometry(in_shapes, attrs):
    """(n, c, h, w, oc, kh, kw, oh, ow) or OpError."""
    x, w = in_shapes[0], in_shapes[1]
    expect_rank(x, 4, "conv_transpose2d input must be [N, C, H, W]", "inputs[0]")
    expect_rank(w, 4, "conv_transpose2d weights must be [C, OC, KH, KW]", "inputs[1]")
    n, c, h, wd = x
    wc, oc, kh, kw = w
    if wc != c:
        raise OpError(f"weights [C, OC, KH, KW] expect {wc} input channels, input has {c}",
                      "inputs[1]")
    (sh, sw), (dh, dw), (oph, opw) = attrs["stride"], attrs["dilation"], attrs["output_padding"]
    pt, pl, pb, pr = conv_pads(attrs)
    # PyTorch's and ONNX's rule: output padding extends the last window's
    # reach by less than one step, else it would be a larger input's output.
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise OpError(f"output_padding {oph},{opw} must be smaller than the stride or the "
                      f"dilation ({sh},{sw} / {dh},{dw})", "attrs.output_padding")
    oh = (h - 1) * sh + (kh - 1) * dh + 1 - pt - pb + oph
    ow = (wd - 1) * sw + (kw - 1) * dw + 1 - pl - pr + opw
    if oh < 1 or ow < 1:
        raise OpError(f"padding {pt},{pl},{pb},{pr} crops the whole {oh + pt + pb}x"
                      f"{ow + pl + pr} output", "attrs.padding")
    return n, c, h, wd, oc, kh, kw, oh, ow


def _infer(in_shapes, attrs, n_out):
    n, c, h, wd, oc, kh, kw, oh, ow = _geometry(in_shapes, attrs)
    check_bias(in_shapes, 2, oc)
    return [(n, oc, oh, ow)]


def conv_transpose2d_nchw(x, w, bias, stride, padding, dilation=(1, 1), padding_end=None,
                          output_padding=(0, 0)):
    """Scatter in float64: cols[n, h, w, oc, i, j] = sum_c x w, added into the
    full output at (h*sh + i*dh, w*sw + j*dw), then cropped."""
    (sh, sw), (pt, pl), (dh, dw) = stride, padding, dilation
    pb, pr = padding_end if padding_end is not None else (pt, pl)
    n, c, h, wd = x.shape
    _, oc, kh, kw = w.shape
    oh = (h - 1) * sh + (kh - 1) * dh + 1 - pt - pb + output_padding[0]
    ow = (wd - 1) * sw + (kw - 1) * dw + 1 - pl - pr + output_padding[1]
    full = np.zeros((n, oc, max((h - 1) * sh + (kh - 1) * dh + 1, pt + oh),
                     max((wd - 1) * sw + (kw - 1) * dw + 1, pl + ow)))
    cols = np.tensordot(np.asarray(x, np.float64), np.asarray(w, np.float64),
                        axes=([1], [0]))  # [n, h, w, oc, kh, kw]
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dh, j * dw
            full[:, :, r0:r0 + sh * (h - 1) + 1:sh, c0:c0 + sw * (wd - 1) + 1:sw] += \
                cols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    y = full[:, :, pt:pt + oh, pl:pl + ow]
    if bias is not None:
        y = y + np.asarray(bias, np.float64).reshape(1, oc, 1, 1)
    return y.astype(np.float32)


def _ref(arrays, attrs, n_out):
    bias = arrays[2] if len(arrays) == 3 else None
    return [conv_transpose2d_nchw(arrays[0], arrays[1], bias, attrs["stride"],
                                  attrs["padding"], attrs["dilation"], attrs["padding_end"],
                                  attrs["output_padding"])]


def _flops(in_shapes, out_shapes, attrs):
    n, c, h, wd, oc, kh, kw, oh, ow = _geometry(in_shapes, attrs)
    bias = n * oc * oh * ow if len(in_shapes) == 3 else 0
    return 2 * n * c * h * wd * oc * kh * kw + bias


register(OpSpec(
    "conv_transpose2d", ("x", "w", "bias"), 2, 3, _infer, _ref, _flops,
    attrs=[
        STRIDE,
        Attr("padding", "pair", (0, 0), minimum=0,
             doc="int or [ph, pw] rows/columns cropped from both ends of the full output "
                 "(the start only, when padding_end is given)"),
        Attr("padding_end", "pair", None, minimum=0,
             doc="int or [bottom, right] cropped from the end, when it differs from padding"),
        Attr("output_padding", "pair", (0, 0), minimum=0,
             doc="int or [h, w] added at the end (smaller than the stride or dilation)"),
        DILATION,
    ],
    doc="transposed 2-D convolution (ONNX ConvTranspose): x [N,C,H,W], w [C,OC,KH,KW], "
        "bias [OC] -> [N, OC, (H-1)*sh + (KH-1)*dh + 1 - pads + output_padding, ...]"))
