"""Where results.db lives (hwtune.db.locate): --db, else $HWTUNE_DB, else
the nearest results.db up the tree (a checkout's seeded from its tracked
results.seed.db), else the per-user database; commands run inside a git
checkout leave `git status` clean; a config tuned in a folder is found
from its sub-folders."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hwtune import machine
from hwtune.db import ResultsDB, resolve_path
from hwtune.engine.config import EngineConfig

from conftest import tiny_matmul

ROOT = Path(__file__).resolve().parents[1]
MODEL = tiny_matmul("locate-mlp", 3)


def hwtune(cwd, *args):
    env = {k: v for k, v in os.environ.items() if k != "HWTUNE_DB"}
    return subprocess.run([sys.executable, "-m", "hwtune.cli.main", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("HWTUNE_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def test_nearest_up_the_tree_else_per_user(tmp_path, clean_env, monkeypatch):
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert resolve_path() == tmp_path / "xdg" / "hwtune" / "results.db"
    assert (tmp_path / "xdg" / "hwtune").is_dir()  # made for the first write
    (tmp_path / "a" / "results.db").touch()
    assert resolve_path() == tmp_path / "a" / "results.db"
    assert resolve_path("x.db") == sub / "x.db"
    monkeypatch.setenv("HWTUNE_DB", str(tmp_path / "env.db"))
    assert resolve_path() == tmp_path / "env.db"


def test_seed_is_copied_never_written(tmp_path, clean_env, monkeypatch):
    with ResultsDB.open(tmp_path / "results.seed.db") as d:
        d.upsert_host({"cpu_model": "Seed CPU", "isa": {}})
    before = (tmp_path / "results.seed.db").read_bytes()
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    path = resolve_path()
    assert path == tmp_path / "results.db" and path.exists()
    with ResultsDB.open() as d:
        assert d.path == path and d.hosts()  # the seed's rows, in the copy
        d.upsert_host(machine.fingerprint())
    assert (tmp_path / "results.seed.db").read_bytes() == before


def test_the_checkout_tracks_the_seed_not_results_db():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "results.db", "results.seed.db"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    assert tracked == ["results.seed.db"]
    ignored = subprocess.run(["git", "check-ignore", "-q", "results.db"], cwd=ROOT)
    assert ignored.returncode == 0


def _git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_commands_inside_a_checkout_leave_git_status_clean(tmp_path):
    repo = tmp_path / "clone"
    repo.mkdir()
    _git(repo, "init", "-q")
    shutil.copyfile(ROOT / ".gitignore", repo / ".gitignore")
    shutil.copyfile(ROOT / "results.seed.db", repo / "results.seed.db")
    (repo / "configs").mkdir()
    (repo / "configs" / "m.json").write_text(json.dumps(MODEL))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "checkout")
    proc = hwtune(repo, "run", "configs/m.json", "--reps", "3")
    assert proc.returncode == 0, proc.stderr
    assert f"in {repo / 'results.db'}" in proc.stdout  # names the database it wrote
    proc = hwtune(repo / "configs", "report")
    assert proc.returncode == 0, proc.stderr
    assert _git(repo, "status", "--porcelain") == ""
    assert (repo / "results.db").exists()


def test_config_tuned_in_a_folder_is_found_from_a_sub_folder(tmp_path):
    from hwtune.graph import load_model
    top = tmp_path / "project"
    (top / "deep" / "er").mkdir(parents=True)
    (top / "m.json").write_text(json.dumps(MODEL))
    graph = load_model(str(top / "m.json"))
    with ResultsDB.open(top / "results.db") as d:
        host = d.upsert_host(machine.fingerprint())
        gh = d.put_graph(graph.to_json())
        cfg = EngineConfig(executors=1, threads=1, scheduler="sequential", pin=False)
        d.put_engine_config(host, gh, source="tuned", **cfg.db_fields())
    proc = hwtune(top / "deep" / "er", "run", "../../m.json", "--reps", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["config_source"] == "tuned" and doc["db"] == str(top / "results.db")
    proc = hwtune(top / "deep" / "er", "run", "../../m.json", "--reps", "3")
    assert f"(tuned, read from {top / 'results.db'})" in proc.stdout
    assert not (top / "deep" / "er" / "results.db").exists()
