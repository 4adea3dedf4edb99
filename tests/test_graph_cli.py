"""`hwtune model ...`: exit codes, one-line errors, --json, generated files."""

import json
import os

import click
import pytest
from click.testing import CliRunner

from hwtune.cli.model_cmd import model
from hwtune.graph import load_model
from hwtune.graph.generators import pathnet

MODELS = os.path.join(os.path.dirname(__file__), "..", "configs", "models")
LSTM_SMALL = os.path.join(MODELS, "lstm_small.json")


def runner():
    """stderr kept apart (click 8.2 always does; 8.1 needs mix_stderr)."""
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def invoke(*args):
    return CliRunner().invoke(model, list(args), catch_exceptions=False)


def test_validate_ok_and_json():
    res = invoke("validate", LSTM_SMALL)
    assert res.exit_code == 0
    assert res.output == "ok: lstm-small: 1040 ops, 12 params, 28 inputs\n"
    res = invoke("validate", LSTM_SMALL, "--json", "--set", "seq=2")
    assert json.loads(res.output) == {"ok": True, "name": "lstm-small", "ops": 104}


def test_validate_error_is_one_line_with_exit_code_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"inputs": [{"name": "x", "shape": [2]}],
                               "ops": [{"name": "y", "op": "relu", "inputs": ["h3"]},
                                       {"name": "z", "op": "nope", "inputs": ["x"]}],
                               "outputs": ["y"]}))
    res = runner().invoke(model, ["validate", str(bad)])
    assert res.exit_code == 2
    # Text mode lists every problem, one `error:` line each, as --json does.
    assert res.stderr == (f'error: {bad}: ops[0].inputs[0]: unknown tensor "h3"\n'
                          f'error: {bad}: ops[1].op: unsupported op "nope" (supported: abs, add, '
                          'affine, batch_norm, concat, conv2d, div, flatten, global_pool2d, '
                          'layout_transform, leaky_relu, matmul, maximum, minimum, mod, mul, pool2d, relu, '
                          'reshape, sigmoid, slice, softmax, split, sub, sum, tanh)\n')
    res = invoke("validate", str(bad), "--json")
    doc = json.loads(res.output)
    assert res.exit_code == 2 and doc["ok"] is False
    assert doc["problems"][0] == {"location": "ops[0].inputs[0]",
                                  "message": 'unknown tensor "h3"'}
    assert doc["problems"][1]["message"].startswith('unsupported op "nope" (supported: abs, ')
    assert len(doc["problems"]) == 2


def test_size_limit_flags():
    res = runner().invoke(
        model, ["validate", LSTM_SMALL, "--max-total-bytes", "1MiB"])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"error: {LSTM_SMALL}: model: all tensors together need ")
    assert res.stderr.rstrip().endswith("more than the 1.0 MiB limit (raise it with "
                                        "--max-total-bytes or HWTUNE_MAX_TOTAL_BYTES=SIZE)")
    res = runner().invoke(
        model, ["validate", LSTM_SMALL, "--max-tensor-bytes", "lots"])
    assert res.exit_code == 2 and "is not a size" in res.stderr


def test_expand_writes_an_ordinary_graph(tmp_path):
    out = tmp_path / "small.json"
    res = invoke("expand", LSTM_SMALL, "--set", "seq=2", "--set", "layers=1", "-o", str(out))
    assert res.exit_code == 0
    text = out.read_text()
    assert "${" not in text and '"repeat"' not in text
    expanded = load_model(str(out))
    assert expanded.to_json() == load_model(LSTM_SMALL, {"seq": 2, "layers": 1}).to_json()
    # one op per line, so diffs of expanded graphs stay readable
    assert sum(1 for line in text.splitlines() if '"op":' in line) == len(expanded.ops)


def test_generate_equals_the_generator(tmp_path):
    out = tmp_path / "p.json"
    res = invoke("generate", "pathnet", "--batch", "2", "--channels", "8", "-o", str(out))
    assert res.exit_code == 0
    assert load_model(str(out)).to_json() == pathnet.generate(batch=2, channels=8).to_json()


def test_generate_refuses_absurd_sizes():
    res = runner().invoke(
        model, ["generate", "lstm", "--hidden", "100000", "--seq", "1", "--layers", "1"])
    assert res.exit_code == 2
    assert res.stderr.startswith('error: params[0].shape: tensor "W1" [100000, 400000] needs ')


def test_info_text_and_json():
    path = os.path.join(MODELS, "resnet18.json")
    res = invoke("info", path)
    assert res.exit_code == 0 and "conv2d 20" in res.output and "FLOPs:" in res.output
    doc = json.loads(invoke("info", path, "--json").output)
    assert doc["ops"] == 70 and doc["op_counts"]["conv2d"] == 20 and doc["width"] == 2


def _commands(group, prefix=()):
    for name, cmd in group.commands.items():
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))


@pytest.mark.parametrize("path,cmd", list(_commands(model)), ids=lambda v: str(v))
def test_every_command_has_help_with_an_example(path, cmd):
    assert cmd.help and cmd.epilog and "hwtune model" in cmd.epilog
