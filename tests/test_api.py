"""The Python API (hwtune.api, docs/api.md): the page's example runs as
written, in a fresh interpreter that never imports the click layer; results
are dataclasses; bad arguments raise the library's typed errors."""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hwtune
from hwtune import api
from hwtune.errors import UsageError

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
SMALL = {"seq": 2, "hidden": 16, "batch": 2, "layers": 1}


def test_the_doc_example_runs_as_written_without_the_click_layer(tmp_path):
    pytest.importorskip("onnxruntime")
    # The page's first block is the API example (it must not load the click
    # layer); a later one calls the console entry point in-process, which
    # is the click layer by design: every block runs as written.
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 2
    env = {**os.environ, "HWTUNE_DB": str(tmp_path / "results.db"),
           "HWTUNE_CACHE_DIR": str(tmp_path / "cache")}
    for i, block in enumerate(blocks):
        code = block if i else (
            block + "\nimport sys\nassert 'hwtune.cli' not in sys.modules, 'click layer'\n")
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (i, proc.stderr)
        if i == 0:
            assert "ops, inputs" in proc.stdout and "trials" in proc.stdout


def test_top_level_names_and_dataclasses(tmp_path):
    assert hwtune.run is api.run and hwtune.load is api.load and hwtune.tune is api.tune
    m = hwtune.load("lstm_small", vars=SMALL)
    r = hwtune.run(m, reps=5, warmup=1, db=tmp_path / "r.db", keep_outputs=True)
    assert dataclasses.is_dataclass(r) and r.reps == len(r.samples) == 5
    assert r.min_s <= r.p50_s <= r.p90_s <= r.p99_s and r.config_source == "default"
    assert set(r.outputs) == set(m.outputs)
    # a name works as well as a loaded Model
    assert hwtune.run("lstm_small", vars=SMALL, reps=2, warmup=0,
                      db=tmp_path / "r.db").graph_hash == r.graph_hash


def test_bad_arguments_raise_typed_errors(tmp_path):
    m = hwtune.load("lstm_small", vars=SMALL)
    with pytest.raises(UsageError, match="no input"):
        hwtune.run(m, inputs={"nope": [1.0]}, db=tmp_path / "r.db")
    with pytest.raises(UsageError):
        hwtune.run(m, reps=0, db=tmp_path / "r.db")
    with pytest.raises(UsageError, match="pass them to load"):
        hwtune.run(m, vars={"seq": 3}, db=tmp_path / "r.db")
    with pytest.raises(UsageError):
        hwtune.load("no_such_model_anywhere")


def test_console_main_in_process_returns_the_exit_code(tmp_path, capsys):
    """hwtune.cli.main.main(ARGS, standalone_mode=False) runs one command in
    this process and returns its exit code (issue #42 point 5: it raised
    TypeError): 0 for a command that works, 2 with one error line for a
    model name that does not exist."""
    from hwtune.cli.main import main
    assert main(["model", "list"], standalone_mode=False) == 0
    assert "lstm_small" in capsys.readouterr().out
    assert main(["run", "lstm_smal", "--db", str(tmp_path / "r.db")], standalone_mode=False) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "lstm_small" in err[0], err
