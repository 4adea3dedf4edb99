"""Data layouts and the layout_transform op.

Activations are NCHW or NCHW[x]c (channels split into C/x blocks of x,
innermost: [N, C/x, H, W, x]); conv weights are OIHW or OIHW[i]i[o]o
([O/o, I/i, KH, KW, i, o]), the blocked layouts of NeoCPU section 3.1.
"""

import re

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, register, show_shape

_DATA = re.compile(r"NCHW(?:(\d+)c)?")
_WEIGHT = re.compile(r"OIHW(?:(\d+)i(\d+)o)?")


def parse_layout(text, where):
    """("data", c_block) or ("weight", (i_block, o_block)); block 0 = plain."""
    m = _DATA.fullmatch(text)
    if m:
        block = int(m.group(1) or 0)
        if m.group(1) is not None and block < 1:
            raise OpError(f'bad block size in layout "{text}"', where)
        return "data", block
    m = _WEIGHT.fullmatch(text)
    if m:
        blocks = (int(m.group(1) or 0), int(m.group(2) or 0))
        if m.group(1) is not None and min(blocks) < 1:
            raise OpError(f'bad block size in layout "{text}"', where)
        return "weight", blocks
    raise OpError(f'unknown layout "{text}" (NCHW, NCHW<x>c, OIHW or '
                  f"OIHW<i>i<o>o)", where)


def to_nchwc(x, block):
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def from_nchwc(x):
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w))


def to_oihwio(w, ib, ob):
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(
        w.reshape(o // ob, ob, i // ib, ib, kh, kw).transpose(0, 2, 4, 5, 3, 1))


def from_oihwio(w):
    ob_n, ib_n, kh, kw, ib, ob = w.shape
    return np.ascontiguousarray(
        w.transpose(0, 5, 1, 4, 2, 3).reshape(ob_n * ob, ib_n * ib, kh, kw))


def logical_shape(shape, kind, blocks, where="inputs[0]"):
    """The plain NCHW / OIHW shape of a tensor stored in a given layout."""
    if kind == "data":
        if blocks == 0:
            if len(shape) != 4:
                raise OpError(f"NCHW data must be 4-D, got {show_shape(shape)}", where)
            return tuple(shape)
        if len(shape) != 5 or shape[4] != blocks:
            raise OpError(f"NCHW{blocks}c data must be [N, C/{blocks}, H, W, {blocks}], "
                          f"got {show_shape(shape)}", where)
        return (shape[0], shape[1] * shape[4], shape[2], shape[3])
    ib, ob = blocks
    if ib == 0:
        if len(shape) != 4:
            raise OpError(f"OIHW weights must be 4-D, got {show_shape(shape)}", where)
        return tuple(shape)
    if len(shape) != 6 or shape[4] != ib or shape[5] != ob:
        raise OpError(f"OIHW{ib}i{ob}o weights must be [O/{ob}, I/{ib}, KH, KW, {ib}, {ob}], "
                      f"got {show_shape(shape)}", where)
    return (shape[0] * ob, shape[1] * ib, shape[2], shape[3])


def _layouts(attrs):
    src = parse_layout(attrs["src"], "attrs.src")
    dst = parse_layout(attrs["dst"], "attrs.dst")
    if src[0] != dst[0]:
        raise OpError(f'cannot transform {src[0]} layout "{attrs["src"]}" into '
                      f'{dst[0]} layout "{attrs["dst"]}"', "attrs.dst")
    return src, dst


def _infer(in_shapes, attrs, n_out):
    (kind, sb), (_, db) = _layouts(attrs)
    logical = logical_shape(in_shapes[0], kind, sb)
    if kind == "data":
        n, c, h, w = logical
        if db == 0:
            return [logical]
        if c % db:
            raise OpError(f"block {db} does not divide {c} channels", "attrs.dst")
        return [(n, c // db, h, w, db)]
    o, i, kh, kw = logical
    ib, ob = db
    if ib == 0:
        return [logical]
    if i % ib or o % ob:
        raise OpError(f"blocks {ib}i{ob}o do not divide [O={o}, I={i}]", "attrs.dst")
    return [(o // ob, i // ib, kh, kw, ib, ob)]


def _ref(arrays, attrs, n_out):
    (kind, sb), (_, db) = _layouts(attrs)
    x = arrays[0]
    if kind == "data":
        plain = from_nchwc(x) if sb else x
        return [to_nchwc(plain, db) if db else np.ascontiguousarray(plain)]
    plain = from_oihwio(x) if sb[0] else x
    return [to_oihwio(plain, *db) if db[0] else np.ascontiguousarray(plain)]


register(OpSpec(
    "layout_transform", ("x",), 1, 1, _infer, _ref, lambda ins, outs, attrs: 0,
    attrs=[Attr("src", "layout", doc="NCHW, NCHW<x>c, OIHW or OIHW<i>i<o>o"),
           Attr("dst", "layout", doc="same family as src")],
    doc="copy a tensor into another layout (NCHW <-> NCHW[x]c, re-blocking, "
        "OIHW <-> OIHW[i]i[o]o); 0 FLOPs, pure data movement"))
