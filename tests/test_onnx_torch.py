"""Models exported from PyTorch (torch.onnx.export, opset 17; and torch's
default dynamo exporter, opset 18, when onnxscript is installed) import,
run on the engine and match ONNX Runtime within 1e-4 of the output scale;
networks whose ops have not landed yet give one clear error line."""

import json
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

import onnx_models as M  # noqa: E402 (tests/ is on sys.path)
from conftest import invoke, one_line_error  # noqa: E402

from hwtune.native._lib import _find  # noqa: E402

TOL = 1e-4
RUNNER = _find().parent / "hwtune-run"


pytestmark = pytest.mark.usefixtures("scratch_cache")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(exporter, model name) -> (onnx path, example input)."""
    d = tmp_path_factory.mktemp("onnx")
    cache = {}

    def get(exporter, name, dynamic=False):
        key = (exporter, name, dynamic)
        if key not in cache:
            model, x = getattr(M, name)()
            path = d / f"{name}_{exporter}{'_dyn' if dynamic else ''}.onnx"
            cache[key] = (M.export(model, x, path, exporter, dynamic_batch=dynamic), x.numpy())
        return cache[key]
    return get


@pytest.mark.parametrize("exporter", M.exporters())
@pytest.mark.parametrize("name", ["resnet_cnn", "assorted", "mlp", "mobilenet_block",
                                  "transformer", "gru", "lstm", "dilated_cnn",
                                  "same_padding_cnn", "conv_transpose_net", "padded_cnn",
                                  "reducing_net", "strided_net", "bidirectional_gru"])
def test_import_run_matches_onnxruntime(exported, exporter, name, tmp_path):
    src, x = exported(exporter, name)
    out_json = tmp_path / f"{name}.json"
    res = invoke("import", src, "-o", out_json, "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert os.path.isfile(summary["weights"]) and summary["params"] > 0
    np.save(tmp_path / "x.npy", x)
    want = M.ort_outputs(src, {"x": x})["y"]
    for model in (out_json, src):  # the model.json, and the ONNX file directly
        out = tmp_path / "y.npz"
        res = invoke("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--save-outputs", out,
                     "--check", "--iterations", 2, "--warmup", 0, "--db", tmp_path / "r.db")
        assert res.exit_code == 0, res.output
        assert M.rel_err(np.load(out)["y"], want) <= TOL


def test_resnet_imports_convs_pools_and_the_dense_layer(exported, tmp_path):
    src, _ = exported("legacy", "resnet_cnn")
    out = tmp_path / "r.json"
    assert invoke("import", src, "-o", out).exit_code == 0
    ops = [o["op"] for o in json.loads(out.read_text())["ops"]]
    assert ops.count("conv2d") == 6 and "pool2d" in ops and "global_pool2d" in ops
    assert ops.count("add") == 2 and ops[-1] == "matmul"  # the residual adds; Gemm


@pytest.mark.parametrize("exporter", M.exporters())
def test_dynamic_batch_needs_a_shape(exported, exporter, tmp_path):
    src, x = exported(exporter, "resnet_cnn", dynamic=True)
    one_line_error(invoke("import", src, "-o", tmp_path / "m.json"),
                   'input "x"', "--shape x=", "--set")
    one_line_error(invoke("run", src, "--db", tmp_path / "r.db"), "--shape x=")
    for flag in (["--set", "batch=3"], ["--shape", "x=3x3x32x32"]):
        res = invoke("import", src, "-o", tmp_path / "m.json", "--json", *flag)
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["inputs"]["x"] == [3, 3, 32, 32]
    one_line_error(invoke("import", src, "--shape", "x=3x4x32x32"), "dim 1 is fixed at 3")
    one_line_error(invoke("import", src, "--shape", "img=1x3x32x32"), 'unknown input "img"')


@pytest.mark.parametrize("name, cell_ops", [("gru", 3), ("lstm", 4)])
def test_recurrent_layers_are_unrolled(exported, name, cell_ops, tmp_path):
    src, _ = exported("legacy", name)
    out = tmp_path / "r.json"
    assert invoke("import", src, "-o", out).exit_code == 0
    ops = [o["op"] for o in json.loads(out.read_text())["ops"]]
    # 2 layers x 6 steps: one recurrent matmul and one gate split per step
    # (GRU: two splits), one input projection per layer
    assert ops.count("matmul") == 2 * 6 + 2
    assert ops.count("split") == 2 * 6 * (2 if name == "gru" else 1)


def test_depthwise_conv_is_one_grouped_conv2d(exported, tmp_path):
    """A depthwise Conv imports as one conv2d with group (no split / concat)."""
    src, _ = exported("legacy", "mobilenet_block")
    out = tmp_path / "m.json"
    assert invoke("import", src, "-o", out).exit_code == 0
    ops = json.loads(out.read_text())["ops"]
    kinds = [o["op"] for o in ops]
    assert kinds.count("conv2d") == 3 and "split" not in kinds and "concat" not in kinds
    assert kinds.count("clip") == 2
    assert [o.get("attrs", {}).get("group", 1) for o in ops if o["op"] == "conv2d"] == [1, 8, 1]


@pytest.mark.parametrize("name, want", [
    ("dilated_cnn", {"dilation": 1 + 1 + 1}),  # the depthwise conv: one conv2d with group
    ("same_padding_cnn", {"padding_end": 3}),
    ("conv_transpose_net", {"conv_transpose2d": 1 + 1 + 2}),
])
def test_conv_forms_import_as_attributes_and_ops(exported, name, want, tmp_path):
    """Dilations, asymmetric pads and groups become conv2d attributes,
    ConvTranspose its own op (grouped: one per group), not a chain of
    workarounds."""
    src, _ = exported("legacy", name)
    out = tmp_path / "m.json"
    assert invoke("import", src, "-o", out).exit_code == 0
    ops = json.loads(out.read_text())["ops"]
    for key, count in want.items():
        got = sum(1 for o in ops if o["op"] == key or key in o.get("attrs", {}))
        assert got == count, (key, [(o["op"], o.get("attrs")) for o in ops])


def test_transformer_imports_its_own_ops(exported, tmp_path):
    src, _ = exported("legacy", "transformer")
    out = tmp_path / "t.json"
    assert invoke("import", src, "-o", out).exit_code == 0
    ops = [o["op"] for o in json.loads(out.read_text())["ops"]]
    # each layer's Q.K^T, scaling, softmax and .V: one fused attention op
    assert ops.count("layer_norm") == 4 and ops.count("attention") == 2
    assert ops.count("batch_matmul") == 0 and ops.count("softmax") == 0
    # each layer's exact GELU written out (Div, Erf, Add, Mul, Mul): one gelu op
    assert "transpose" in ops and ops.count("gelu") == 2 and "erf" not in ops


def test_compare_prints_every_side_and_agrees(exported, tmp_path):
    src, _ = exported("legacy", "resnet_cnn")
    md = tmp_path / "cmp.md"
    res = invoke("compare", src, "--with", "ort,torch", "--reps", 2, "--json",
                 "--markdown", md, "--db", tmp_path / "none.db")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] and [s["key"] for s in doc["sides"]] == ["hwtune", "ort", "torch"]
    for s in doc["sides"][1:]:
        assert s["agree"] and s["max_rel_err"] <= TOL and s["ratio"] > 0
        assert len(s["samples"]) == 2
    assert doc["cpu"] and doc["isa"] in ("generic", "avx2", "avx512")
    table = md.read_text()
    assert "| ONNX Runtime" in table and "| PyTorch" in table and "| hwtune is |" in table
    # the ratio column says which way in words (a wrong direction would read as a win)
    for s in doc["sides"][1:]:
        word = "faster" if round(s["ratio"], 2) > 1 else "slower" if round(s["ratio"], 2) < 1 \
            else "even"
        assert f"{s['ratio']:.2f}x {word}" in table or f"{s['ratio']:.2f}x ({word})" in table
    res = invoke("compare", src, "--with", "ort", "--reps", 1, "--threads", 1,
                 "--db", tmp_path / "none.db")
    assert res.exit_code == 0, res.output
    assert "ONNX Runtime" in res.stdout and "hwtune is" in res.stdout
    assert "x faster" in res.stdout or "x (slower)" in res.stdout or "x (even)" in res.stdout


def test_padded_cnn_compares_against_both_peers(exported, tmp_path):
    """Pad imports as pad ops (ZeroPad2d before a conv: the conv's own
    padding) and PyTorch's form of them agrees too."""
    src, _ = exported("legacy", "padded_cnn")
    out = tmp_path / "p.json"
    assert invoke("import", src, "-o", out).exit_code == 0
    doc = json.loads(out.read_text())["ops"]
    ops = [o["op"] for o in doc]
    assert ops.count("pad") == 2, ops
    assert [o["attrs"].get("padding_end") for o in doc if o["op"] == "conv2d"] == [None, [1, 2]]
    res = invoke("compare", src, "--with", "ort,torch", "--reps", 1, "--json",
                 "--db", tmp_path / "none.db")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] and all(s["agree"] for s in doc["sides"][1:])


@pytest.mark.parametrize("name, op, count", [("reducing_net", "reduce_sum", 4),
                                             ("strided_net", "gather", 4)])
def test_new_movement_and_reductions_import_and_compare(exported, name, op, count, tmp_path):
    src, _ = exported("legacy", name)
    out = tmp_path / "r.json"
    assert invoke("import", src, "-o", out).exit_code == 0
    ops = [o["op"] for o in json.loads(out.read_text())["ops"]]
    assert ops.count(op) == count and "global_pool2d" not in ops, ops
    res = invoke("compare", src, "--with", "ort,torch", "--reps", 1, "--json",
                 "--db", tmp_path / "none.db")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] and all(s["agree"] for s in doc["sides"][1:])


def test_onnx_run_is_cached_by_content(exported, tmp_path):
    src, _ = exported("legacy", "mlp")
    hashes = []
    for _ in range(2):
        res = invoke("run", src, "--iterations", 1, "--warmup", 0, "--json",
                     "--db", tmp_path / "r.db")
        assert res.exit_code == 0, res.output
        hashes.append(json.loads(res.stdout)["graph_hash"])
    assert hashes[0] == hashes[1]
    entries = list((tmp_path / "cache" / "onnx").iterdir())
    assert len(entries) == 1


def test_stand_alone_runner_reads_the_weights(exported, tmp_path):
    src, _ = exported("legacy", "resnet_cnn")
    out = tmp_path / "r.json"
    assert invoke("import", src, "-o", out).exit_code == 0
    db = tmp_path / "r.db"
    res = invoke("run", out, "--iterations", 1, "--warmup", 0, "--json", "--db", db)
    gh = json.loads(res.stdout)["graph_hash"]
    proc = subprocess.run([str(RUNNER), "--db", str(db), "--graph", gh[:12],
                           "--iterations", "2"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "weights: 14 tensors from " in proc.stdout
    os.rename(tmp_path / "r.weights.safetensors", tmp_path / "moved")
    proc = subprocess.run([str(RUNNER), "--db", str(db), "--graph", gh[:12]],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("hwtune-run: error: weights file ")
