"""Shared by the dynamic-model tests: the CLI in-process, the one-error-line
rule, a small sample file, and the documents `hwtune run --inputs` and
`hwtune tune-graph --inputs` hand to the output layer (kinds "dynamic" and
"dynamic-tune"), made by the real library calls on a tiny Tree-FC, for the
exporters' contract tests."""

import os

from click.testing import CliRunner

from hwtune.cli.main import cli

from hwtune.db import ResultsDB
from hwtune.dynamic.executor import read_samples
from hwtune.dynamic.generate import samples as generate, write_jsonl
from hwtune.dynamic.model import load_dynamic
from hwtune.dynamic.runs import RunRequest, run_dynamic
from hwtune.native.isa import selected_isa
from hwtune.native.threads import allowed_cpus
from hwtune.tuners.dynamic_graph import DynTuneOptions, tune_dynamic

from conftest import FINGERPRINT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "tree_lstm_childsum"
VARS = {"hidden": 16, "embed": 8, "vocab": 30}
SMALL = [a for k, v in VARS.items() for a in ("--set", f"{k}={v}")]


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def one_error_line(res) -> bool:
    """Bad input: exit 2 and one `error:` line on stderr."""
    lines = res.stderr.strip().splitlines()
    return res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ")


def write_samples(path: str, count: int = 12) -> str:
    """`hwtune model samples` of MODEL at SMALL sizes."""
    res = invoke("model", "samples", MODEL, "-o", path, "--count", str(count), *SMALL)
    assert res.exit_code == 0, res.output
    return path


def dynamic_documents(tmp_path):
    """(run document, tune document) on one CPU (a quick tuning: one team
    size, so no per-op climb)."""
    model = load_dynamic(os.path.join(ROOT, "configs", "dynamic", "tree_fc.json"),
                         {"hidden": 8, "vocab": 10})
    path = str(tmp_path / "trees.jsonl")
    write_jsonl(path, generate({"generator": "complete-tree", "leaves": 8}, 4, seed=1,
                               vocab=10))
    s = read_samples(model, path)
    cpus = allowed_cpus()[:1]
    with ResultsDB.open(tmp_path / "docs.db") as db:
        host = db.upsert_host(FINGERPRINT)
        run = run_dynamic(db, host, model, s, RunRequest(
            inputs=path, batches=[1, 4], policies=["batched", "serial"],
            flags={"threads": 1}, iterations=2, check=True), model_path="tree_fc", cpus=cpus,
            kernel_variant=selected_isa(), cpu_model="Test CPU")
        tune = tune_dynamic(db, host, model, s, DynTuneOptions(batch=2, reps=1), inputs=path,
                            model_path="tree_fc", cpus=cpus, cpu_model="Test CPU")
    return run, tune
