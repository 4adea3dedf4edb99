"""ONNX ops imported as a few engine ops each (issue #41's held-out
families): no kernel of their own, since each is rare in a model and its
parts already run at the engine's speed.

- IsNaN, IsInf: comparisons (x != x; |x|, x or -x against +inf).
- LogSoftmax, ReduceLogSumExp: max-shifted, so no term overflows or
  underflows to -inf where the true value is finite (log(softmax(x)) would
  give -inf once x - max(x) < -104).
- DepthToSpace, SpaceToDepth (pixel_shuffle / pixel_unshuffle in
  super-resolution nets): ONNX's own reshape, transpose, reshape.
- ArgMin: argmax of -x (the first of equal minima, as ONNX).
- Mean: sum, then 1/n.
- LRN (Caffe-era AlexNet / GoogLeNet / CaffeNet files): x^2 averaged over
  a window of channels by an average pool that counts the zero padding,
  so the pool's mean is ONNX's sum / size.
- SplitToSequence, SequenceAt, SequenceLength (Mamba's selective scan
  exports them): a sequence is kept at import as its tensor and cut
  points; SequenceAt at a constant position is a slice of the tensor.
- TopK (torch.topk, and torch.argsort as ViTMAE's random masking shuffles
  its patches): pairwise comparisons along the axis give each element its
  place in the order, one-hot places give the indices, gather_elements the
  values; rows * n^2 comparisons, so only for short axes.
- GridSample (RAFT's correlation lookups and warps; 2-D, bilinear or
  nearest, zeros or border padding): the grid unnormalised to pixel
  coordinates, per corner a gather_elements of the [N, C, H*W] input at the
  clamped flat index, weighted by its bilinear weight times whether the
  corner is inside the image.
- Col2Im (torch.nn.Fold at opset 18; MobileViT-V2 folds its patches back
  into a feature map): blocks side by side (stride = block, no dilation,
  MobileViT's form) are a reshape, transpose, reshape, then a slice and a
  pad for the pads and an image the blocks do not cover; any other stride,
  dilation or padding sums overlapping blocks as a conv_transpose2d with
  identity weights over [N * C, block, L_h, L_w]. 1-D and 2-D images.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

import numpy as np

from hwtune.onnx import norms
from hwtune.onnx.axes import normalize_axis
from hwtune.onnx.errors import Unsupported


# -- comparisons --------------------------------------------------------------

def is_nan(cx, attrs):
    x = cx.tensor(0)
    cx.emit("not_equal", [x, x], out=cx.out())


def is_inf(cx, attrs):
    neg, pos = bool(attrs.get("detect_negative", 1)), bool(attrs.get("detect_positive", 1))
    x = cx.tensor(0)
    if not neg and not pos:  # all false: nothing equals NaN (0 * x would keep x's NaNs)
        nan = cx.param(f"{cx.node.name}:nan", np.array([np.nan], np.float32))
        cx.emit("equal", [x, nan], out=cx.out())
        return
    if neg and pos:
        x = cx.emit("abs", [x])
    elif neg:
        x = cx.emit("neg", [x])
    inf = cx.param(f"{cx.node.name}:inf", np.array([np.inf], np.float32))
    cx.emit("equal", [x, inf], out=cx.out())


def fold_is_nan(values, attrs, cx):
    return [np.isnan(values[0])]


def fold_is_inf(values, attrs, cx):
    x = values[0]
    neg, pos = attrs.get("detect_negative", 1), attrs.get("detect_positive", 1)
    return [(np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))]


# -- max-shifted logs ---------------------------------------------------------

def _shifted_log_sum(cx, x: str, shp: List[int], axes: List[int]):
    """(m, x - m, log(sum(exp(x - m)))): m the max over axes, which stay as
    size 1."""
    m = norms.max_over(cx, x, shp, axes, norms.kept_shape(shp, axes, True))
    d = cx.emit("sub", [x, m])
    s = cx.emit("reduce_sum", [cx.emit("exp", [d])], {"axes": axes, "keepdims": True})
    return m, d, cx.emit("log", [s])


def log_softmax(cx, attrs):
    shp = list(cx.shape(0))
    rank = len(shp)
    if cx.opset >= 13:
        axes = [normalize_axis(attrs.get("axis", -1), rank)]
    else:  # before opset 13: over every dim from axis on
        axes = list(range(normalize_axis(attrs.get("axis", 1), rank), rank))
    _, d, l = _shifted_log_sum(cx, cx.tensor(0), shp, axes)
    cx.emit("sub", [d, l], out=cx.out())


def reduce_log_sum_exp(cx, attrs):
    shp = list(cx.shape(0))
    axes = norms.reduce_axes(cx, attrs, 18)
    if axes is None:
        cx.bind(cx.out(), cx.tensor(0))
        return
    m, _, l = _shifted_log_sum(cx, cx.tensor(0), shp, axes)
    keep = bool(attrs.get("keepdims", 1))
    y = cx.emit("add", [l, m], out=cx.out() if keep else None)
    if not keep:
        cx.emit("reshape", [y], {"shape": [d for i, d in enumerate(shp) if i not in axes]},
                out=cx.out())


# -- movement -----------------------------------------------------------------

def _reshape_transpose_reshape(cx, mid, perm, out_shape):
    x = cx.emit("reshape", [cx.tensor(0)], {"shape": mid})
    x = cx.emit("transpose", [x], {"perm": perm})
    cx.emit("reshape", [x], {"shape": out_shape}, out=cx.out())


def depth_to_space(cx, attrs):
    shp = cx.shape(0)
    b = int(attrs["blocksize"])
    if len(shp) != 4 or b < 1 or shp[1] % (b * b):
        raise Unsupported(f"DepthToSpace needs an NCHW input whose channels ({shp}) divide "
                          f"by blocksize^2 = {b * b}")
    n, c, h, w = shp
    out = [n, c // (b * b), h * b, w * b]
    if attrs.get("mode", "DCR") == "CRD":
        _reshape_transpose_reshape(cx, [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3], out)
    else:
        _reshape_transpose_reshape(cx, [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2], out)


def space_to_depth(cx, attrs):
    shp = cx.shape(0)
    b = int(attrs["blocksize"])
    if len(shp) != 4 or b < 1 or shp[2] % b or shp[3] % b:
        raise Unsupported(f"SpaceToDepth needs an NCHW input whose height and width ({shp}) "
                          f"divide by blocksize {b}")
    n, c, h, w = shp
    _reshape_transpose_reshape(cx, [n, c, h // b, b, w // b, b], [0, 3, 5, 1, 2, 4],
                               [n, c * b * b, h // b, w // b])


# -- reductions and the rest ----------------------------------------------------

def arg_min(cx, attrs):
    axis = normalize_axis(attrs.get("axis", 0), len(cx.shape(0)))
    cx.emit("argmax", [cx.emit("neg", [cx.tensor(0)])],
            {"axis": axis, "keepdims": bool(attrs.get("keepdims", 1)),
             "select_last_index": bool(attrs.get("select_last_index", 0))}, out=cx.out())


def fold_arg_min(values, attrs, cx):
    x = np.asarray(values[0])
    axis = normalize_axis(attrs.get("axis", 0), x.ndim)
    if attrs.get("select_last_index", 0):
        i = x.shape[axis] - 1 - np.argmin(np.flip(x, axis), axis=axis)
    else:
        i = np.argmin(x, axis=axis)
    return [np.expand_dims(i, axis) if attrs.get("keepdims", 1) else i]


def mean(cx, attrs):
    names = [cx.tensor(i) for i in range(len(cx.node.input)) if cx.has(i)]
    if len(names) == 1:
        cx.bind(cx.out(), names[0])
        return
    s = cx.emit("sum", names)
    cx.emit("affine", [s], {"scale": 1.0 / len(names)}, out=cx.out())


def fold_mean(values, attrs, cx):
    return [np.asarray(sum(values) / len(values))]


def lrn(cx, attrs):
    shp = list(cx.shape(0))
    size = int(attrs["size"])
    alpha, beta = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75))
    bias = float(attrs.get("bias", 1.0))
    if len(shp) < 3 or size < 1:
        raise Unsupported(f"LRN needs an [N, C, ...] input and size >= 1, got {shp}, "
                          f"size {size}")
    x = cx.tensor(0)
    n, c, rest = shp[0], shp[1], int(np.prod(shp[2:], dtype=np.int64))
    sq = cx.emit("reshape", [cx.emit("mul", [x, x])], {"shape": [n, 1, c, rest]})
    avg = cx.emit("pool2d", [sq], {"mode": "avg", "kernel": [size, 1], "stride": [1, 1],
                                   "padding": [(size - 1) // 2, 0],
                                   "padding_end": [size // 2, 0],
                                   "count_include_pad": True})
    den = cx.emit("affine", [cx.emit("reshape", [avg], {"shape": shp})],
                  {"scale": alpha, "shift": bias})
    if beta != 1.0:
        den = cx.emit("pow", [den, cx.param(f"{cx.node.name}:beta",
                                            np.array([beta], np.float32))])
    cx.emit("div", [x, den], out=cx.out())


# -- sequences ------------------------------------------------------------------

@dataclass
class Sequence:
    """A SplitToSequence result: tensor's pieces along axis, cut at
    bounds (len(bounds) - 1 pieces); squeeze: each piece loses the axis."""
    tensor: str
    shape: tuple
    axis: int
    bounds: List[int]
    squeeze: bool


def split_to_sequence(cx, attrs):
    shp = cx.shape(0)
    axis = normalize_axis(attrs.get("axis", 0), len(shp))
    dim = shp[axis]
    split = cx.const(1, "split") if cx.has(1) else None
    squeeze = False
    if split is None:  # every element a tensor, the axis kept unless keepdims = 0
        sizes = [1] * dim
        squeeze = not attrs.get("keepdims", 1)
    elif np.asarray(split).ndim == 0:  # a scalar: pieces of that length, the last shorter
        part = int(split)
        if part < 1:
            raise Unsupported(f"split length {part} is not positive")
        sizes = [min(part, dim - i) for i in range(0, dim, part)]
    else:
        sizes = [int(v) for v in np.asarray(split).reshape(-1)]
    if any(s < 0 for s in sizes) or sum(sizes) != dim:
        raise Unsupported(f"split sizes {sizes} do not add up to the axis' {dim}")
    bounds = [0]
    for s in sizes:
        bounds.append(bounds[-1] + s)
    cx.sequences[cx.out()] = Sequence(cx.tensor(0), tuple(shp), axis, bounds, squeeze)


def _sequence(cx, i) -> Sequence:
    name = cx.node.input[i]
    if name not in cx.sequences:
        raise Unsupported(f'sequence "{name}" does not come from a SplitToSequence')
    return cx.sequences[name]


def sequence_at(cx, attrs):
    seq = _sequence(cx, 0)
    n = len(seq.bounds) - 1
    pos = int(np.asarray(cx.const(1, "position")).reshape(()))
    if not -n <= pos < n:
        raise Unsupported(f"position {pos} is outside the sequence of {n} tensors")
    pos %= n
    b, e = seq.bounds[pos], seq.bounds[pos + 1]
    shp = list(seq.shape)
    piece = seq.tensor
    if (b, e) != (0, shp[seq.axis]):
        piece = cx.emit("slice", [piece], {"axis": seq.axis, "begin": b, "end": e},
                        out=None if seq.squeeze else cx.out())
    elif not seq.squeeze:
        cx.bind(cx.out(), piece)
    if seq.squeeze:
        cx.emit("reshape", [piece], {"shape": shp[:seq.axis] + shp[seq.axis + 1:]},
                out=cx.out())


def sequence_length(cx, attrs):
    seq = _sequence(cx, 0)
    cx.define(cx.out(), np.array(len(seq.bounds) - 1, np.int64))


# -- TopK -----------------------------------------------------------------------

TOPK_PAIRS = 1 << 22  # at most this many pairwise comparisons (rows * n * n)


def top_k(cx, attrs):
    """TopK along an axis of n elements: element i's place in the order is
    the count of elements j ahead of it (greater, or less for largest=0, or
    equal at a lower index: ONNX puts the lower index first), from [.., n, 1]
    against [.., 1, n] comparisons summed over j; the k-th index is
    sum_i i * [place_i == k]; the values gather_elements at those indices.
    Always sorted (sorted=0 allows any order). NaN has no place."""
    shp = [int(d) for d in cx.shape(0)]
    rank = len(shp)
    axis = normalize_axis(attrs.get("axis", -1), rank)
    k = int(np.asarray(cx.const(1, "K")).reshape(-1)[0])
    n = shp[axis]
    if not 1 <= k <= n:
        raise Unsupported(f"K = {k} outside [1, {n}] (the axis' length)")
    rows = int(np.prod(shp, dtype=np.int64)) // n
    if rows * n * n > TOPK_PAIRS:
        raise Unsupported(f"TopK over {n} elements in {rows} rows: {rows * n * n} pairwise "
                          f"comparisons, more than the {TOPK_PAIRS} hwtune composes it of")
    perm = [a for a in range(rank) if a != axis] + [axis]
    x = cx.tensor(0)
    if axis != rank - 1:
        x = cx.emit("transpose", [x], {"perm": perm})
    lead = [shp[a] for a in perm[:-1]]
    last = len(lead)  # the axis, now the last of lead + [n]
    xi = cx.emit("reshape", [x], {"shape": lead + [n, 1]})
    xj = cx.emit("reshape", [x], {"shape": lead + [1, n]})
    name = cx.node.name or cx.out()
    ahead = cx.emit("greater" if attrs.get("largest", 1) else "less", [xj, xi])
    lower = cx.param(f"{name}:lower", np.tril(np.ones((n, n), np.float32), -1))  # j < i
    ahead = cx.emit("add", [ahead, cx.emit("mul", [cx.emit("equal", [xj, xi]), lower])])
    place = cx.emit("reduce_sum", [ahead], {"axes": [last + 1], "keepdims": False})
    place = cx.emit("reshape", [place], {"shape": lead + [1, n]})
    ks = cx.param(f"{name}:k", np.arange(k, dtype=np.float32).reshape(k, 1))
    hot = cx.emit("equal", [place, ks])  # lead + [k, n]
    iota = cx.param(f"{name}:iota", np.arange(n, dtype=np.float32))
    outs = list(cx.node.output) + ["", ""]
    want_v, want_i = bool(outs[0]), bool(outs[1])
    inv = [int(a) for a in np.argsort(perm)]
    idx = cx.emit("reduce_sum", [cx.emit("mul", [hot, iota])],
                  {"axes": [last + 1], "keepdims": False},
                  out=cx.out(1) if want_i and axis == rank - 1 else None)
    cx.int_bounds[idx] = (0.0, float(n - 1))
    if want_i and axis != rank - 1:
        cx.emit("transpose", [idx], {"perm": inv}, out=cx.out(1))
        cx.int_bounds[cx.out(1)] = (0.0, float(n - 1))
    if want_v:
        v = cx.emit("gather_elements", [x, idx], {"axis": last},
                    out=cx.out(0) if axis == rank - 1 else None)
        if axis != rank - 1:
            cx.emit("transpose", [v], {"perm": inv}, out=cx.out(0))


def fold_top_k(values, attrs, cx):
    x = np.asarray(values[0])
    axis = normalize_axis(attrs.get("axis", -1), x.ndim)
    k = int(np.asarray(values[1]).reshape(-1)[0])
    key = -x if attrs.get("largest", 1) else x  # stable: lower index first among equals
    idx = np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis), idx.astype(np.int64)]


# -- GridSample -------------------------------------------------------------------

def grid_sample(cx, attrs):
    """GridSample on [N, C, H, W] at a [N, Ho, Wo, 2] grid of (x, y) in
    [-1, 1]: each coordinate unnormalised (align_corners: -1 and 1 are the
    corner pixels' centres, else their outer edges), clamped to the image
    for border padding; bilinear: the four neighbours floor(x) + {0, 1},
    floor(y) + {0, 1}, each read at its flat index clamped into the image
    (gather_elements over H*W) and weighted by its bilinear weight times
    [the neighbour is inside]: zeros outside. Nearest: one neighbour at
    round(x), round(y) (halves to even, as ONNX Runtime)."""
    shp = [int(d) for d in cx.shape(0)]
    gshp = [int(d) for d in cx.shape(1)]
    mode = str(attrs.get("mode", "bilinear"))
    pad = str(attrs.get("padding_mode", "zeros"))
    if len(shp) != 4 or gshp != [shp[0], *gshp[1:3], 2]:
        raise Unsupported(f"GridSample of {shp} at a grid {gshp} (2-D only: [N, C, H, W] "
                          "and [N, Ho, Wo, 2])")
    if mode not in ("bilinear", "linear", "nearest"):
        raise Unsupported(f'GridSample mode "{mode}" (bilinear and nearest only)')
    if pad not in ("zeros", "border"):
        raise Unsupported(f'GridSample padding_mode "{pad}" (zeros and border only)')
    n, c, h, w = shp
    p = gshp[1] * gshp[2]
    corners = bool(attrs.get("align_corners", 0))
    x = cx.emit("reshape", [cx.tensor(0)], {"shape": [n, c, h * w]})

    def coord(i, size):  # pixel coordinate along one axis, [N, 1, P]
        g = cx.emit("slice", [cx.tensor(1)], {"axis": 3, "begin": i, "end": i + 1})
        g = cx.emit("reshape", [g], {"shape": [n, 1, p]})
        scale = (size - 1) / 2 if corners else size / 2
        g = cx.emit("affine", [g], {"scale": scale, "shift": (size - 1) / 2})
        if pad == "border":
            g = cx.emit("clip", [g], {"min": 0.0, "max": float(size - 1)})
        return g

    def inside(v, size):  # (v clamped into [0, size - 1], 1 where it was inside)
        cl = cx.emit("clip", [v], {"min": 0.0, "max": float(size - 1)})
        return cl, cx.emit("equal", [cl, v])

    ix, iy = coord(0, w), coord(1, h)
    if mode == "nearest":
        xs = [(cx.emit("round", [ix]), None)]
        ys = [(cx.emit("round", [iy]), None)]
    else:
        x0, y0 = cx.emit("floor", [ix]), cx.emit("floor", [iy])
        wx1, wy1 = cx.emit("sub", [ix, x0]), cx.emit("sub", [iy, y0])
        xs = [(x0, cx.emit("affine", [wx1], {"scale": -1.0, "shift": 1.0})),
              (cx.emit("affine", [x0], {"shift": 1.0}), wx1)]
        ys = [(y0, cx.emit("affine", [wy1], {"scale": -1.0, "shift": 1.0})),
              (cx.emit("affine", [y0], {"shift": 1.0}), wy1)]
    terms = []
    for yv, wy in ys:
        yc, yin = inside(yv, h)
        for xv, wx in xs:
            xc, xin = inside(xv, w)
            idx = cx.emit("add", [cx.emit("affine", [yc], {"scale": float(w)}), xc])
            idx = cx.emit("expand", [idx], {"shape": [n, c, p]})
            v = cx.emit("gather_elements", [x, idx], {"axis": 2})
            wt = cx.emit("mul", [yin, xin])
            for f in (wx, wy):
                if f is not None:
                    wt = cx.emit("mul", [wt, f])
            terms.append(cx.emit("mul", [v, wt]))
    y = terms[0] if len(terms) == 1 else cx.emit("sum", terms)
    cx.emit("reshape", [y], {"shape": [n, c, gshp[1], gshp[2]]}, out=cx.out())


# -- Col2Im ------------------------------------------------------------------------

def _col2im_geometry(shp, image, block, attrs):
    """(C, image, block, dilations, pads [begin..., end...], strides, blocks
    per axis) of a Col2Im, a 1-D image lifted to 2-D with height 1."""
    nd = len(image)
    if len(shp) != 3 or nd not in (1, 2) or len(block) != nd:
        raise Unsupported(f"Col2Im of a {list(shp)} input into image_shape {image} with "
                          f"block_shape {block}: only [N, C*prod(block), L] into 1-D or 2-D "
                          "images")
    dil = [int(v) for v in attrs.get("dilations", [1] * nd)]
    strides = [int(v) for v in attrs.get("strides", [1] * nd)]
    pads = [int(v) for v in attrs.get("pads", [0] * 2 * nd)]
    if len(dil) != nd or len(strides) != nd or len(pads) != 2 * nd or min(dil + strides) < 1 \
            or min(pads) < 0 or min(image + block) < 1:
        raise Unsupported(f"Col2Im dilations {dil}, strides {strides}, pads {pads}, "
                          f"image_shape {image}, block_shape {block}: {nd} positive "
                          f"dilations, strides, sizes and {2 * nd} non-negative pads expected")
    if nd == 1:
        image, block, dil, strides = [1] + image, [1] + block, [1] + dil, [1] + strides
        pads = [0, pads[0], 0, pads[1]]
    k = block[0] * block[1]
    if shp[1] % k:
        raise Unsupported(f"Col2Im input channels {shp[1]} are not a multiple of the block's "
                          f"{k} elements")
    nb = [(image[i] + pads[i] + pads[i + 2] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1
          for i in range(2)]
    if min(nb) < 1 or nb[0] * nb[1] != shp[2]:
        raise Unsupported(f"Col2Im input of {shp[2]} blocks, but image_shape {image[-nd:]} "
                          f"with these pads, strides and dilations holds {nb[-nd:]}")
    return shp[1] // k, image, block, dil, pads, strides, nb


def col2im(cx, attrs):
    shp = [int(d) for d in cx.shape(0)]
    image = [int(v) for v in np.asarray(cx.const(1, "image_shape")).reshape(-1)]
    block = [int(v) for v in np.asarray(cx.const(2, "block_shape")).reshape(-1)]
    nd = len(image)
    c, image, block, dil, pads, strides, nb = _col2im_geometry(shp, image, block, attrs)
    n = shp[0]
    out = [n, c] + image[-nd:]
    # Side by side: block row r of block i is padded image row i*k + r.
    if strides == block and dil == [1, 1] and all(
            pads[i] < nb[i] * block[i] for i in range(2)):
        x = cx.emit("reshape", [cx.tensor(0)], {"shape": [n, c] + block + nb})
        x = cx.emit("transpose", [x], {"perm": [0, 1, 4, 2, 5, 3]})
        x = cx.emit("reshape", [x], {"shape": [n, c, nb[0] * block[0], nb[1] * block[1]]})
        grow = [0, 0, 0, 0]
        for i in range(2):  # the image is padded rows pads[i] .. pads[i] + image[i]
            covered, end = nb[i] * block[i], pads[i] + image[i]
            if (pads[i], min(covered, end)) != (0, covered):
                x = cx.emit("slice", [x], {"axis": 2 + i, "begin": pads[i],
                                           "end": min(covered, end)})
            grow[2 + i] = max(end - covered, 0)
        if any(grow):
            x = cx.emit("pad", [x], {"pads": [0, 0, 0, 0] + grow})
        cx.emit("reshape", [x], {"shape": out}, out=cx.out())
        return
    k = block[0] * block[1]
    x = cx.emit("reshape", [cx.tensor(0)], {"shape": [n * c, k] + nb})
    eye = cx.param(f"{cx.node.name or cx.out()}:blocks",
                   np.eye(k, dtype=np.float32).reshape(k, 1, block[0], block[1]))
    full = [(nb[i] - 1) * strides[i] + dil[i] * (block[i] - 1) + 1 - pads[i] - pads[i + 2]
            for i in range(2)]
    ct = {"stride": strides, "padding": pads[:2], "dilation": dil,
          "output_padding": [image[i] - full[i] for i in range(2)]}
    if pads[2:] != pads[:2]:
        ct["padding_end"] = pads[2:]
    y = cx.emit("conv_transpose2d", [x, eye], ct)
    cx.emit("reshape", [y], {"shape": out}, out=cx.out())


def fold_col2im(values, attrs, cx):
    x = np.asarray(values[0], np.float64)
    image = [int(v) for v in np.asarray(values[1]).reshape(-1)]
    block = [int(v) for v in np.asarray(values[2]).reshape(-1)]
    nd = len(image)
    c, image, block, dil, pads, strides, nb = _col2im_geometry(list(x.shape), image, block,
                                                               attrs)
    n = x.shape[0]
    xs = x.reshape(n, c, block[0], block[1], nb[0], nb[1])
    full = np.zeros((n, c, image[0] + pads[0] + pads[2], image[1] + pads[1] + pads[3]))
    for i in range(block[0]):
        for j in range(block[1]):
            r, q = i * dil[0], j * dil[1]
            full[:, :, r:r + strides[0] * (nb[0] - 1) + 1:strides[0],
                 q:q + strides[1] * (nb[1] - 1) + 1:strides[1]] += xs[:, :, i, j]
    y = full[:, :, pads[0]:pads[0] + image[0], pads[1]:pads[1] + image[1]]
    return [y.reshape([n, c] + image[-nd:]).astype(values[0].dtype)]


RULES = {
    "IsNaN": (is_nan, fold_is_nan),
    "IsInf": (is_inf, fold_is_inf),
    "LogSoftmax": (log_softmax, None),
    "ReduceLogSumExp": (reduce_log_sum_exp, None),
    "DepthToSpace": (depth_to_space, None),
    "SpaceToDepth": (space_to_depth, None),
    "ArgMin": (arg_min, fold_arg_min),
    "Mean": (mean, fold_mean),
    "LRN": (lrn, None),
    "SplitToSequence": (split_to_sequence, None),
    "SequenceAt": (sequence_at, None),
    "SequenceLength": (sequence_length, None),
    "TopK": (top_k, fold_top_k),
    "GridSample": (grid_sample, None),
    "Col2Im": (col2im, fold_col2im),
}
