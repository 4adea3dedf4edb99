"""Every console and sh example of README.md and docs/*.md, run as pasted
(issue #42, done means: "a fresh clone, the README's commands pasted as
written, each produces what the README says").

Each document is one session: its commands run in order, each in its own
`bash -o pipefail -c`, in one scratch directory that holds a copy of the
checkout's configs/, benchmarks/ and .ci/, a `.venv` link to the
environment under test (whose bin/ is first on PATH, so `hwtune` and
`python` are the build under test) and its own results.db ($HWTUNE_DB, a
fresh $HOME), so a file an earlier example writes (trees.jsonl, main.json,
resnet18.onnx) is there for the next. A variable an example assigns
(`LIB=$(...)`, `GRAPH=$(...)`, `tmp=$(mktemp -d)`) is kept for the rest of
the document. Every command must exit 0; where the document shows output
after a command, each of its lines must appear (its label, the text before
the first ": ", where the document calls its figures illustrative).

Console blocks are ```console blocks and unlabelled blocks of `$ ` lines;
sh blocks (```sh, ```bash) run every line. What the test changes is listed
below, each entry with its reason, and an entry that matches no command
fails (test_every_exception_is_used):

- FIXTURES: files an example takes from the user (an ONNX classifier, an
  image), made by the test before the document runs;
- SETUP: commands run before a document's first one, for state the example
  assumes the user already has (a second stored host, two saved results);
- FILL: placeholders only the user's own database knows (a run id, a host
  key), filled from the session's database;
- FAST: flags the docs themselves show, added or lowered to make a long
  measurement short (a tune-graph --budget, run --reps, a smaller batch);
- EXITS: commands that may also end with another documented exit (a gate
  undecidable on a loaded machine);
- STRIP, SKIPPED: parts of commands and commands not run, with the reason.

Two environment knobs shrink measurements as the other CLI tests shrink
them: HWTUNE_SCAN_SCALE (test_cli_scan.py) and HWTUNE_PLAN_PROBE_GAP_S
(test_plan_cli.py); hwtune plan's once-per-host calibration is seeded as
test_plan_cli.py seeds it; `hwtune check` runs the scratch directory's
configs/ci.toml (docs/check.md: the current directory's suite comes first),
which the test replaces by a two-figure suite as test_check_cli.py's.
Each document prints its wall and CPU seconds (-s shows them).
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pytest
from check_suites import tiny_suite

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONSOLE = {"console"}
SH = {"sh", "bash", "shell"}
FENCE = re.compile(r"^```(\S*)\s*$")
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\S.*)$")
LABEL = re.compile(r"^([A-Za-z][\w. ()/-]*?):\s")
# A command that takes longer than this is broken, not slow.
TIMEOUT_S = 300


@dataclass
class Command:
    doc: str
    line: int           # 1-based line of the command in the document
    text: str
    output: List[str] = field(default_factory=list)   # lines the doc shows after it
    illustrative: bool = False


def _blocks(path: Path):
    """(language, first body line number, body lines) of each fenced block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        after = " ".join(lines[j + 1:j + 4])
        yield m.group(1), i + 2, lines[i + 1:j], "illustrative" in after
        i = j + 1


def commands(path: Path) -> List[Command]:
    """The commands of a document's console and sh blocks, in order."""
    out: List[Command] = []
    for lang, first, body, illustrative in _blocks(path):
        console = lang in CONSOLE or (lang == "" and any(b.startswith("$ ") for b in body))
        if not console and lang not in SH:
            continue
        k, seen = 0, len(out)
        while k < len(body):
            line = body[k]
            if console and not line.startswith("$ "):
                if len(out) > seen and line.strip():  # output of this block's last command
                    out[-1].output.append(line)
                k += 1
                continue
            if not console and (not line.strip() or line.lstrip().startswith("#")):
                k += 1
                continue
            cmd = Command(path.name, first + k, line[2:] if console else line,
                          illustrative=illustrative)
            while cmd.text.rstrip().endswith("\\") and k + 1 < len(body):
                k += 1
                cmd.text += "\n" + body[k]
            out.append(cmd)
            k += 1
    return out


# ---- what the test changes, each with its reason ----

# (document, text in the command) -> why it is not run
SKIPPED = {
    ("README.md", "pip install '.[test]' && .venv/bin/python -m pytest"):
        "the whole test suite, of which this test is a part",
    ("compare.md", "pip install 'hwtune[peers]'"):
        "installs from the network; the environment under test has the peers",
    ("fleet.md", "pip install 'hwtune[fleet]'"):
        "installs from the network; the environment under test has psycopg",
    ("README.md", "--storage postgresql://"):
        "needs a PostgreSQL server at db-host; tests/test_shared_study.py runs "
        "--storage against a local server",
    ("fleet.md", "--storage postgresql://"):
        "needs a PostgreSQL server at db-host; tests/test_shared_study.py runs "
        "--storage against a local server",
    ("plan.md", "python benchmarks/bench_plan.py graphi"):
        "profiles Graphi's three medium models and simulates them on 68 cores: ~30 s of CPU, "
        "a quarter of this file's budget (the block's bench_plan.py parts runs the script)",
    ("fleet.md", "optuna-dashboard"):
        "a web server that runs until stopped, watching a PostgreSQL server",
}

# The set-up line's install part: the environment under test is that
# install (pip building the C library takes minutes); the rest of the line
# runs as written.
STRIP = {
    ("README.md", "python3 -m venv .venv && .venv/bin/pip install . && "):
        "the install is the environment under test",
}

# (document, regex, replacement, reason): flags the docs show, to shorten
# a measurement. The replacement applies to the command without its
# trailing comment.
FAST = [
    ("*", r"^(\.venv/bin/)?hwtune tune-graph (?!.*--plan)",
     lambda t: re.sub(r" --budget \d+", "", t) + " --budget 6",
     "tuning stops at its --budget (README, tune.md); without one, or with 300 s, it takes "
     "minutes"),
    ("training.md", r"^hwtune (tune-graph|run) resnet18 --train --set batch=16",
     lambda t: t.replace("--set batch=16", "--set batch=2") + (" --reps 2 --warmup 1" if
                                                              " run " in t else ""),
     "a ResNet-18 training step at batch 16 is ~170 GFLOP (24 s of CPU for the tuning "
     "alone); batch 2 tunes and runs the same backward CONV workloads' code"),
    ("training.md", r"^python benchmarks/bench_backward_convs\.py", lambda t: t + " --set batch=2",
     "the workloads tuned by the lines above, at their batch (the script's default is 16)"),
    ("compare.md", r"^hwtune compare lstm_medium ",
     lambda t: t.replace("lstm_medium", "lstm_small"),
     "LSTM-medium op by op in PyTorch eager took 33 s of CPU at --reps 3; LSTM-small is the "
     "same graph, smaller, and the example is about --markdown"),
    ("*", r"^hwtune plan (lstm|pathnet)_medium ",
     lambda t: t.replace("_medium ", "_small ", 1),
     "plan profiles the model's ops and execution orders here: 25 s of CPU for lstm_medium, "
     "30 s for pathnet_medium's training step, 11 s for its forward pass; the small size is "
     "the same graph"),
    ("*", r"^hwtune compare ", lambda t: t + " --reps 3",
     "compare's --reps (default 10; compare.md): three runtimes, interleaved"),
    ("check.md", r"^hwtune check --update-baseline --processes 10",
     lambda t: t.replace("--processes 10", "--processes 3"),
     "ten fresh processes per figure were 24 s of CPU; the flag is what the example shows, "
     "and 3 is what the suite records elsewhere in this test"),
    ("*", r"^hwtune model samples .*--count \d+", lambda t: re.sub(r"--count \d+", "--count 32", t),
     "the samples' --count: every later run of the document walks each sample at each batch "
     "and policy (256 samples: minutes under --check)"),
]

# (document, regex, exits accepted, reason): a check that measures may end
# undecidable (exit 3) on a loaded machine, as docs/check.md says it does;
# a regression (1) or an error (2) still fails.
EXITS = [
    ("check.md", r"^hwtune check --compare main\.json pr\.json --junit", {0, 3},
     "its main.json and pr.json are two runs of the gate: two noisy samples may not decide"),
    ("*", r"^(\.venv/bin/)?hwtune check (?!.*--update-baseline)(?!.*--compare)", {0, 3},
     "exit 3 is the gate's documented answer on a machine too noisy to decide"),
]


def split_comment(text: str):
    """(command, trailing shell comment): the first ` #` outside quotes."""
    for m in re.finditer(r"\s+#", text):
        before = text[:m.start()]
        if before.count("'") % 2 == 0 and before.count('"') % 2 == 0:
            return before, text[m.start():]
    return text, ""


def _host_key(session) -> str:
    from hwtune import machine
    return machine.host_key(machine.fingerprint())


def _two_runs(session) -> str:
    """The two newest stored runs of kind run (any kind of the same kind would do)."""
    con = sqlite3.connect(f"file:{session.db}?mode=ro", uri=True)
    try:
        ids = [r[0] for r in con.execute(
            "SELECT run_id FROM runs WHERE kind = 'run' ORDER BY run_id DESC LIMIT 2")]
    finally:
        con.close()
    assert len(ids) == 2, "the document's earlier commands store two runs"
    return f"run:{ids[1]} run:{ids[0]}"


def _today(session) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


def _two_dates(session) -> str:
    """Two points in time with something stored by each: the start of the
    newest run (to the second; the set-up's first run ended earlier) and
    today."""
    con = sqlite3.connect(f"file:{session.db}?mode=ro", uri=True)
    try:
        (started,), = con.execute("SELECT max(started_at) FROM runs WHERE kind = 'run'")
    finally:
        con.close()
    return f"{started[:19]} --compare {_today(session)}"


# (document, placeholder) -> (reason, value from the session)
FILL: Dict[tuple, tuple] = {
    ("README.md", "amd-epyc-2c-cc46b1253535"): ("this machine's host key", _host_key),
    ("fleet.md", "--host KEY"): ("this machine's host key",
                                 lambda s: f"--host {_host_key(s)}"),
    ("report.md", "run:12 run:15"): ("two stored run ids", _two_runs),
    ("report.md", "2026-10-01 --compare 2026-11-20"): (
        "two times with something stored by each (a fresh database holds today only)",
        _two_dates),
    ("report.md", "--compare 2026-10-01 "): ("a date with something stored by then",
                                            lambda s: f"--compare {_today(s)} "),
    ("check.md", "/tmp/a.db"): ("a scratch database, not a shared /tmp file",
                                lambda s: str(s.work / "a.db")),
    ("check.md", "/tmp/b.db"): ("a scratch database, not a shared /tmp file",
                                lambda s: str(s.work / "b.db")),
}

# A check suite that decides in seconds (test_check_cli.py's TINY, named ci,
# 3 processes per recorded figure as there): at the default 6, the
# documents' eight `--update-baseline` runs were 15-18 s of CPU each,
# about 100 s of check.md's 150 (2-vCPU Zen 3, 2026-12-07).
TINY_SUITE = tiny_suite("ci")

# A host stored under another key: the export of this one, renamed (a user
# has such rows from `hwtune db import` or `db merge`).
OTHER_HOST = ('hwtune db export -o me.jsonl && sed "s/{key}/{other}/g" me.jsonl > {other}.jsonl'
              " && hwtune db import {other}.jsonl")


def _calibration(session) -> None:
    """hwtune plan's calibration of this host's engine overheads (~30 s of
    measuring, once per host), seeded as test_plan_cli.py seeds it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from plan_fixture import CALIBRATION

    from hwtune import machine
    from hwtune.db import ResultsDB
    with ResultsDB.open(str(session.db)) as db:
        run = db.start_run(db.upsert_host(machine.fingerprint()), "plan", {})
        db.add_fact(run, "plan_calibration", CALIBRATION.to_json())
        db.finish_run(run, "complete")


# document -> shell commands or functions of the session, run first.
SETUP = {
    "README.md": [
        _calibration,
        # `check --compare main.json pr.json`: two saved `check --json` results.
        "hwtune check --update-baseline --db saved.db --json > main.json && cp main.json pr.json",
    ],
    "report.md": [
        # --host intel-xeon-2c, --compare amd-epyc-8c: other stored hosts.
        "hwtune run lstm_small --reps 3 && sleep 1 && hwtune run lstm_small --reps 3",
        OTHER_HOST.replace("{other}", "intel-xeon-2c-0123456789ab"),
        OTHER_HOST.replace("{other}", "amd-epyc-8c-0123456789ab"),
    ],
    "check.md": [
        # The first block's `check --compare main.json pr.json`: two saved
        # results (the section that makes them comes later).
        "hwtune check --update-baseline --db saved.db --json > main.json && cp main.json pr.json",
    ],
    "plan.md": [_calibration],
    "tune.md": [
        # `tune-graph model.json`: the user's own model (README's generator).
        "hwtune model generate lstm --hidden 64 --seq 5 -o model.json",
    ],
    "fleet.md": [
        # hwtune-run --config needs a stored config in the export.
        "hwtune run lstm_small --reps 3 --save",
    ],
}


def _resnet_onnx(path: Path) -> None:
    """A small image classifier with a symbolic batch dimension named
    batch and an input named input, the shape of the docs' resnet.onnx."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    fc = numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "fc")
    fcb = numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fcb")
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1, name="fc")]
    graph = helper.make_graph(
        nodes, "resnet-stand-in",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [w, b, fc, fcb])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def _image(path: Path, shape) -> None:
    np.save(path, np.random.default_rng(0).random(shape, dtype=np.float32))


# file name -> (reason, how to make it in the work directory)
FIXTURES: Dict[str, tuple] = {
    "resnet.onnx": ("the user's ONNX classifier (a small stand-in: conv, relu, pool, gemm)",
                    _resnet_onnx),
    "img.npy": ("the user's input for resnet.onnx", lambda p: _image(p, (1, 3, 224, 224))),
    "image.npy": ("the user's image for the bundled resnet18",
                  lambda p: _image(p, (1, 3, 224, 224))),
    "my-server.toml": ("the user's machine description (a copy of a bundled one)",
                       lambda p: shutil.copy(ROOT / "configs/machines/epyc-7763.toml", p)),
}
# Which documents use which fixture files (made only where used).
FIXTURE_DOCS = {
    "README.md": ["resnet.onnx", "img.npy"],
    "onnx.md": ["resnet.onnx"],
    "compare.md": ["resnet.onnx", "image.npy"],
    "plan.md": ["my-server.toml"],
    "precision.md": ["image.npy"],
}


# ---- running a document ----

@dataclass
class Session:
    work: Path
    env: dict

    @property
    def db(self) -> Path:
        return self.work / "results.db"


def _session(tmp_path: Path, doc: str) -> Session:
    work = tmp_path / "work"
    work.mkdir()
    for d in ("configs", "benchmarks", ".ci"):
        if (ROOT / d).is_dir():
            shutil.copytree(ROOT / d, work / d)
    (work / "configs" / "ci.toml").write_text(TINY_SUITE)
    venv = Path(sys.prefix)
    (work / ".venv").symlink_to(venv)
    # `check --against ../base/.venv/bin/python`: the base branch's build,
    # here the same build.
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / ".venv").symlink_to(venv)
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()  # mktemp -d (check.md's CI job) stays in the scratch
    env = dict(os.environ)
    env.update({
        "TMPDIR": str(tmp_path / "tmp"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "HOME": str(tmp_path / "home"),
        "HWTUNE_DB": str(work / "results.db"),
        "HWTUNE_CACHE_DIR": str(tmp_path / "cache"),
        "HWTUNE_SCAN_SCALE": "0.1",
        "HWTUNE_PLAN_PROBE_GAP_S": "5",
        "GITHUB_STEP_SUMMARY": str(work / "step-summary.md"),
    })
    for name in FIXTURE_DOCS.get(doc, []):
        FIXTURES[name][1](work / name)
    return Session(work, env)


def prepared(cmd: Command, session: Session) -> Optional[str]:
    """The command as the test runs it, or None when it is skipped."""
    text = cmd.text
    for (doc, needle), _why in SKIPPED.items():
        if doc == cmd.doc and needle in text:
            return None
    for (doc, needle), _why in STRIP.items():
        if doc == cmd.doc:
            text = text.replace(needle, "")
    for (doc, needle), (_why, value) in FILL.items():
        if doc == cmd.doc and needle in text:
            text = text.replace(needle, value(session))
    body, tail = split_comment(text)
    for doc, pattern, repl, _why in FAST:
        if doc in ("*", cmd.doc) and "\n" not in body and re.search(pattern, body):
            body = repl(body)
    return body + tail


def _bash(text: str, session: Session) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-o", "pipefail", "-c", text], cwd=session.work,
                          env=session.env, capture_output=True, text=True, timeout=TIMEOUT_S)


def _shown(line: str, out: str, illustrative: bool) -> bool:
    flat = " ".join(out.split())
    if not illustrative:
        return " ".join(line.split()) in flat
    m = LABEL.match(line.strip())
    want = m.group(1) if m else line.strip()
    return any(o.strip().startswith(want + ":") for o in out.splitlines())


def exits(cmd: Command, text: str) -> set:
    """The exit codes the command may end with."""
    for doc, pattern, codes, _why in EXITS:
        if doc in ("*", cmd.doc) and re.search(pattern, text):
            return codes
    return {0}


def _children_cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_command(cmd: Command, text: str, session: Session) -> str:
    where = f"{cmd.doc}:{cmd.line}: {cmd.text!r}"
    m = ASSIGN.match(text.strip())
    if m and "\n" not in text.strip():
        # A variable for the commands after it: run the assignment, keep the value.
        name = m.group(1)
        proc = _bash(f'{text}\nprintf %s "${name}"', session)
        assert proc.returncode == 0, f"{where} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        session.env[name] = proc.stdout
        return proc.stdout
    proc = _bash(text, session)
    out = proc.stdout + proc.stderr
    assert proc.returncode in exits(cmd, text), (
        f"{where} (run as {text!r}) exited {proc.returncode}:\n{out[-3000:]}")
    for line in cmd.output:
        assert _shown(line, out, cmd.illustrative), \
            f"{where}: the doc shows {line!r}, the output lacks it:\n{out[-3000:]}"
    return out


DOC_COMMANDS = {p.name: commands(p) for p in DOCS}
RUN_DOCS = [name for name, cmds in DOC_COMMANDS.items() if cmds]


@pytest.mark.parametrize("doc", RUN_DOCS)
def test_doc_commands_run_as_pasted(doc, tmp_path):
    if doc in ("compare.md", "onnx.md", "README.md"):
        pytest.importorskip("onnxruntime")
    session = _session(tmp_path, doc)
    for setup in SETUP.get(doc, []):
        if callable(setup):
            setup(session)
            continue
        proc = _bash(setup.format(key=_host_key(session)), session)
        assert proc.returncode == 0, f"set-up {setup!r}:\n{(proc.stdout + proc.stderr)[-3000:]}"
    timings = []
    for cmd in DOC_COMMANDS[doc]:
        text = prepared(cmd, session)
        if text is None:
            continue
        if re.match(r"\s*hwtune report --json \| jq", text) and shutil.which("jq") is None:
            continue  # jq is the user's tool, not hwtune's
        t0, c0 = time.monotonic(), _children_cpu()
        run_command(cmd, text, session)
        timings.append((time.monotonic() - t0, _children_cpu() - c0, cmd.line))
    # Wall time depends on the machine's load; CPU time much less so.
    slowest = sorted(timings, reverse=True)[:3]
    print(f"{doc}: {len(timings)} commands, {sum(t[0] for t in timings):.0f} s "
          f"({sum(t[1] for t in timings):.0f} s CPU); slowest " +
          ", ".join(f"line {line} {w:.1f} s ({c:.1f} s CPU)" for w, c, line in slowest))


def test_the_parser_finds_the_examples():
    # The README's tour alone has more than 40 commands; a parser that finds
    # none would pass every document vacuously.
    assert len(DOC_COMMANDS["README.md"]) > 40
    shown = [c for c in DOC_COMMANDS["training.md"] if c.output]
    assert shown and shown[0].text.startswith("hwtune model grad resnet18")
    cont = [c for c in DOC_COMMANDS["dynamic.md"] if "\n" in c.text]
    assert cont and "--check" in cont[0].text  # a continued line is one command


def test_every_exception_is_used():
    """A skip, fill or speed-up that matches no command is stale: the
    document changed and the list must follow."""
    every = [c for cmds in DOC_COMMANDS.values() for c in cmds]
    for doc, needle in list(SKIPPED) + list(STRIP) + list(FILL):
        assert any(c.doc == doc and needle in c.text for c in every), (doc, needle)
    for doc, pattern, *_ in FAST + EXITS:
        assert any(doc in ("*", c.doc) and re.search(pattern, split_comment(c.text)[0])
                   for c in every), \
            (doc, pattern)
    for doc, names in FIXTURE_DOCS.items():
        for name in names:
            assert any(c.doc == doc and name in c.text for c in every), (doc, name)
