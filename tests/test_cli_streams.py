"""Standard streams closed before hwtune starts (`hwtune scan --show >&-`):
one `error:` line on stderr and exit 2 when the command had output to
write, a clean exit when it had none; never a traceback, and the closed
descriptor never handed to a file hwtune opens."""

import os
import subprocess
import sys

import pytest


def spawn(args, tmp_path, close=(1,)):
    """hwtune ARGS in a fresh process whose descriptors `close` are closed."""
    env = {**os.environ, "HWTUNE_DB": str(tmp_path / "results.db")}

    def shut():
        for fd in close:
            os.close(fd)
    p = subprocess.run([sys.executable, "-m", "hwtune.cli.main", *args], env=env,
                       stdout=subprocess.DEVNULL if 1 not in close else None,
                       stderr=subprocess.PIPE if 2 not in close else None,
                       preexec_fn=shut, cwd=tmp_path, timeout=120)
    err = p.stderr.decode(errors="replace") if p.stderr is not None else ""
    return p.returncode, err


@pytest.mark.parametrize("args", [["model", "list"], ["scan", "--show"], ["--help"],
                                  ["model", "info", "lstm_small"], ["report"]])
def test_stdout_closed_is_one_error_line(args, tmp_path):
    code, err = spawn(args, tmp_path)
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    if args != ["scan", "--show"] and args != ["report"]:  # those have nothing stored yet
        assert "stdout is closed" in lines[0]


def test_closed_stdout_is_not_reused_for_a_file(tmp_path):
    """A file opened after start-up (the database) must not take fd 1: a
    write meant for stdout (the C library's, a stray print) would land in
    it."""
    code = ("from hwtune.cli import streams; streams.setup(); import os, sys; "
            "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT); "
            "os.write(2, str(fd).encode())")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "f")],
                       stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1), timeout=60)
    assert p.returncode == 0, p.stderr
    assert int(p.stderr) > 2


def test_stdout_and_stderr_closed_exit_without_a_traceback(tmp_path):
    code, _ = spawn(["model", "list"], tmp_path, close=(1, 2))
    assert code == 2
