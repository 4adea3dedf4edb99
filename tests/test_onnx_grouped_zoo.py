"""The zoo's grouped and depthwise CNNs (benchmarks/zoo_models.py, small
sizes) import with one conv2d per grouped Conv, whatever the group count
(MobileNetV2 / EfficientNet-B0 / MnasNet / ShuffleNetV2 / ConvNeXt-T up to
960 groups), run on the engine and match ONNX Runtime within 1e-4 of the
output's scale."""

import importlib.util
import json
import sys
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
