"""--min-time (hyperfine-style adaptive run count) for `run` and `compare`,
and --reps as the one spelling of the sample count (`run --iterations`
still works, hidden from --help)."""

import importlib.util
import json

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli

from conftest import tiny_matmul, write_model

TINY = tiny_matmul("tiny-min-time", 3)


@pytest.fixture
def model(tmp_path):
    return write_model(tmp_path, TINY)


def invoke(*args):
    return CliRunner().invoke(cli, list(map(str, args)))


def test_run_min_time_takes_more_runs_than_reps(model, tmp_path):
    r = invoke("run", model, "--db", tmp_path / "r.db", "--reps", 3, "--warmup", 1,
               "--min-time", 0.05, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    lat = doc["latency_s"]["samples"]
    assert doc["iterations"] == len(lat) > 3
    # the timed runs and the one warm-up run add up to min_time
    assert sum(lat) + max(lat) >= 0.05
    r = invoke("run", model, "--db", tmp_path / "r.db", "--reps", 3, "--json")
    assert json.loads(r.stdout)["iterations"] == 3  # without it: exactly --reps


def test_run_iterations_is_a_hidden_alias_of_reps(model, tmp_path):
    r = invoke("run", model, "--db", tmp_path / "r.db", "--iterations", 4, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["iterations"] == 4
    help_text = invoke("run", "--help").output
    assert "--reps" in help_text and "--min-time" in help_text
    assert "--iterations" not in help_text


def test_bad_min_time(model, tmp_path):
    r = invoke("run", model, "--db", tmp_path / "r.db", "--min-time", 0)
    assert r.exit_code == 2 and "--min-time" in r.output


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None,
                    reason="onnxruntime not installed")
def test_compare_min_time(model, tmp_path):
    r = invoke("compare", model, "--db", tmp_path / "r.db", "--with", "ort", "--reps", 2,
               "--min-time", 0.1, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    # each sample of each side lasts ~20 ms: 0.1 s is 5 of them, not 2
    assert doc["reps"] == 5 and all(len(s["samples"]) == 5 for s in doc["sides"])
