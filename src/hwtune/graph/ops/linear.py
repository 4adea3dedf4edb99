"""matmul: C = op(A) @ op(B) (+ bias), the dense / fully-connected layer."""

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, check_bias, register, show_shape


def _dims(in_shapes, attrs):
    a, b = in_shapes[0], in_shapes[1]
    for i, s in enumerate((a, b)):
        if len(s) != 2:
            raise OpError(f"matmul needs a 2-D matrix, got {show_shape(s)}", f"inputs[{i}]")
    m, k = (a[1], a[0]) if attrs["transpose_a"] else (a[0], a[1])
    kb, n = (b[1], b[0]) if attrs["transpose_b"] else (b[0], b[1])
    if k != kb:
        raise OpError(f"inner dimensions differ: A {show_shape(a)} gives K={k}, "
                      f"B {show_shape(b)} gives K={kb}", "inputs[1]")
    return m, n, k


def _infer(in_shapes, attrs, n_out):
    m, n, _ = _dims(in_shapes, attrs)
    check_bias(in_shapes, 2, n)
    return [(m, n)]


def bf16_round(x):
    """float32 values rounded to bfloat16 as kernels/bgemm does (nearest,
    ties to even; denormals flushed to a signed zero; NaN stays NaN), as
    float32 arrays."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exp0 = (u & 0x7F800000) == 0
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32) << 16
    r = np.where(exp0, u & 0x80000000, r)
    r = np.where(nan, (u | 0x00400000) & 0xFFFF0000, r)
    return r.astype(np.uint32).view(np.float32)


def _ref(arrays, attrs, n_out):
    a, b = arrays[0], arrays[1]
    if attrs.get("precision") == "bf16":
        # the contract: both operands rounded to bf16, exact products; the
        # kernel's fp32 sums differ from these float64 ones by its roundings
        a, b = bf16_round(a), bf16_round(b)
    if attrs["transpose_a"]:
        a = a.T
    if attrs["transpose_b"]:
        b = b.T
    out = np.matmul(a.astype(np.float64), b.astype(np.float64))
    if len(arrays) == 3:
        out = out + arrays[2]
    return [out.astype(np.float32)]


def _flops(in_shapes, out_shapes, attrs):
    m, n, k = _dims(in_shapes, attrs)
    return 2 * m * n * k + (m * n if len(in_shapes) == 3 else 0)


register(OpSpec(
    "matmul", ("a", "b", "bias"), 2, 3, _infer, _ref, _flops,
    attrs=[Attr("transpose_a", "bool", False, doc="use A^T ([K, M] stored)"),
           Attr("transpose_b", "bool", False, doc="use B^T ([N, K] stored)"),
           Attr("precision", "str", "fp32", choices=("fp32", "bf16"),
                doc="bf16: a and b rounded to bfloat16, products summed in fp32 "
                    "(AVX512_BF16 where the CPU has it, else portable C; b must be "
                    "a weight)")],
    doc="y[M, N] = op(a) @ op(b) (+ bias[N]); 2-D, accumulated in float64 "
        "by the reference"))


def _bmm_shapes(in_shapes):
    a, b = in_shapes
    for i, s in enumerate((a, b)):
        if len(s) < 2:
            raise OpError(f"batch_matmul needs matrices (rank >= 2), got {show_shape(s)}",
                          f"inputs[{i}]")
    if a[-1] != b[-2]:
        raise OpError(f"inner dimensions differ: {show_shape(a)} by {show_shape(b)}",
                      "inputs[1]")
    batch = []
    for k in range(1, max(len(a), len(b)) - 1):
        da = a[-2 - k] if k <= len(a) - 2 else 1
        db = b[-2 - k] if k <= len(b) - 2 else 1
        if da != db and 1 not in (da, db):
            raise OpError(f"batch dimensions of {show_shape(a)} and {show_shape(b)} do not "
                          "broadcast", "inputs[1]")
        batch.insert(0, max(da, db))
    return tuple(batch), a[-2], b[-1], a[-1]


def _bmm_infer(in_shapes, attrs, n_out):
    batch, m, n, _ = _bmm_shapes(in_shapes)
    return [batch + (m, n)]


def _bmm_flops(in_shapes, out_shapes, attrs):
    batch, m, n, k = _bmm_shapes(in_shapes)
    return 2 * int(np.prod(batch, dtype=np.int64)) * m * n * k


register(OpSpec(
    "batch_matmul", ("a", "b"), 2, 2, _bmm_infer,
    lambda arrays, attrs, n_out: [np.matmul(arrays[0].astype(np.float64),
                                            arrays[1].astype(np.float64)).astype(np.float32)],
    _bmm_flops,
    doc="y[..., M, N] = a[..., M, K] @ b[..., K, N] per batch, batch dimensions "
        "broadcast as numpy's (ONNX MatMul of rank >= 3)"))
