"""What a model may cost (bytes, depth, strings, expansion), what its values
may be (finite float32 data of the right length, names C can store,
integers the engine's 32-bit attributes hold), var overrides of the
declared kind, and the one validation path: a command refuses what the
engine would (asked after validation), with a located message naming how to
raise each limit."""

import copy
import json

import pytest

from hwtune.graph import GraphError, load_model
from hwtune.graph.limits import Limits, parse_size
from hwtune.errors import UsageError

TINY = {"inputs": [{"name": "x", "shape": [2, 4]}], "params": [{"name": "w", "shape": [4, 4]}],
        "ops": [{"name": "y", "op": "matmul", "inputs": ["x", "w"]}], "outputs": ["y"]}
COMPACT = {"vars": {"n": 3, "flag": True, "hoist": 0, "rate": 0.5, "tag": "L"},
           "inputs": [{"name": "x", "shape": [2, 4]}],
           "ops": [{"repeat": {"var": "i", "range": [1, "${n + 1}"]}, "body": [
               {"name": "${tag}${i}", "op": "relu", "inputs": ["${'x' if i == 1 else tag + (i - 1)}"]}]}],
           "outputs": ["${tag}${n}"]}


def refused(source, *args, **kw):
    with pytest.raises(GraphError) as err:
        load_model(source, *args, **kw)
    return [str(p) for p in err.value.problems], str(err.value)


def edited(**changes):
    doc = copy.deepcopy(TINY)
    for path, value in changes.items():
        node, keys = doc, path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        node[keys[-1]] = value
    return doc


# -- what is read --------------------------------------------------------------
def test_file_size_limit_names_its_variable(tmp_path, monkeypatch):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(TINY))
    monkeypatch.setenv("HWTUNE_MAX_MODEL_BYTES", "100")
    probs, msg = refused(str(path))
    assert msg == (f"{path}: the file is larger than 100 B (raise it with "
                   "HWTUNE_MAX_MODEL_BYTES=SIZE)")
    monkeypatch.setenv("HWTUNE_MAX_MODEL_BYTES", "1KiB")
    assert load_model(str(path)).outputs == ["y"]


def test_dev_zero_stops_at_the_limit():
    _, msg = refused("/dev/zero")
    assert msg.endswith("the file is larger than 64.0 MiB (raise it with "
                        "HWTUNE_MAX_MODEL_BYTES=SIZE)")


@pytest.mark.parametrize("data, words", [
    (b"\xff\xfe{\x00}\x00", "the file is UTF-16 text: save it as UTF-8"),
    (b'{"name": "caf\xe9"}', "1:14: not UTF-8 text: byte 0xe9"),
    (b"\x00\x13\xa7\xc4", "not UTF-8 text"),
])
def test_bytes_that_are_not_utf8(tmp_path, data, words):
    path = tmp_path / "m.json"
    path.write_bytes(data)
    assert words in refused(str(path))[1]


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "m.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(TINY).encode())
    assert load_model(str(path)).name == "model"


def test_depth_limit_before_the_parser_recurses(tmp_path):
    path = tmp_path / "m.json"
    path.write_text("[" * 100000 + "]" * 100000)
    assert refused(str(path))[1].endswith(
        "JSON nested 100000 deep, more than 64 (raise it with HWTUNE_MAX_JSON_DEPTH=N)")
    deep = {"a": 1}
    for _ in range(70):  # a document built in code is checked too
        deep = {"a": deep}
    assert "nested more than 64 deep" in refused(dict(TINY, comment=deep))[1]


def test_string_built_by_doubling_stops_at_the_limit():
    doc = copy.deepcopy(COMPACT)
    doc["vars"]["s0"] = "ab"
    for i in range(1, 41):
        doc["vars"][f"s{i}"] = f"${{s{i - 1} + s{i - 1}}}"
    _, msg = refused(doc)
    assert "the string would be longer than 1000000 characters (raise it with " \
           "HWTUNE_MAX_STRING_CHARS=N)" in msg


def test_nan_infinity_and_numbers_beyond_float32():
    assert refused(edited(**{"params__0__init": "constant",
                             "params__0__value": 1e39}))[0][0].startswith(
        "params[0].value: must be a finite float32")
    doc = edited(**{"params__0__data": [float("nan")] + [1.0] * 15})
    assert refused(doc)[0] == ["params[0].data[0]: nan is not a finite number"]


def test_data_length_and_type_are_checked_at_validation():
    assert refused(edited(params__0__data=[1.0] * 15))[0] == [
        "params[0].data: 15 values for shape [4, 4] (16 elements)"]
    assert refused(edited(params__0__data=["a"] * 16))[0] == [
        "params[0].data: value 0 is 'a': data holds numbers only"]
    ok = load_model(edited(params__0__data=[[1.0] * 4] * 4))  # nested, row-major
    assert ok.params[0].init["data"][0] == [1.0] * 4


@pytest.mark.parametrize("name, words", [
    ("x\ud800", "lone surrogate"), ("x\u0000y", "control character U+0000"),
    ("x\u0007", "control character U+0007"),
])
def test_names_the_engine_cannot_store(name, words):
    doc = edited(inputs__0__name=name, ops__0__inputs=[name, "w"])
    assert any(words in p for p in refused(doc)[0])


def test_integers_beyond_the_engines_32_bits():
    conv = {"inputs": [{"name": "x", "shape": [1, 3, 8, 8]}],
            "params": [{"name": "w", "shape": [4, 3, 3, 3]}],
            "ops": [{"name": "y", "op": "conv2d", "inputs": ["x", "w"],
                     "attrs": {"stride": 10 ** 30}}], "outputs": ["y"]}
    assert "is out of range: integers here are -2147483648..2147483647" in refused(conv)[1]
    conv["ops"][0]["attrs"]["stride"] = 2 ** 30  # fits, but strides past the input
    assert "stride 1073741824,1073741824 is larger than the padded input 8x8" in refused(conv)[1]
    conv["ops"][0]["attrs"]["stride"] = 8
    assert load_model(conv).shapes["y"] == (1, 4, 1, 1)
    big = edited(inputs__0__shape=[2 ** 31, 4])
    assert "dimensions must be at most 2147483647" in refused(big)[1]


def test_slice_bounds_take_int64_as_in_onnx():
    doc = edited(ops=[TINY["ops"][0], {"name": "z", "op": "slice", "inputs": ["y"],
                                       "attrs": {"axis": 1, "end": 2 ** 63 - 1}}],
                 outputs=["z"])
    assert load_model(doc).shapes["z"] == (2, 4)


# -- var overrides ---------------------------------------------------------------
@pytest.mark.parametrize("override, words", [
    ({"n": 0}, "override n=0: must be an integer >= 1 (the model declares n = 3, a count or "
               "size)"),
    ({"n": 2.5}, "override n=2.5: must be an integer like the declared n = 3"),
    ({"flag": 0}, "override flag=0: must be true or false like the declared flag = true"),
    ({"hoist": -1}, "override hoist=-1: must be an integer >= 0 (the model declares hoist = 0)"),
    ({"rate": "fast"}, "override rate=fast: must be a number like the declared rate = 0.5"),
])
def test_overrides_keep_the_declared_kind(override, words):
    probs, _ = refused(COMPACT, override)
    assert probs == [f"vars.{next(iter(override))}: {words}"]


def test_overrides_of_the_right_kind_work():
    g = load_model(COMPACT, {"n": 4.0, "hoist": 0, "tag": 7})
    assert g.outputs == ["74"] and len(g.ops) == 4


def test_override_kind_follows_the_template_not_the_child(tmp_path):
    """lstm_medium sets hoist 5 over the template's 0: 0 stays allowed."""
    base = tmp_path / "base.json"
    base.write_text(json.dumps(COMPACT))
    child = tmp_path / "child.json"
    child.write_text(json.dumps({"extends": "base.json", "vars": {"hoist": 5}}))
    assert load_model(str(child), {"hoist": 0}).vars["hoist"] == 0


# -- limits on sizes: flags and variables -----------------------------------------
def test_limits_from_env_and_flags(monkeypatch):
    monkeypatch.setenv("HWTUNE_MAX_TENSOR_BYTES", "1KiB")
    assert Limits.from_env().max_tensor_bytes == 1024
    assert Limits.from_env(max_tensor_bytes=7).max_tensor_bytes == 7
    monkeypatch.setenv("HWTUNE_MAX_TENSOR_BYTES", "lots")
    with pytest.raises(UsageError, match='invalid HWTUNE_MAX_TENSOR_BYTES "lots"'):
        Limits.from_env()
    assert parse_size("1.5g", "x") == 3 << 29


# -- one validation path ------------------------------------------------------------
def test_what_the_engine_refuses_validate_refuses_located(monkeypatch, tmp_path):
    """After validation the commands ask the engine (lowering the graph as
    `run` does): a refusal of the C graph becomes a located problem (forced
    here: the two sets of rules agree). Validation alone does not ask."""
    from hwtune.engine import lower
    from hwtune.errors import EngineGraphError
    from hwtune.sources import load_any

    def refuse(graph, costs=None):
        exc = EngineGraphError('op "y": attribute "k" has no values')
        exc.subject = ("op", 0)
        raise exc

    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    monkeypatch.setattr(lower, "lower_graph", refuse)
    assert load_model(TINY).shapes["y"] == (2, 4)
    with pytest.raises(GraphError) as err:
        load_any(str(path))
    assert [str(p) for p in err.value.problems] == [
        'ops[0]: the engine refuses it: op "y": attribute "k" has no values']
    assert str(err.value).startswith(f"{path}: ops[0]: the engine refuses it")


@pytest.mark.parametrize("op, words", [
    ("rellu", 'unknown op "rellu" (did you mean "relu"?)'),
    ("Relu", 'unknown op "Relu" (did you mean "relu"?)'),
    # two ops as close: both named (conv3d joined the registry)
    ("conv", 'unknown op "conv" (did you mean "conv2d" or "conv3d"?)'),
    ("swish", 'unsupported op "swish" (supported: abs, '),
    ("group_norm", 'unsupported op "group_norm" (supported: '),
    ("einsum", 'unsupported op "einsum" (supported: '),
])
def test_unknown_ops_suggest_only_close_names(op, words):
    probs, _ = refused(edited(ops__0__op=op))
    assert probs[0].startswith("ops[0].op: " + words)


def test_kernels_never_see_a_tensor_no_run_could_hold(tmp_path):
    """Found by the fuzzer: shape inference asks the C CONV template for its
    knobs, which divided by an overflowed int (SIGFPE) for 2**31 - 1 output
    channels. Declared tensors are sized first, and no tensor may pass 2**31
    elements whatever the limits; run in a process of its own, so a
    regression is a failed test, not a dead test run."""
    import subprocess
    import sys
    conv = {"inputs": [{"name": "x", "shape": [2, 64, 8, 8]}],
            "params": [{"name": "w", "shape": [2 ** 31 - 1, 64, 3, 3]}],
            "ops": [{"name": "y", "op": "conv2d", "inputs": ["x", "w"]}], "outputs": ["y"]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(conv))
    for env in ({}, {"HWTUNE_MAX_TENSOR_BYTES": "1000GiB", "HWTUNE_MAX_TOTAL_BYTES": "10TiB"}):
        p = subprocess.run([sys.executable, "-m", "hwtune.cli.main", "model", "validate",
                            str(path)], capture_output=True, text=True, timeout=120,
                           env={**__import__("os").environ, **env})
        assert p.returncode == 2, p.stderr
        assert 'tensor "w" [2147483647, 64, 3, 3]' in p.stderr
    conv["inputs"][0]["shape"] = [64, 4, 64, 64]
    conv["params"][0]["shape"] = [2 ** 21, 4, 1, 1]
    assert "has more than 2147483647 elements" in refused(conv)[1]
