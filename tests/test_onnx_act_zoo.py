"""EfficientNet-B0 and MobileNetV3 (benchmarks/zoo_models.py, small sizes)
imported from torchvision's ONNX export: every SiLU / HardSwish that follows
a conv is fused into that conv's epilogue (graph/passes/fuse.py's act), and
the model run by `hwtune run` matches ONNX Runtime within 1e-4 of the
output's scale (under whatever HWTUNE_ISA the suite runs with)."""

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
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
