"""The zoo's grouped and depthwise CNNs (benchmarks/zoo_models.py, small
sizes) import with one conv2d per grouped Conv, whatever the group count
(MobileNetV2 / EfficientNet-B0 / MnasNet / ShuffleNetV2 / ConvNeXt-T up to
960 groups), run on the engine and match ONNX Runtime within 1e-4 of the
output's scale. EfficientNet-B0 and MobileNetV3: every SiLU / HardSwish
that follows a conv is fused into that conv's epilogue (graph/passes/fuse.py's
act), and the model still matches (under whatever HWTUNE_ISA the suite runs
with)."""

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import onnx
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
# torchvision itself is imported by zoo_models (with its detection ops'
# registrations stubbed out): here only whether it is installed.
if importlib.util.find_spec("torchvision") is None:
    pytest.skip("torchvision is not installed (pip install .[test])", allow_module_level=True)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from conftest import invoke  # noqa: E402 (tests/ is on sys.path)
from onnx_models import run_matches_ort  # noqa: E402
import zoo_models as Z  # noqa: E402

from hwtune.graph import load_model  # noqa: E402
from hwtune.graph.passes.fuse import fuse_conv, fused_ops  # noqa: E402


TOL = 1e-4


pytestmark = pytest.mark.usefixtures("scratch_cache")


@pytest.mark.parametrize("name", ["mobilenet_v2", "efficientnet_b0", "mnasnet1_0",
                                  "shufflenet_v2_x1_0", "convnext_tiny", "resnext50_32x4d",
                                  "regnet_y_400mf"])
def test_grouped_zoo_model_matches_onnxruntime(name, tmp_path):
    built = Z.BY_NAME[name].build(True)
    src = Z.export(built, tmp_path / f"{name}.onnx")
    grouped = sum(1 for n in onnx.load(src).graph.node if n.op_type == "Conv"
                  and any(a.name == "group" and a.i > 1 for a in n.attribute))
    assert grouped > 0
    out_json = tmp_path / f"{name}.json"
    res = invoke("import", src, "-o", out_json)
    assert res.exit_code == 0, res.output
    ops = json.loads(out_json.read_text())["ops"]
    assert sum(1 for o in ops if o["op"] == "conv2d"
               and o.get("attrs", {}).get("group", 1) > 1) == grouped
    run_matches_ort(built, src, tmp_path, TOL)


# model -> (activation, how many of its activations follow a conv): all of
# EfficientNet-B0's 49 SiLUs (stem, expand, depthwise and the
# squeeze-excitation's first conv); MobileNetV3's HardSwishes but the one
# after the classifier's first Linear.
CASES = {"efficientnet_b0": ("silu", 49), "mobilenet_v3_small": ("hard_swish", 18),
         "mobilenet_v3_large": ("hard_swish", 20)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_activation_fused_into_convs_matches_onnxruntime(name, tmp_path):
    act, n_fused = CASES[name]
    built = Z.BY_NAME[name].build(True)
    src = Z.export(built, tmp_path / f"{name}.onnx")
    out_json = tmp_path / f"{name}.json"
    res = invoke("import", src, "-o", out_json)
    assert res.exit_code == 0, res.output
    graph = load_model(str(out_json))
    fused = fuse_conv(graph)
    acts = Counter(op.resolved.get("act") for op in fused.ops if op.op == "conv2d")
    assert acts[act] == n_fused
    absorbed = fused_ops(fused)
    assert sum(1 for op in graph.ops if op.op == act and op.name in absorbed) == n_fused
    assert Counter(op.op for op in fused.ops)[act] == Counter(
        op.op for op in graph.ops)[act] - n_fused
    run_matches_ort(built, src, tmp_path, TOL)
