"""Dynamic models (a vertex function over per-sample input graphs, the Cavs
way): every bundled model under every policy equals the per-sample numpy
reference; on 1,000 random trees and DAGs each vertex is evaluated exactly
once, after its children; the model format's and the sample files' errors
are one located line with exit 2; `hwtune run --inputs` end to end."""

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from hwtune.dynamic.executor import (DynamicEngine, DynConfig, compare, parse_samples,
                                     read_samples)
from hwtune.dynamic.generate import samples as generate, write_jsonl
from hwtune.dynamic.model import load_dynamic
from hwtune.dynamic.reference import run_reference
from hwtune.graph.errors import GraphError
from hwtune.native.dynamic import SamplesError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DYN = os.path.join(ROOT, "configs", "dynamic")
BUNDLED = sorted(f[:-5] for f in os.listdir(DYN) if f.endswith(".json"))
# Small sizes: the tests check the computation, not the speed.
SMALL = {"tree_lstm_childsum": {"hidden": 24, "embed": 16, "vocab": 40},
         "tree_lstm_binary": {"hidden": 24, "embed": 16, "vocab": 40},
         "var_lstm": {"hidden": 24, "embed": 16, "vocab": 40},
         "tree_fc": {"hidden": 24, "vocab": 40}}


def small(name):
    model = load_dynamic(os.path.join(DYN, name + ".json"), SMALL[name])
    spec = dict(model.samples)
    if spec["generator"] == "complete-tree":
        spec["leaves"] = 32
    return model, spec


def test_every_bundled_model_has_small_sizes():
    assert set(BUNDLED) == set(SMALL)


@pytest.mark.parametrize("name", BUNDLED)
def test_every_policy_equals_the_per_sample_reference(name, tmp_path):
    model, spec = small(name)
    path = str(tmp_path / "s.jsonl")
    write_jsonl(path, generate(spec, 24, seed=3, vocab=model.vocab))
    s = read_samples(model, path)
    want = run_reference(model, s.arrays())["readouts"]
    n_groups = {}
    # batch 5 (batches of unequal length), chunk 8 (groups split in pieces)
    for policy in ("batched", "by-depth", "serial"):
        for batch, chunk in ((5, 8), (24, 256)):
            cfg = DynConfig(policy=policy, batch=batch, chunk=chunk, threads=2)
            with DynamicEngine(model, s, cfg) as e:
                e.run()
                got = e.readouts()
                res = compare(model, got, want)
                assert res["ok"], (policy, batch, res)
                assert got[0][0].shape[0] == (s.count if model.readouts[0].at != "every"
                                              else s.n_vertices)
                n_groups[policy, batch] = e.groups()
    # serial evaluates one vertex per F call; batching merges them
    assert n_groups["serial", 24] == (s.n_vertices, s.n_vertices)
    assert n_groups["batched", 24][0] < n_groups["batched", 5][0] < s.n_vertices


def test_a_thousand_random_graphs_each_vertex_once_after_its_children(tmp_path):
    model = load_dynamic(os.path.join(DYN, "tree_lstm_childsum.json"),
                         {"hidden": 8, "embed": 8, "vocab": 20})
    path = str(tmp_path / "dags.jsonl")
    items = []
    for i, item in enumerate(generate({"generator": "random-dag", "vertices": [1, 40],
                                       "arity": [1, 5]}, 700, seed=11, vocab=20)):
        items.append(item)
    items += list(generate({"generator": "sst-tree", "leaves": [1, 30]}, 200, seed=12,
                           vocab=20))
    items += list(generate({"generator": "sentence", "length": [1, 50]}, 100, seed=13,
                           vocab=20))
    write_jsonl(path, items)
    s = read_samples(model, path)
    assert s.count == 1000
    arr = s.arrays()
    want = run_reference(model, arr)
    for policy in ("batched", "by-depth", "serial"):
        cfg = DynConfig(policy=policy, batch=37, chunk=16, threads=2)
        with DynamicEngine(model, s, cfg, keep_states=True, record=True) as e:
            e.run()
            count, group = e.ex.evaluations()
            assert (count == 1).all(), policy
            voff, coff, kids = arr["vertex_offsets"], arr["child_offsets"], arr["children"]
            for i in range(s.count):
                v0 = voff[i]
                for v in range(v0, voff[i + 1]):
                    for c in kids[coff[v]:coff[v + 1]]:
                        assert group[v0 + c] < group[v], (policy, i, v, c)
            for got, ref in zip(e.states(), want["states"]):
                np.testing.assert_allclose(got, ref, atol=1e-5)


def _write(tmp_path, text, name="bad.jsonl"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


GOOD_TREE = '{"tokens": [1, 2, null], "children": [[], [], [0, 1]]}\n'


@pytest.mark.parametrize("text,needles", [
    (GOOD_TREE + '{"tokens": [1, 2], "children": [[1], [0]]}\n', ["line 2", "cycle"]),
    (GOOD_TREE * 2 + '{"tokens": [1, 2], "children": [[], [5]]}\n', ["line 3", "5"]),
    ('{"tokens": [], "children": []}\n', ["line 1"]),
    (GOOD_TREE + '{"tokens": [1, 2, 3, null], "children": [[], [], [], [0, 1, 2]]}\n',
     ["line 2", "arity"]),
    (GOOD_TREE + '{"tokens": [1, 99, null], "children": [[], [], [0, 1]]}\n',
     ["line 2", "99"]),
    (GOOD_TREE + '{"n": 10000000, "children": []}\n', ["line 2", "max_vertices"]),
    ('{"tokens": [1, 2, null], "children": [[], [], [0, 1]]\n', ["line 1"]),
])
def test_bad_sample_files_are_one_located_line_exit_2(tmp_path, text, needles):
    model = str(tmp_path / "m.json")
    with open(os.path.join(DYN, "tree_lstm_binary.json")) as fh:
        doc = json.load(fh)
    doc["vars"].update(hidden=8, embed=8, vocab=50)
    with open(model, "w") as fh:
        json.dump(doc, fh)
    res = CliRunner().invoke(cli, ["run", model, "--inputs", _write(tmp_path, text),
                                   "--iterations", "1"])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    for n in needles:
        assert n in lines[0], lines[0]


FEATURES_MODEL = {
    "name": "feat", "params": [{"name": "W", "shape": [3, 4]}],
    "vertex": {"input": {"name": "x", "features": 3},
               "states": [{"name": "h", "width": 4, "update": "h_new"}],
               "children": [{"name": "hs", "state": "h", "reduce": "sum"}],
               "readouts": [{"name": "all", "at": "every", "reads": {"hv": "h"},
                             "outputs": ["y"]}]},
    "ops": [{"name": "xw", "op": "matmul", "inputs": ["x", "W"]},
            {"name": "h_new", "op": "add", "inputs": ["xw", "hs"]},
            {"name": "y", "op": "tanh", "inputs": ["hv"]}],
}


def test_feature_rows_and_a_wrong_feature_width(tmp_path):
    model = load_dynamic(FEATURES_MODEL)
    s = parse_samples(model, '{"features": [[1, 2, 3], [0.5, 0, -1], null], '
                             '"children": [[], [0], [0, 1]]}\n')
    want = run_reference(model, s.arrays())["readouts"]
    with DynamicEngine(model, s, DynConfig(batch=4, threads=1)) as e:
        e.run()
        assert compare(model, e.readouts(), want)["ok"]
        assert e.readouts()[0][0].shape == (3, 4)
    with pytest.raises(SamplesError, match="line 2"):
        parse_samples(model, '{"features": [[1, 2, 3]]}\n{"features": [[1, 2]]}\n')


@pytest.mark.parametrize("edit,needle", [
    (lambda d: d["ops"].append({"name": "sm", "op": "softmax", "inputs": ["y"],
                                "attrs": {"axis": 0}}), "axis"),
    (lambda d: d["vertex"]["states"][0].update(width=5), r"\[1, 5\]"),
    (lambda d: d["vertex"]["states"][0].update(update="x"), "per-vertex op output|update"),
    (lambda d: d["vertex"]["children"][0].update(state="nope"), "no state"),
    (lambda d: d["vertex"].update(input={"name": "x"}), "tokens"),
    (lambda d: d.update(inputs=[]), "derives"),
    (lambda d: d["vertex"]["readouts"][0].update(at="middle"), "root"),
])
def test_model_format_errors_are_located(edit, needle):
    doc = json.loads(json.dumps(FEATURES_MODEL))
    edit(doc)
    with pytest.raises(GraphError, match=needle):
        load_dynamic(doc)


def test_cli_samples_then_run_with_check_and_json(tmp_path):
    path = str(tmp_path / "t.jsonl")
    r = CliRunner()
    res = r.invoke(cli, ["model", "samples", "tree_lstm_childsum", "-o", path, "--count", "12",
                         "--set", "hidden=16", "--set", "embed=8", "--set", "vocab=30"])
    assert res.exit_code == 0, res.output
    res = r.invoke(cli, ["run", "tree_lstm_childsum", "--inputs", path, "--set", "hidden=16",
                         "--set", "embed=8", "--set", "vocab=30", "--batch", "1,4",
                         "--policy", "batched,serial", "--iterations", "2", "--threads", "1",
                         "--check", "--json", "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["samples"] == 12
    assert [(x["policy"], x["batch"]) for x in out["results"]] == [
        ("batched", 1), ("serial", 1), ("batched", 4), ("serial", 4)]
    assert all(x["check"]["ok"] and x["samples_per_s"] > 0 for x in out["results"])


def test_cli_dynamic_model_without_inputs_and_bad_flags(tmp_path):
    r = CliRunner()
    res = r.invoke(cli, ["run", "tree_fc"])
    assert res.exit_code == 2 and "--inputs" in res.stderr, res.output
    path = _write(tmp_path, GOOD_TREE)
    res = r.invoke(cli, ["run", "tree_fc", "--inputs", path, "--policy", "greedy"])
    assert res.exit_code == 2 and "--policy" in res.stderr, res.output
    res = r.invoke(cli, ["run", "tree_fc", "--inputs", path, "--chunk", "3"])
    assert res.exit_code == 2 and "chunk" in res.stderr, res.output


def test_schema_accepts_the_bundled_dynamic_models():
    jsonschema = pytest.importorskip("jsonschema")
    with open(os.path.join(ROOT, "configs", "model.schema.json")) as fh:
        validator = jsonschema.Draft202012Validator(json.load(fh))
    for name in BUNDLED:
        with open(os.path.join(DYN, name + ".json")) as fh:
            validator.validate(json.load(fh))


def test_a_static_model_naming_a_tensor_vertex_is_not_dynamic(tmp_path):
    from hwtune.dynamic.sources import find_dynamic
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"inputs": [{"name": "vertex", "shape": [2]}],
                                "ops": [{"name": "y", "op": "relu", "inputs": ["vertex"]}],
                                "outputs": ["y"]}))
    assert find_dynamic(str(path)) is None
    path.write_text(json.dumps(FEATURES_MODEL))
    assert find_dynamic(str(path)) == str(path)
