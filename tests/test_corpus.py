"""The bad-input and fault corpus (tests/corpus/cases.jsonl) through every
command: model files, CLI arguments, databases, environment, signals and
the C runner. A case fails on an internal error, a traceback, a crash, a
hang, a lost row, or bad input accepted (a command that should refuse
exits 0). Each kind is one test that runs all of its cases and lists every
failure; the subprocess kinds run side by side in threads.

Case lines are JSON; lines starting with "//" are comments. Values JSON
cannot hold are written as "§" tokens (see _token)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from hwtune.native._lib import _find

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RUNNER = _find().parent / "hwtune-run"
CASES = [json.loads(line) for line in (HERE / "corpus" / "cases.jsonl").read_text().splitlines()
         if line.strip() and not line.startswith("//")]
BASES = {c["id"]: c["doc"] for c in CASES if c["kind"] == "base"}
# Per command; a refusal takes milliseconds, `model generate --seq 1e8`
# about 5 s until the item limit stops it.
TIMEOUT_S = 60
BAD_WORDS = ("internal error", "Traceback", "Exception ignored")


def of_kind(kind: str) -> List[Dict[str, Any]]:
    return [c for c in CASES if c["kind"] == kind]


# -- building inputs -----------------------------------------------------------
def _token(value, here: Path):
    """§ tokens: values JSON cannot hold or that are too big to write out."""
    if not isinstance(value, str) or not value.startswith("§"):
        if isinstance(value, list):
            return [_token(v, here) for v in value]
        if isinstance(value, dict):
            return {k: _token(v, here) for k, v in value.items()}
        return value
    name, _, arg = value[1:].partition(":")
    simple = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
              "surrogate": "x\ud800", "nul": "x\u0000y", "ctrl": "x\u0007y"}
    if name in simple:
        return simple[name]
    if name == "str":
        return "a" * int(arg)
    if name == "self":
        return "model.json"
    if name == "sibling":
        (here / "sibling.json").write_bytes(bytes.fromhex(arg))
        return "sibling.json"
    if name == "parens":
        return "${" + "(" * int(arg) + "1" + ")" * int(arg) + "}"
    if name == "pluschain":
        return "${" + "+".join(["1"] * int(arg)) + "}"
    raise ValueError(f"unknown token {value}")


def _walk_to(doc, path: str):
    keys = [int(k) if k.lstrip("-").isdigit() else k for k in path.split(".")]
    node = doc
    for k in keys[:-1]:
        node = node[k]
    return node, keys[-1]


def _edit(doc, edit, here: Path):
    path, value = edit[0], edit[1]
    if path == "§root":
        return value
    if value == "§del":
        node, k = _walk_to(doc, path)
        del node[k]
    elif value == "§append":
        node, k = _walk_to(doc, path)
        node[k].append(_token(edit[2], here))
    elif isinstance(value, str) and value.startswith("§repeat-param:"):
        doc[path] = [{"name": f"p{i}", "shape": [4096, 1024]} for i in range(int(value[14:]))]
    elif isinstance(value, str) and value.startswith("§string-bomb:"):
        n = int(value.split(":")[1])
        bomb = {"n": 3, "width": 8, "flag": True, "tag": "L", "s0": "ab"}
        for i in range(1, n + 1):
            bomb[f"s{i}"] = f"${{s{i - 1} + s{i - 1}}}"
        doc["vars"] = bomb
        doc["description"] = f"${{s{n}}}"
    elif isinstance(value, str) and value.startswith("§nest:"):
        n = int(value.split(":")[1])
        doc["ops"][0] = {"repeat": {"var": "a", "range": [0, n]}, "body": [
            {"repeat": {"var": "b", "range": [0, n]}, "body": [
                {"name": "r${a}.${b}", "op": "relu", "inputs": ["x"]}]}]}
    else:
        node, k = _walk_to(doc, path)
        node[k] = _token(value, here)
    return doc


def _text(spec: str) -> str:
    if spec.startswith("§deep:"):
        n = int(spec.split(":")[1])
        return "[" * n + "]" * n
    if spec.startswith("§deepobj:"):
        n = int(spec.split(":")[1])
        return '{"a": ' * n + "1" + "}" * n
    if spec.startswith("§pad:"):
        return "{" + " " * int(spec.split(":")[1]) + "}"
    return spec


def model_file(case, here: Path) -> str:
    """Write the case's model into `here`; returns the path to load."""
    if "path" in case:
        return case["path"]
    path = here / "model.json"
    if "text" in case:
        path.write_text(_text(case["text"]), encoding="utf-8", errors="surrogatepass")
    elif "hex" in case:
        path.write_bytes(bytes.fromhex(case["hex"]))
    else:
        doc = json.loads(json.dumps(BASES[case["base"]]))
        for e in case.get("edits", []):
            doc = _edit(doc, e, here)
        path.write_text(json.dumps(doc), encoding="utf-8", errors="surrogatepass")
    return str(path)


# -- checking outcomes -----------------------------------------------------------
def verdict(case_id: str, what: str, code, out: str, err: str, expect: str) -> List[str]:
    """Problems with one command's outcome ([] when it is right)."""
    found = []
    text = f"{out}\n{err}"
    for word in BAD_WORDS:
        if word in text:
            found.append(f"{case_id}: {what}: {word}: {err.strip()[-300:]}")
    if expect == "refused":
        if code == 0:
            found.append(f"{case_id}: {what}: bad input accepted (exit 0)")
        elif code != 2:
            found.append(f"{case_id}: {what}: exit {code}, expected 2: {err.strip()[-300:]}")
        else:
            lines = [ln for ln in err.splitlines() if ln.strip()]
            msgs = [ln for ln in lines if not ln.startswith(("note:", "warning:",
                                                              "hwtune-run: notice:"))]
            usage = any(ln.startswith(("Usage:", "Error:")) for ln in lines)  # click's own
            if not usage and (not msgs or not all(
                    ln.startswith(("error:", "hwtune-run: error:")) for ln in msgs)):
                found.append(f"{case_id}: {what}: not an error: line: {err.strip()[-300:]}")
    elif expect == "ok":
        if code != 0:
            found.append(f"{case_id}: {what}: exit {code}, expected 0: {err.strip()[-300:]}")
    elif expect.startswith("code:"):
        if code != int(expect[5:]):
            found.append(f"{case_id}: {what}: exit {code}, expected {expect[5:]}: "
                         f"{err.strip()[-300:]}")
    elif expect == "pipe":  # the reader went away: quiet, 141 (or 0 if all was written)
        if code not in (0, 141) or err.strip():
            found.append(f"{case_id}: {what}: exit {code} after a closed pipe: "
                         f"{err.strip()[-300:]}")
    elif expect == "clean":  # any outcome but a bug
        if code not in (0, 1, 2):
            found.append(f"{case_id}: {what}: exit {code}: {err.strip()[-300:]}")
    return found


class _Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise _Hang()


def invoke(args: List[str]):
    """One command in this process; (exit code, stdout, stderr)."""
    if threading.current_thread() is not threading.main_thread():
        code, out, err = spawn(args)
        return code, out, err
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    try:
        res = CliRunner().invoke(cli, args)
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            import traceback
            tb = "".join(traceback.format_exception(type(res.exception), res.exception,
                                                    res.exception.__traceback__))
            return 1, res.stdout, "Traceback (in process)\n" + tb
        return res.exit_code, res.stdout, res.stderr
    except _Hang:
        return "hang", "", f"no result in {TIMEOUT_S} s"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def spawn(args: List[str], env=None, timeout=TIMEOUT_S, stdout=subprocess.PIPE):
    """hwtune as a process of its own: exit code (negative: killed by a
    signal, "hang"), stdout, stderr."""
    try:
        p = subprocess.run([sys.executable, "-m", "hwtune.cli.main", *args], env=env,
                           stdout=stdout, stderr=subprocess.PIPE, text=True, errors="replace",
                           timeout=timeout)
        return p.returncode, p.stdout or "", p.stderr
    except subprocess.TimeoutExpired:
        return "hang", "", f"no result in {timeout} s"


def run_c(args: List[str], timeout=TIMEOUT_S):
    try:
        p = subprocess.run([str(RUNNER), *args], capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "hang", "", f"no result in {timeout} s"


def row_counts(db: Path) -> Dict[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {n: conn.execute(f"SELECT count(*) FROM {n}").fetchone()[0] for n in names}
    finally:
        conn.close()


def lost_rows(before: Dict[str, int], db: Path) -> List[str]:
    try:
        after = row_counts(db)
    except sqlite3.Error:
        return []  # a file fault: not a database to count
    return [f"{t}: {n} -> {after.get(t, 0)}" for t, n in before.items() if after.get(t, 0) < n]


# -- fixtures ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """Shared inputs: model files, and a results.db with what hwtune writes
    (runs, a user and a tuned config, trials, traces, op profiles)."""
    d = tmp_path_factory.mktemp("corpus")
    tiny = d / "tiny.json"
    tiny.write_text(json.dumps(BASES["tiny"]))
    compact = d / "compact.json"
    compact.write_text(json.dumps(BASES["compact"]))
    lstm = d / "lstm.json"
    lstm.write_text(json.dumps({"extends": str(ROOT / "configs" / "models" / "lstm_small.json")}))
    deep = d / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    big = d / "big.json"  # validates for seconds: a long repeat
    big.write_text(json.dumps({"inputs": [{"name": "x", "shape": [2]}], "ops": [
        {"repeat": {"var": "i", "range": [0, 900000]}, "body": [
            {"name": "r${i}", "op": "relu", "inputs": ["x"]}]}], "outputs": ["r0"]}))
    db = d / "base.db"
    for args in (["run", str(tiny), "--save", "--iterations", "2", "--warmup", "0"],
                 ["run", str(tiny), "--trace", str(d / "t.json"), "--iterations", "2"],
                 ["tune-graph", str(tiny), "--only", "sweep,hillclimb", "--reps", "1"]):
        res = CliRunner().invoke(cli, [*args, "--db", str(db)])
        assert res.exit_code == 0, res.output
    # Rows of the tables the commands above leave empty on a 2-CPU machine
    # (a per-op climb needs teams of 2; a check baseline a suite run).
    from hwtune.db import ResultsDB
    with ResultsDB.open(db) as handle:
        host = handle.hosts()[0]["host_key"]
        handle.put_tuned(host, tuner="op-threads", subject="matmul:[4,8]x[8,8]", isa="avx2",
                         threads=2, search="grid", best_params={"threads": 1}, best_s=1e-5,
                         trials=2)
        handle.add_check_baseline(host, "corpus", run_id=None, suite_doc={"figures": ["g"]},
                                  hwtune_version="0", created_at="2024-01-01T00:00:00Z",
                                  figures=[{"figure": "g", "kind": "gemm", "unit": "s",
                                            "higher_is_better": False, "params": {},
                                            "samples": [1.0, 1.1], "ref": [0.5, 0.5]}])
    conn = sqlite3.connect(db)
    key = conn.execute("SELECT graph_hash FROM graphs").fetchone()[0]
    conn.close()
    return {"dir": d, "tiny": str(tiny), "compact": str(compact), "lstm": str(lstm),
            "deep": str(deep), "big": str(big), "db": db, "key": key}


def _fill(args, ws, tmp: Path):
    subst = {"{tiny}": ws["tiny"], "{compact}": ws["compact"], "{lstm}": ws["lstm"], "{deep}": ws["deep"], "{big}": ws["big"],
             "{key}": ws["key"], "{tmp}": str(tmp)}
    out = []
    for a in args:
        for k, v in subst.items():
            a = a.replace(k, v)
        out.append(a)
    return out


def _copy_db(ws, dest: Path) -> Path:
    src = sqlite3.connect(ws["db"])
    dst = sqlite3.connect(dest)
    src.backup(dst)
    src.close()
    dst.close()
    return dest


# -- model files -------------------------------------------------------------------
def model_cases(ws, tmp_path) -> List[str]:
    cases = of_kind("model")
    problems: List[str] = []
    scratch = tmp_path / "scratch.db"
    for i, case in enumerate(cases):
        here = tmp_path / f"m{i}"
        here.mkdir()
        path = model_file(case, here)
        expect = case.get("expect", "refused")
        sets = [a for s in case.get("set", []) for a in ("--set", s)]
        commands = {
            "model validate": ["model", "validate", path, *sets],
            "model info": ["model", "info", path, *sets],
            "model expand": ["model", "expand", path, *sets, "-o", str(here / "out.json")],
            "run": ["run", path, *sets, "--db", str(scratch), "--iterations", "1",
                    "--warmup", "0"],
        }
        for what, args in commands.items():
            code, out, err = invoke(args)
            problems += verdict(case["id"], what, code, out, err, expect)
    return problems


# -- CLI arguments ------------------------------------------------------------------
def cli_cases(ws, tmp_path) -> List[str]:
    cases = of_kind("cli")
    problems: List[str] = []
    db = tmp_path / "cli.db"
    _copy_db(ws, db)
    before = row_counts(db)
    for case in cases:
        args = _fill(case["argv"], ws, tmp_path)
        if "--db" not in args and args and args[0] in ("run", "tune-graph", "report", "check"):
            args += ["--db", str(db)]
        code, out, err = invoke(args)
        problems += verdict(case["id"], " ".join(case["argv"][:2]), code, out, err,
                            case.get("expect", "refused"))
    problems += [f"cli: lost rows: {x}" for x in lost_rows(before, db)]
    return problems


# -- databases ------------------------------------------------------------------------
def _fault(case, db: Path) -> None:
    kind = case.get("file")
    if kind == "random":
        db.write_bytes(os.urandom(8192))
    elif kind == "text":
        db.write_text("this is not a database\n" * 100)
    elif kind == "truncate":
        data = db.read_bytes()
        db.write_bytes(data[:len(data) // 2])
    elif kind == "zero-page":
        data = bytearray(db.read_bytes())
        data[4096 * 2:4096 * 3] = bytes(4096)
        db.write_bytes(bytes(data))
    elif kind == "foreign":
        db.unlink()
        conn = sqlite3.connect(db)
        conn.executescript("CREATE TABLE notes (x); INSERT INTO notes VALUES (1);")
        conn.close()
    elif kind == "directory":
        db.unlink()
        db.mkdir()
    elif kind == "wal-garbage":
        Path(str(db) + "-wal").write_bytes(os.urandom(5000))
    if case.get("sql"):
        from hwtune.db.migrations import LATEST_VERSION
        conn = sqlite3.connect(db)
        for s in case["sql"]:
            conn.execute(s.replace("{latest+1}", str(LATEST_VERSION + 1)))
        conn.commit()
        conn.close()


def _hold_lock(db: Path, seconds: float) -> threading.Thread:
    ready = threading.Event()

    def hold():
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        ready.set()
        time.sleep(seconds)
        conn.execute("COMMIT")
        conn.close()

    t = threading.Thread(target=hold)
    t.start()
    ready.wait()
    return t


def _db_case(case, ws, tmp: Path) -> List[str]:
    """In order: `db check` (must find the fault), hwtune-run and `hwtune
    run` (which read the stored config), `report`, `tune-graph` (which may
    replace a corrupt row with a fresh one), then `db check --fix`. No
    command may lose a row that was there after the fault."""
    db = _copy_db(ws, tmp / "results.db")
    _fault(case, db)
    file_fault = "file" in case and case["file"] != "wal-garbage"
    sql = " ".join(case.get("sql", []))
    identity = "application_id" in sql or "user_version" in sql or "hwtune_meta" in sql
    corrupt = "'{bad'" in sql or case["id"].startswith("db-shape")
    config = case["id"].startswith("db-config")
    reads_config = config or "engine_configs" in case["id"]
    budget_only = case["id"] == "db-config-budget"  # good data for a larger host
    expect = case.get("expect")
    refuse_all = (file_fault or identity) and not expect
    before = None if file_fault else row_counts(db)
    lock = _hold_lock(db, case["lock"]) if "lock" in case else None

    def want(reads: bool) -> str:
        return expect or ("refused" if refuse_all or reads else "clean")

    steps = [
        ("db check", lambda: invoke(["db", "check", "--db", str(db)]),
         expect or ("refused" if refuse_all else
                    "code:1" if corrupt or (config and not budget_only) else "ok")),
        ("hwtune-run", lambda: run_c(["--db", str(db), "--graph", ws["key"], "--iterations", "1",
                                      "--warmup", "0"]), want(reads_config)),
        ("run", lambda: invoke(["run", ws["tiny"], "--db", str(db), "--iterations", "1",
                                "--warmup", "0"]), want(reads_config)),
        ("report", lambda: invoke(["report", "--db", str(db), "--format", "json"]), want(False)),
        ("tune-graph", lambda: invoke(["tune-graph", ws["tiny"], "--db", str(db), "--only",
                                       "sweep", "--reps", "1"]), want(False)),
    ]
    problems = []
    for what, call, wanted in steps:
        code, out, err = call()
        problems += verdict(case["id"], what, code, out, err, wanted)
    if lock:
        lock.join()
    if before is not None:
        problems += [f"{case['id']}: lost rows: {x}" for x in lost_rows(before, db)]
    if corrupt or (config and not budget_only):
        code, out, err = invoke(["db", "check", "--db", str(db), "--fix"])
        problems += verdict(case["id"], "db check --fix", code, out, err, "ok")
        code, out, err = invoke(["db", "check", "--db", str(db)])
        problems += verdict(case["id"], "db check after --fix", code, out, err, "ok")
    return problems


def db_cases(ws, tmp_path) -> List[str]:
    problems: List[str] = []
    for i, case in enumerate(of_kind("db")):
        here = tmp_path / f"d{i}"
        here.mkdir()
        problems += _db_case(case, ws, here)
    return problems


# -- environment, signals, C runner: processes, side by side -----------------------
def _env_case(case, ws, tmp: Path) -> List[str]:
    db = _copy_db(ws, tmp / "results.db")
    before = row_counts(db)
    env = {**os.environ, **{k: _fill([v], ws, tmp)[0] for k, v in case["env"].items()}}
    env.setdefault("HWTUNE_DB", str(db))
    if "HWTUNE_DB" not in case["env"]:
        env["HWTUNE_DB"] = str(db)
    args = _fill(case["argv"], ws, tmp)
    if args[0] == "run":
        args += ["--iterations", "1", "--warmup", "0"]
    expect = case.get("expect", "refused")
    if case.get("stdout") == "full":
        with open("/dev/full", "w") as full:
            code, out, err = spawn(args, env=env, stdout=full)
    elif case.get("stdout") == "shut":  # `hwtune CMD >&-`: fd 1 closed before start
        try:
            p = subprocess.run([sys.executable, "-m", "hwtune.cli.main", *args], env=env,
                               stdout=None, stderr=subprocess.PIPE, text=True,
                               errors="replace", timeout=TIMEOUT_S,
                               preexec_fn=lambda: os.close(1))
            code, out, err = p.returncode, "", p.stderr
        except subprocess.TimeoutExpired:
            code, out, err = "hang", "", ""
    elif case.get("stdout") == "closed":
        p = subprocess.Popen([sys.executable, "-m", "hwtune.cli.main", *args], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.read(10)
        p.stdout.close()
        try:
            _, errb = p.communicate(timeout=TIMEOUT_S)
            code, out, err = p.returncode, "", errb.decode(errors="replace")
        except subprocess.TimeoutExpired:
            p.kill()
            code, out, err = "hang", "", ""
    else:
        code, out, err = spawn(args, env=env)
    problems = verdict(case["id"], " ".join(case["argv"][:2]), code, out, err, expect)
    if case.get("stdout") == "full" and code == 2 and "cannot write" not in err:
        problems.append(f"{case['id']}: no output error named: {err.strip()[-200:]}")
    return problems + [f"{case['id']}: lost rows: {x}" for x in lost_rows(before, db)]


def _signal_case(case, ws, tmp: Path) -> List[str]:
    db = _copy_db(ws, tmp / "results.db")
    before = row_counts(db)
    args = _fill(case["argv"], ws, tmp) + (["--db", str(db)] if case["argv"][0] != "model"
                                           else [])
    p = subprocess.Popen([sys.executable, "-m", "hwtune.cli.main", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    if case.get("status"):  # signal the work, not the start-up: wait for its run row
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and p.poll() is None and not _running(db):
            time.sleep(0.1)
    time.sleep(case["after"])
    sig = getattr(signal, "SIG" + case["signal"])
    p.send_signal(sig)
    if case.get("twice"):
        time.sleep(0.05)
        try:
            p.send_signal(sig)
        except ProcessLookupError:
            pass
    try:
        _, errb = p.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        p.kill()
        return [f"{case['id']}: still running {TIMEOUT_S} s after SIG{case['signal']}"]
    err = errb.decode(errors="replace")
    problems = []
    if p.returncode != case["code"]:
        problems.append(f"{case['id']}: exit {p.returncode}, expected {case['code']}: "
                        f"{err.strip()[-300:]}")
    for word in BAD_WORDS:
        if word in err:
            problems.append(f"{case['id']}: {word}: {err.strip()[-300:]}")
    status = case.get("status")
    if status:
        if status == "interrupted-next-open":  # the next command finds the dead owner
            invoke(["run", ws["tiny"], "--db", str(db), "--iterations", "1", "--warmup", "0"])
        conn = sqlite3.connect(db)
        last = conn.execute("SELECT status FROM runs ORDER BY run_id DESC LIMIT 1").fetchone()
        if case["argv"][0] != "run" or status != "interrupted-next-open":
            pass
        else:
            last = conn.execute("SELECT status FROM runs ORDER BY run_id DESC LIMIT 1 OFFSET 1"
                                ).fetchone()
        conn.close()
        if not last or last[0] != "interrupted":
            problems.append(f"{case['id']}: run left {last and last[0]!r}, not 'interrupted'")
    return problems + [f"{case['id']}: lost rows: {x}" for x in lost_rows(before, db)]


def _running(db: Path) -> bool:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute("SELECT count(*) FROM runs WHERE status = 'running'"
                                ).fetchone()[0] > 0
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def _lowered_edit(spec, key: str, db: Path) -> None:
    conn = sqlite3.connect(db)
    good = json.loads(conn.execute("SELECT lowered_json FROM graphs WHERE graph_hash = ?",
                                   [key]).fetchone()[0])
    if isinstance(spec, str):
        text = _text(spec)
    elif isinstance(spec, dict):
        text = json.dumps(spec)
    else:
        path, value = spec
        if isinstance(value, str) and value.startswith("§copy:"):
            node, k = _walk_to(good, value[6:])
            value = node[k]
        doc = _edit(good, [path, value], db.parent)
        text = json.dumps(doc)
    with conn:
        conn.execute("UPDATE graphs SET lowered_json = ? WHERE graph_hash = ?", [text, key])
        # the user and default configs carry no lowered graph of their own;
        # the tuned one may: drop it so the graph's is what runs
        conn.execute("UPDATE engine_configs SET lowered_json = NULL")
    conn.close()


def _runner_case(case, ws, tmp: Path) -> List[str]:
    db = _copy_db(ws, tmp / "results.db")
    if "lowered" in case:
        _lowered_edit(case["lowered"], ws["key"], db)
    before = row_counts(db)
    args = [] if case.get("nodb") else ["--db", _fill([case.get("db", str(db))], ws, tmp)[0]]
    args += _fill(case.get("args", ["--graph", "{key}"]), ws, tmp)
    if "--iterations" not in args and "lowered" in case:
        args += ["--iterations", "1", "--warmup", "0"]
    code, out, err = run_c(args)
    problems = verdict(case["id"], "hwtune-run", code, out, err, case.get("expect", "refused"))
    errors = [ln for ln in err.strip().splitlines() if not ln.startswith("hwtune-run: notice:")]
    if code == 2 and len(errors) != 1:
        problems.append(f"{case['id']}: more than one line: {err.strip()[-300:]}")
    return problems + [f"{case['id']}: lost rows: {x}" for x in lost_rows(before, db)]


PROCESS_KINDS = {"env": _env_case, "signal": _signal_case, "runner": _runner_case}
IN_PROCESS_KINDS = {"model": model_cases, "cli": cli_cases, "db": db_cases}


def test_corpus_through_every_command(ws, tmp_path):
    """Every case of every kind. The kinds that need processes of their own
    (environment, signals, the C runner) run four at a time in threads,
    mostly waiting, while the in-process kinds (model files, arguments,
    databases) run on this thread: about half the wall time of one after
    the other on 2 CPUs."""
    jobs = []
    for kind, fn in PROCESS_KINDS.items():
        for i, case in enumerate(of_kind(kind)):
            d = tmp_path / f"{kind}{i}"
            d.mkdir()
            jobs.append((kind, fn, case, d))
    found: Dict[str, List[str]] = {k: [] for k in list(PROCESS_KINDS) + list(IN_PROCESS_KINDS)}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [(kind, pool.submit(fn, case, ws, d)) for kind, fn, case, d in jobs]
        for kind, fn in IN_PROCESS_KINDS.items():
            here = tmp_path / kind
            here.mkdir()
            found[kind] += fn(ws, here)
        for kind, fut in futures:
            found[kind] += fut.result()
    counts = {k: len(of_kind(k)) for k in found}
    lines = [f"{k}: {counts[k]} cases, {len(v)} failures" for k, v in found.items()]
    print("corpus: " + "; ".join(lines))
    problems = [p for v in found.values() for p in v]
    assert not problems, f"{len(problems)} failure(s):\n" + "\n".join(problems[:80])


def test_corpus_size():
    """The corpus holds at least 300 cases across all six kinds."""
    kinds = {}
    for c in CASES:
        if c["kind"] != "base":
            kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    print(f"corpus: {sum(kinds.values())} cases: {kinds}")
    assert set(kinds) == {"model", "cli", "db", "env", "signal", "runner"}
    assert sum(kinds.values()) >= 300
