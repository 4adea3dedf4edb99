"""Seeded mutation fuzzer over ONNX files: every mutant goes through
`hwtune import` and `hwtune run --check` as a user would run them, and
through ONNX Runtime on the same input; nothing may end in anything but a
clean refusal or a clean run that agrees with ONNX Runtime.

Seeds are five small valid models built here with onnx.helper (opset 17):
a conv + batch norm + relu + pool + gemm classifier, a depthwise / grouped
/ strided / dilated conv block, a transformer block (Gather embedding,
LayerNormalization, MatMul, Reshape, Transpose, Softmax, Concat, Slice,
Split), an LSTM and a Pad + Resize + pool model. A mutant changes one to
three things at the protobuf level: an attribute (kernel_shape, strides,
pads, dilations, group, axis, perm, ... set to 0, negative, huge, the
wrong length, the wrong type, or dropped), an initializer (dims that do
not match its data, another data type, awkward values in an index or
shape tensor), a graph input's or output's shape (0, negative, 2**40, a
symbolic name, no dims) or type, a dangling input, a duplicate output
name, a node fed by itself, nodes out of order, graph outputs removed, an
empty graph, the opset (0, 1, 999) or a domain, an op type swapped for
another; or the file's bytes (truncated, a bit flipped, a byte inserted).

Each mutant is written to a file and run by the CLI, each command in a
forked child of the worker with a timeout (the child runs hwtune's own
main(), as `python -m hwtune.cli.main` would, without paying the
interpreter's start-up per command): `hwtune import M.onnx -o M.json`
(with --set for the symbolic dims the fuzzer gave the inputs), and if that
succeeds `hwtune run M.json --check --reps 1 --input ... --save-outputs`,
with a scratch results.db and cache. ONNX Runtime (CPU, one thread) runs
the mutant on the same input. The verdicts:

  refused       non-zero exit, one clean line on stderr, no traceback
  ran           exit 0; outputs match ONNX Runtime's where it ran too
  INTERNAL      a traceback or hwtune's 'internal error' line
  CRASH         the command died on a signal
  HANG          a command took longer than --timeout seconds
  WRONG         both ran and the outputs differ (or --check failed: the
                engine and the numpy reference disagree)
  ACCEPTED-BAD  hwtune ran a model that onnx.checker (full check) or ONNX
                Runtime refuses: for review, not necessarily a bug

Mutants run in worker processes, each made by its worker from (seed,
index), so a failure is reproduced with --only INDEX. The test suite runs
60 (tests/test_fuzz_onnx.py); this script runs as many as asked:

    nice -n 10 python benchmarks/fuzz_onnx.py --count 1000 --seed 0 --workers 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

import fuzz_pool
from fuzz_pool import WorkerProcess

FAILURES = ("INTERNAL", "CRASH", "HANG", "WRONG")
REVIEW = ("ACCEPTED-BAD",)
# A mutant may legally ask for a 1 GiB tensor, which is not what a fuzzer on
# a shared machine should allocate: the limits hwtune refuses above.
WORKER_ENV = {"HWTUNE_MAX_TENSOR_BYTES": str(64 << 20), "HWTUNE_MAX_TOTAL_BYTES": str(256 << 20),
              "OMP_NUM_THREADS": "1"}
# Outputs agree when |hwtune - ort| <= ATOL_REL * max|ort| + RTOL * |ort|,
# the scale --check uses against the numpy reference (1e-4 x max|reference|)
# with room for ORT's own summation order.
ATOL_REL, RTOL = 1e-3, 1e-3
OPSET = 17
VOCAB = 50


# -- seeds -------------------------------------------------------------------
def seeds() -> List[Tuple[str, Any]]:
    """(name, ModelProto) pairs: small valid models (onnx.checker passes)."""
    import numpy as np
    from onnx import TensorProto, checker, helper, numpy_helper

    rng = np.random.default_rng(0)

    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    def ints(name, values):
        return numpy_helper.from_array(np.array(values, dtype=np.int64), name)

    def floats(name, values):
        return numpy_helper.from_array(np.array(values, dtype=np.float32), name)

    def vi(name, shape, et=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, et, shape)

    def model(name, nodes, inputs, outputs, inits):
        g = helper.make_graph(nodes, name, inputs, outputs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="fuzz_onnx")
        m.ir_version = 8
        checker.check_model(m, full_check=True)
        return name, m

    N = helper.make_node
    out = []
    # conv + bn + relu + pool + gemm classifier
    out.append(model("cnn", [
        N("Conv", ["x", "c1w", "c1b"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], epsilon=1e-5),
        N("Relu", ["bn"], ["r1"]),
        N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Conv", ["p1", "c2w"], ["c2"], kernel_shape=[3, 3], strides=[1, 1]),
        N("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        N("GlobalAveragePool", ["p2"], ["gp"]),
        N("Flatten", ["gp"], ["fl"], axis=1),
        N("Gemm", ["fl", "fcw", "fcb"], ["y"], transB=1, alpha=1.0, beta=1.0),
    ], [vi("x", [1, 3, 12, 12])], [vi("y", [1, 5])], [
        w("c1w", 4, 3, 3, 3), w("c1b", 4), floats("bn_s", [1.0, 0.5, 2.0, 1.5]),
        w("bn_b", 4), w("bn_m", 4), floats("bn_v", [1.0, 0.5, 2.0, 0.25]),
        w("c2w", 6, 4, 3, 3), w("fcw", 5, 6), w("fcb", 5)]))
    # depthwise, grouped, strided, dilated
    out.append(model("grouped", [
        N("Conv", ["x", "dww"], ["dw"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4),
        N("Relu", ["dw"], ["r"]),
        N("Conv", ["r", "gw", "gb"], ["g"], kernel_shape=[3, 3], group=2, strides=[2, 2],
          dilations=[2, 2], pads=[2, 2, 2, 2]),
        N("Clip", ["g", "lo", "hi"], ["cl"]),
        N("Conv", ["cl", "pw"], ["y"], kernel_shape=[1, 1]),
    ], [vi("x", [1, 4, 9, 9])], [vi("y", [1, 3, 5, 5])], [
        w("dww", 4, 1, 3, 3), w("gw", 6, 2, 3, 3), w("gb", 6), floats("lo", 0.0),
        floats("hi", 6.0), w("pw", 3, 6, 1, 1)]))
    # transformer block
    T, D, H = 6, 8, 2
    out.append(model("transformer", [
        N("Gather", ["emb", "ids"], ["e"], axis=0),
        N("LayerNormalization", ["e", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-5),
        N("MatMul", ["ln", "wqkv"], ["qkv"]),
        N("Split", ["qkv", "split"], ["q", "k", "v"], axis=-1),
        N("Reshape", ["q", "heads"], ["qh"]),
        N("Reshape", ["k", "heads"], ["kh"]),
        N("Reshape", ["v", "heads"], ["vh"]),
        N("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
        N("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
        N("Transpose", ["vh"], ["vt"], perm=[0, 2, 1, 3]),
        N("MatMul", ["qt", "kt"], ["s"]),
        N("Mul", ["s", "scale"], ["ss"]),
        N("Softmax", ["ss"], ["a"], axis=-1),
        N("MatMul", ["a", "vt"], ["o"]),
        N("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        N("Reshape", ["ot", "flat"], ["of"]),
        N("Concat", ["of", "e"], ["cat"], axis=-1),
        N("Slice", ["cat", "st", "en", "ax", "sp"], ["sl"]),
        N("Add", ["sl", "e"], ["y"]),
    ], [vi("ids", [1, T], TensorProto.INT64)], [vi("y", [1, T, D])], [
        w("emb", VOCAB, D, scale=1.0), floats("ln_s", np.linspace(0.5, 1.5, D)), w("ln_b", D),
        w("wqkv", D, 3 * D), ints("split", [D, D, D]), ints("heads", [1, T, H, D // H]),
        floats("scale", 1 / np.sqrt(D // H)), ints("flat", [1, T, D]), ints("st", [2]),
        ints("en", [2 + D]), ints("ax", [-1]), ints("sp", [1])]))
    # LSTM
    S, B, I, Hd = 4, 1, 3, 5
    out.append(model("lstm", [
        N("LSTM", ["x", "W", "R", "B"], ["Y", "Y_h"], hidden_size=Hd, direction="forward"),
        N("Squeeze", ["Y", "ax1"], ["ys"]),
        N("Tanh", ["ys"], ["y"]),
    ], [vi("x", [S, B, I])], [vi("y", [S, B, Hd]), vi("Y_h", [1, B, Hd])], [
        w("W", 1, 4 * Hd, I), w("R", 1, 4 * Hd, Hd), w("B", 1, 8 * Hd), ints("ax1", [1])]))
    # Pad + Resize + pool
    out.append(model("resize", [
        N("Pad", ["x", "pads"], ["p"], mode="constant"),
        N("Resize", ["p", "", "scales"], ["r"], mode="nearest"),
        N("AveragePool", ["r"], ["ap"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
          count_include_pad=0),
        N("Pad", ["ap", "pads2", "pv"], ["y"], mode="constant"),
    ], [vi("x", [1, 2, 5, 5])], [vi("y", [1, 2, 8, 8])], [
        ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]), floats("scales", [1, 1, 2, 2]),
        ints("pads2", [0, 0, 1, 0, 0, 0, 0, 1]), floats("pv", 0.5)]))
    return out


# -- mutation ----------------------------------------------------------------
AWKWARD_INTS = [0, -1, -2, 1, 2, 3, 5, 7, 100, 2 ** 31, 2 ** 40, -(2 ** 40), 2 ** 63 - 1,
                -(2 ** 63)]
ATTRS = ["kernel_shape", "strides", "pads", "dilations", "group", "axis", "perm", "split",
         "epsilon", "hidden_size", "direction", "mode", "transA", "transB", "alpha", "beta",
         "keepdims", "count_include_pad", "ceil_mode", "auto_pad", "coordinate_transformation_mode",
         "layout", "input_forget", "clip", "activations", "output_padding"]
OP_TYPES = ["Relu", "Conv", "MaxPool", "AveragePool", "Gemm", "MatMul", "Add", "Mul", "Softmax",
            "LogSoftmax", "Transpose", "Reshape", "Concat", "Slice", "Split", "Gather", "LSTM",
            "GRU", "Resize", "Pad", "Identity", "Flatten", "Squeeze", "Unsqueeze",
            "LayerNormalization", "BatchNormalization", "GlobalAveragePool", "Sum", "Max",
            "Where", "Expand", "Tile", "ConvTranspose", "ReduceMean", "Einsum", "NoSuchOp"]
DTYPES = ["INT64", "FLOAT16", "BFLOAT16", "DOUBLE", "STRING", "BOOL", "INT32", "UINT8", "INT8"]


def _awkward_int(rng: random.Random) -> int:
    return rng.choice(AWKWARD_INTS + [rng.randint(-4, 9)])


def _mutate_attr(m, rng: random.Random) -> str:
    from onnx import AttributeProto, helper
    nodes = list(m.graph.node)
    if not nodes:
        return "attr (no node)"
    node = rng.choice(nodes)
    attrs = list(node.attribute)
    if attrs and rng.random() < 0.75:
        a = rng.choice(attrs)
        name = a.name
    else:
        name, a = rng.choice(ATTRS), None
    how = rng.choice(["value", "value", "list", "length", "drop", "type", "huge"])
    if how == "drop" and a is not None:
        node.attribute.remove(a)
        return f"attr {node.op_type}.{name} dropped"
    if a is not None:
        node.attribute.remove(a)
    ints = list(a.ints) if a is not None and a.type == AttributeProto.INTS else [1, 1]
    if how == "value":
        value = _awkward_int(rng)
        if a is not None and a.type == AttributeProto.INTS and ints:
            ints[rng.randrange(len(ints))] = value
            value = ints
    elif how == "list":
        value = [_awkward_int(rng) for _ in range(max(1, len(ints)))]
    elif how == "length":
        value = ints[:-1] if len(ints) > 1 and rng.random() < 0.5 else ints + [_awkward_int(rng)]
        if not value:
            value = [1]
    elif how == "huge":
        value = rng.choice([2 ** 40, -(2 ** 40), 2 ** 62, [2 ** 40] * max(1, len(ints))])
    else:
        value = rng.choice([1.5, -0.0, float("nan"), float("inf"), "x", "NCHW", [0.5, 2.0],
                            b"bytes", ["a", "b"], 3])
    try:
        node.attribute.append(helper.make_attribute(name, value))
    except (ValueError, TypeError):
        node.attribute.append(helper.make_attribute(name, 0))
    return f"attr {node.op_type}.{name}={value!r:.40} ({how})"


def _mutate_init(m, rng: random.Random) -> str:
    import numpy as np
    from onnx import TensorProto, numpy_helper
    inits = list(m.graph.initializer)
    if not inits:
        return "init (none)"
    t = rng.choice(inits)
    how = rng.choice(["dims", "dims", "dtype", "retype", "values", "values", "values", "drop",
                      "empty", "rename"])
    if how == "dims":
        dims = list(t.dims)
        if dims and rng.random() < 0.6:
            dims[rng.randrange(len(dims))] = rng.choice([0, -1, 1, 2, 3, 2 ** 40, 100])
        else:
            dims = [rng.randint(1, 6) for _ in range(rng.randint(0, 4))]
        del t.dims[:]
        t.dims.extend(dims)
        return f"init {t.name} dims {dims}"
    if how == "dtype":  # the data stays, its type changes (a mismatch)
        arr = numpy_helper.to_array(t)
        t.CopyFrom(numpy_helper.from_array(arr, t.name))  # raw_data form
        dt = rng.choice(DTYPES)
        t.data_type = getattr(TensorProto, dt)
        return f"init {t.name} data_type {dt} (raw bytes kept)"
    if how == "retype":  # a consistent tensor of another type
        arr = numpy_helper.to_array(t)
        dt = rng.choice(["int64", "float16", "float64", "bool", "int32", "str"])
        try:
            new = numpy_helper.from_array(arr.astype(dt) if dt != "str" else
                                          arr.astype(str).astype(object), t.name)
        except Exception:
            return f"init {t.name} retype {dt} failed"
        t.CopyFrom(new)
        return f"init {t.name} retyped to {dt}"
    if how == "values":
        arr = numpy_helper.to_array(t).copy()
        if arr.size == 0:
            return f"init {t.name} values (empty)"
        flat = arr.reshape(-1)
        i = rng.randrange(flat.size)
        if arr.dtype.kind in "iu":
            flat[i] = rng.choice([0, -1, -2, 1, 2, 3, 7, 2 ** 31, 2 ** 40, -(2 ** 40),
                                  2 ** 63 - 1, -(2 ** 63)])
        else:
            flat[i] = rng.choice([0.0, -1.0, 1e30, -1e30, float("nan"), float("inf"), 1e-40,
                                  3.0, 0.5])
        t.CopyFrom(numpy_helper.from_array(arr, t.name))
        return f"init {t.name}[{i}] = {flat[i]!r}"
    if how == "drop":
        m.graph.initializer.remove(t)
        return f"init {t.name} dropped"
    if how == "empty":
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.ClearField("int64_data")
        return f"init {t.name} data cleared"
    old = t.name
    t.name = rng.choice([n.name for n in inits] + ["x", "y"])
    return f"init {old} renamed {t.name}"


def _mutate_io(m, rng: random.Random) -> str:
    from onnx import TensorProto
    g = m.graph
    io = list(g.input) + list(g.output)
    v = rng.choice(io)
    tt = v.type.tensor_type
    how = rng.choice(["dim", "dim", "dim", "sym", "nodims", "noshape", "adddim", "elem"])
    dims = tt.shape.dim
    if how == "dim" and len(dims):
        d = dims[rng.randrange(len(dims))]
        d.dim_value = rng.choice([0, -1, 1, 2, 7, 2 ** 40, 2 ** 31])
        return f"io {v.name} dim {d.dim_value}"
    if how == "sym" and len(dims):
        d = dims[rng.randrange(len(dims))]
        d.dim_param = rng.choice(["N", "batch", "seq", "N"])
        return f"io {v.name} dim {d.dim_param}"
    if how == "nodims":
        tt.shape.ClearField("dim")
        return f"io {v.name} rank 0"
    if how == "noshape":
        tt.ClearField("shape")
        return f"io {v.name} no shape"
    if how == "adddim":
        tt.shape.dim.add().dim_value = rng.choice([1, 2])
        return f"io {v.name} extra dim"
    dt = rng.choice(["INT64", "DOUBLE", "FLOAT16", "BOOL", "STRING", "INT32", "UNDEFINED"])
    tt.elem_type = getattr(TensorProto, dt)
    return f"io {v.name} elem_type {dt}"


def _mutate_graph(m, rng: random.Random) -> str:
    g = m.graph
    nodes = list(g.node)
    how = rng.choice(["dangling", "dup_output", "cycle", "reorder", "swap", "rm_output",
                      "rm_all_outputs", "empty", "rm_node", "rm_input", "extra_input",
                      "op_type", "op_type", "node_domain", "out_is_input", "dup_node"])
    if not nodes:
        return "graph (empty)"
    node = rng.choice(nodes)
    names = sorted({t for n in nodes for t in list(n.input) + list(n.output) if t}
                   | {i.name for i in g.input} | {i.name for i in g.initializer})
    if how == "dangling" and len(node.input):
        node.input[rng.randrange(len(node.input))] = "nope"
    elif how == "dup_output":
        node.output[rng.randrange(len(node.output))] = rng.choice(names)
    elif how == "cycle" and len(node.input):
        node.input[rng.randrange(len(node.input))] = node.output[0]
    elif how == "reorder":
        rng.shuffle(nodes)
        del g.node[:]
        g.node.extend(nodes)
    elif how == "swap" and len(nodes) > 1:
        i, j = rng.sample(range(len(nodes)), 2)
        nodes[i], nodes[j] = nodes[j], nodes[i]
        del g.node[:]
        g.node.extend(nodes)
    elif how == "rm_output" and len(g.output):
        del g.output[rng.randrange(len(g.output))]
    elif how == "rm_all_outputs":
        del g.output[:]
    elif how == "empty":
        del g.node[:]
    elif how == "rm_node":
        g.node.remove(node)
    elif how == "rm_input" and len(node.input):
        del node.input[rng.randrange(len(node.input))]
    elif how == "extra_input":
        node.input.append(rng.choice(names))
    elif how == "op_type":
        node.op_type = rng.choice(OP_TYPES)
    elif how == "node_domain":
        node.domain = rng.choice(["com.microsoft", "ai.onnx.ml", "bogus", "ai.onnx"])
    elif how == "out_is_input":
        g.output[0].name = rng.choice([i.name for i in g.input] + names)
    elif how == "dup_node":
        g.node.insert(rng.randrange(len(nodes) + 1), node)
    return f"graph {how} ({node.op_type})"


def _mutate_opset(m, rng: random.Random) -> str:
    how = rng.choice(["version", "version", "domain", "ir", "drop"])
    if how == "version":
        m.opset_import[0].version = rng.choice([0, 1, 7, 9, 11, 13, 21, 999])
        return f"opset {m.opset_import[0].version}"
    if how == "domain":
        m.opset_import[0].domain = rng.choice(["bogus", "ai.onnx.ml", "com.microsoft"])
        return f"opset domain {m.opset_import[0].domain}"
    if how == "ir":
        m.ir_version = rng.choice([0, 1, 3, 99])
        return f"ir_version {m.ir_version}"
    del m.opset_import[:]
    return "opset_import dropped"


MUTATORS = [(_mutate_attr, 4), (_mutate_init, 4), (_mutate_io, 2), (_mutate_graph, 4),
            (_mutate_opset, 1)]


def mutate_bytes(data: bytes, rng: random.Random) -> Tuple[bytes, str]:
    kind = rng.choice(["flip", "flip", "insert", "truncate"])
    edited = fuzz_pool.edit_bytes(data, kind, rng)
    data = edited if edited is not None else data[:rng.randrange(len(data) + 1)]
    return data, f"bytes {kind}"


def make_mutant(seed_models, index: int, base_seed: int) -> Dict[str, Any]:
    """Mutant `index` of the run seeded base_seed (reproducible alone):
    {"index", "what", "bytes"}."""
    rng = random.Random(base_seed * 1_000_003 + index)
    name, seed = seed_models[rng.randrange(len(seed_models))]
    m = type(seed)()
    m.CopyFrom(seed)
    desc = [name]
    funcs, weights = zip(*MUTATORS)
    for _ in range(rng.choice([1, 1, 2, 3])):
        try:
            desc.append(rng.choices(funcs, weights)[0](m, rng))
        except Exception as exc:  # noqa: BLE001 - an earlier mutation left nothing to read
            desc.append(f"(mutation skipped: {type(exc).__name__})")
    data = m.SerializeToString()
    if rng.random() < 0.1:
        data, kind = mutate_bytes(data, rng)
        desc.append(kind)
    return {"index": index, "what": "; ".join(desc), "bytes": data}


# -- inputs --------------------------------------------------------------------
_NP_OF = {1: "float32", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64"}


def make_inputs(data: bytes, rng_seed: int) -> Tuple[Optional[Dict[str, Any]], Dict[str, int]]:
    """The fixed random input of a mutant, by input name (None when its
    inputs cannot be given one: an unparseable file, no shape, dims <= 0 or
    too large), and the --set sizes of its symbolic dims."""
    import numpy as np
    import onnx
    try:
        m = onnx.load_from_string(data)
    except Exception:
        return None, {}
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(rng_seed)
    feeds, sets = {}, {}
    for v in m.graph.input:
        if v.name in inits:
            continue
        tt = v.type.tensor_type
        if not tt.HasField("shape") or tt.elem_type not in _NP_OF:
            return None, sets
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_param"):
                sets.setdefault(d.dim_param, 2)
                shape.append(sets[d.dim_param])
            elif d.HasField("dim_value") and 0 < d.dim_value <= 4096:
                shape.append(d.dim_value)
            else:
                return None, sets
        if int(np.prod(shape)) > 1 << 16:
            return None, sets
        dt = _NP_OF[tt.elem_type]
        if dt in ("int32", "int64"):
            feeds[v.name] = rng.integers(0, VOCAB, size=shape).astype(dt)
        elif dt == "bool":
            feeds[v.name] = rng.random(size=shape) < 0.5
        else:
            feeds[v.name] = rng.standard_normal(size=shape).astype(dt)
    return feeds, sets


# -- the oracle --------------------------------------------------------------
def _fork_cli(args: List[str], out_path: str, err_path: str, timeout: float,
              env: Dict[str, str]) -> Tuple[Optional[int], str, str]:
    """Run `hwtune ARGS` in a forked child (hwtune's main(), as the console
    script runs it): (return code or -signal, or None on timeout; stdout;
    stderr)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.setpgid(0, 0)
            fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd_out, 1)
            os.dup2(fd_err, 2)
            os.environ.update(env)
            sys.argv = ["hwtune", *args]
            from hwtune.cli.main import main
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - what the interpreter would print
            import traceback
            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = None
            break
        time.sleep(0.005)
    with open(out_path, errors="replace") as fh:
        out = fh.read()
    with open(err_path, errors="replace") as fh:
        err = fh.read()
    if status is None:
        return None, out, err
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status), out, err
    return os.WEXITSTATUS(status), out, err


def _judge_failure(code: Optional[int], err: str, what: str) -> Optional[Tuple[str, str]]:
    """The verdict of a command that did not succeed, or None if it did."""
    if code is None:
        return "HANG", f"{what}: timed out"
    if code < 0:
        return "CRASH", f"{what}: signal {-code}: {err.strip()[-200:]}"
    if "Traceback" in err or "internal error" in err:
        return "INTERNAL", f"{what}: {err.strip()[-300:]}"
    if code == 0:
        return None
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if not lines:
        return "INTERNAL", f"{what}: exit {code} with nothing on stderr"
    if "outputs differ from the numpy reference" in lines[-1]:
        return "WRONG", f"{what}: {lines[-1][:300]}"
    return "refused", f"{what}: {lines[-1][:200]}"


def _ort_run(data: bytes, feeds) -> Tuple[Optional[Dict[str, Any]], str]:
    """ONNX Runtime's outputs (None if it refuses the model), and why not."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4
    try:
        sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(None, feeds))), ""
    except Exception as exc:  # noqa: BLE001 - ORT refusing is information, not a finding
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:150] if str(exc) else ''}"


def _valid_onnx(data: bytes) -> Tuple[bool, str]:
    import onnx
    try:
        onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
        return True, ""
    except Exception as exc:  # noqa: BLE001
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:150] if str(exc) else ''}"


def _compare(ours: Dict[str, Any], ref: Dict[str, Any]) -> Optional[str]:
    """Why hwtune's outputs differ from ORT's, or None when they agree."""
    import numpy as np
    for name, r in ref.items():
        if name not in ours:
            return f"output {name} missing from hwtune's ({sorted(ours)})"
        o = np.asarray(ours[name])
        r = np.asarray(r)
        if r.dtype.kind not in "fiub":
            continue
        r = r.astype(np.float64)
        o = o.astype(np.float64)
        if o.shape != r.shape:
            return f"output {name}: shape {list(o.shape)} vs ORT's {list(r.shape)}"
        if o.size == 0:
            continue
        if not np.array_equal(np.isnan(o), np.isnan(r)):
            return f"output {name}: NaN in different places"
        fin = np.isfinite(r) & np.isfinite(o)
        if not np.array_equal(np.isfinite(o), np.isfinite(r)) or not np.array_equal(
                o[~fin & ~np.isnan(r)], r[~fin & ~np.isnan(r)]):
            return f"output {name}: infinities differ"
        if fin.any():
            scale = np.abs(r[fin]).max()
            err = np.abs(o[fin] - r[fin])
            bad = err > ATOL_REL * scale + RTOL * np.abs(r[fin]) + 1e-6
            if bad.any():
                return (f"output {name}: max |hwtune - ort| {err.max():.3g} "
                        f"(max|ort| {scale:.3g})")
    return None


def check_mutant(m: Dict[str, Any], timeout: float = 60.0,
                 report_hw=None) -> Tuple[str, str]:
    """(verdict, detail) for one mutant: import, run --check, ORT. report_hw
    (if given) is called with hwtune's verdict before ORT runs, so a driver
    can tell ORT dying in this process from hwtune failing."""
    import numpy as np
    tmp = tempfile.mkdtemp(prefix="fuzz-onnx-")
    try:
        path = os.path.join(tmp, "m.onnx")
        with open(path, "wb") as fh:
            fh.write(m["bytes"])
        feeds, sets = make_inputs(m["bytes"], m["index"])
        env = {"HWTUNE_DB": os.path.join(tmp, "results.db"),
               "HWTUNE_CACHE_DIR": os.path.join(tmp, "cache"), **WORKER_ENV}
        so, se = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        set_args = [a for k, v in sorted(sets.items()) for a in ("--set", f"{k}={v}")]
        model_json = os.path.join(tmp, "m.json")
        code, _, err = _fork_cli(["import", path, "-o", model_json, *set_args], so, se,
                                 timeout, env)
        verdict = _judge_failure(code, err, "import")
        if verdict is None:
            args = ["run", model_json, "--check", "--reps", "1", "--warmup", "0",
                    "--threads", "1", "--db", env["HWTUNE_DB"],
                    "--save-outputs", os.path.join(tmp, "out.npz")]
            for name, arr in (feeds or {}).items():
                f = os.path.join(tmp, f"in{len(args)}.npy")
                np.save(f, arr)
                args += ["--input", f"{name}={f}"]
            code, _, err = _fork_cli(args, so, se, timeout, env)
            verdict = _judge_failure(code, err, "run")
        ran = verdict is None
        if report_hw:
            report_hw(verdict or ("ran", ""))
        if not ran:
            return verdict
        valid, why = _valid_onnx(m["bytes"])
        ref, ort_why = _ort_run(m["bytes"], feeds) if feeds is not None else (None, "no input")
        if ref is None and ort_why != "no input":
            return "ACCEPTED-BAD", f"ORT refuses: {ort_why}"
        if not valid:
            return "ACCEPTED-BAD", f"onnx.checker refuses: {why}"
        if ref is not None:
            with np.load(os.path.join(tmp, "out.npz")) as z:
                ours = {k: z[k] for k in z.files}
            diff = _compare(ours, ref)
            if diff:
                return "WRONG", diff
            return "ran", "matches ORT"
        return "ran", ort_why
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- the driver ----------------------------------------------------------------
def _worker_loop(seed: int, timeout: float) -> None:
    """A worker process: reads mutant indices on stdin, makes each mutant
    itself (they are reproducible from (seed, index)), answers JSON lines on
    stdout: hwtune's verdict first ("hw"), then the final one."""
    os.environ.update(WORKER_ENV)
    import warnings
    warnings.simplefilter("ignore")
    import hwtune.cli.main  # noqa: F401 - loaded once, before the children fork
    seed_models = seeds()
    # The answers go on a descriptor of their own: whatever ONNX Runtime,
    # onnx or a library prints on stdout goes to stderr instead.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def say(doc):
        out.write(json.dumps(doc) + "\n")
        out.flush()

    for line in sys.stdin:
        index = int(line)
        m = make_mutant(seed_models, index, seed)
        verdict, detail = check_mutant(
            m, timeout, report_hw=lambda vd: say({"i": index, "hw": vd[0], "d": vd[1]}))
        say({"i": index, "v": verdict, "d": detail})


class _Worker(WorkerProcess):
    def __init__(self, seed: int, timeout: float):
        super().__init__([sys.executable, os.path.abspath(__file__), "--worker", "--seed",
                          str(seed), "--timeout", str(timeout)], {**os.environ, **WORKER_ENV})
        self.buf = b""

    def _line(self, timeout: float) -> Optional[bytes]:
        """The worker's next line (b"" when it died), None after timeout. Two
        lines may arrive in one read: the rest waits in self.buf (select
        on the pipe does not see a file object's buffer)."""
        import select
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return b""
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def ask(self, index: int, timeout: float) -> Tuple[str, str]:
        gone = self.send(index)
        if gone:
            return gone
        hw = None
        while True:
            # each of the two commands has its own timeout in the worker
            line = self._line(3 * timeout + 60)
            if line is None:
                self.kill()
                return ("HANG", "worker stuck") if hw is None else \
                    (hw[0], f"{hw[1]} (ONNX Runtime did not answer)")
            if not line:
                code = self.proc.wait()
                if hw is not None:  # ORT died in the worker: not hwtune's fault
                    return hw[0], f"{hw[1]} (ONNX Runtime died: exit {code})"
                return "CRASH", f"worker died (exit {code})"
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if "hw" in doc:
                hw = (doc["hw"], doc["d"])
                continue
            return doc["v"], doc["d"]


def run_fuzz(count: int, seed: int = 0, workers: Optional[int] = None,
             timeout: float = 60.0, progress=None, only: Optional[List[int]] = None
             ) -> Dict[str, Any]:
    """Run `count` mutants (or the indices `only`); returns {verdict: n}
    counts, the failures and the cases for review (each with its mutant's
    description) and the time taken."""
    workers = workers or max(1, len(os.sched_getaffinity(0)))
    indices = list(only) if only else list(range(count))
    t0 = time.monotonic()
    verdicts = fuzz_pool.drive(indices, lambda: _Worker(seed, timeout), timeout, workers,
                               progress)
    counts = Counter(v for v, _ in verdicts.values())
    failures, review = [], []
    if any(v in FAILURES + REVIEW for v, _ in verdicts.values()):
        seed_models = seeds()
        for i, (v, d) in sorted(verdicts.items()):
            if v in FAILURES + REVIEW:
                row = {"index": i, "verdict": v, "detail": d,
                       "mutant": make_mutant(seed_models, i, seed)["what"]}
                (failures if v in FAILURES else review).append(row)
    return {"count": len(indices), "seed": seed, "workers": workers, "seeds": len(seeds()),
            "verdicts": dict(counts), "failures": failures, "review": review,
            "refusals": Counter(d.split(": ", 1)[-1][:60] for v, d in verdicts.values()
                                if v == "refused").most_common(15),
            "seconds": round(time.monotonic() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per command")
    ap.add_argument("--only", type=int, action="append", help="run this mutant (repeatable)")
    ap.add_argument("--save", metavar="DIR", help="write the failing mutants' files here")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker_loop(args.seed, args.timeout)
        return 0

    def progress(done, total):
        if not args.json and sys.stderr.isatty():
            print(f"\r{done}/{total}", end="", file=sys.stderr, flush=True)

    out = run_fuzz(args.count, args.seed, args.workers, timeout=args.timeout,
                   progress=progress, only=args.only)
    if args.save and (out["failures"] or out["review"]):
        os.makedirs(args.save, exist_ok=True)
        seed_models = seeds()
        for f in out["failures"] + out["review"]:
            with open(os.path.join(args.save, f"{args.seed}-{f['index']}.onnx"), "wb") as fh:
                fh.write(make_mutant(seed_models, f["index"], args.seed)["bytes"])
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        fuzz_pool.print_summary(out, out["failures"][:60] + out["review"][:40], 13)
    return 1 if out["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
