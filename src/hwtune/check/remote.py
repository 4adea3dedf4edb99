"""The parent's end of a measuring worker (hwtune.check.worker): a Side whose
samples are taken in another process, possibly another build."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict, List, Optional

from hwtune.check.worker import PROTOCOL
from hwtune.errors import HwtuneError, UsageError
from hwtune.measure.preempt import Window
from hwtune.measure.sides import Side


class WorkerError(HwtuneError):
    """A worker failed or answered nonsense (exit 2)."""


class Worker:
    """One worker process: `python -m hwtune.check.worker`."""

    def __init__(self, python: str, *, label: str, env: Optional[Dict[str, str]] = None):
        self.label = label
        try:
            self.proc = subprocess.Popen(
                [python, "-m", "hwtune.check.worker"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                env=dict(os.environ, **(env or {})))
        except OSError as exc:
            raise UsageError(f"cannot start {python} for the {label} side: "
                             f"{exc.strerror or exc}") from None
        hello = self.call({"op": "hello"})
        if hello.get("protocol") != PROTOCOL:
            self.close()
            raise UsageError(f"{python} runs hwtune {hello.get('version', '?')} whose check "
                             f"worker speaks protocol {hello.get('protocol')!r}, this one "
                             f"{PROTOCOL}: install matching versions")
        self.info = hello

    def call(self, req: Dict[str, Any]) -> Dict[str, Any]:
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            err = ""
            try:
                self.proc.kill()
                err = self.proc.stderr.read().strip().splitlines()
                err = err[-1] if err else ""
            except OSError:
                pass
            if "No module named hwtune.check.worker" in err:
                raise UsageError(f"the {self.label} interpreter has no hwtune with a check "
                                 "worker (hwtune too old, or not installed there)")
            raise WorkerError(f"the {self.label} worker exited ({err or 'no message'})")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise WorkerError(f"{self.label}: {reply.get('error')}")
        return reply

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call({"op": "quit"})
            except HwtuneError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass


class RemoteSide(Side):
    """One figure opened in a worker; take(k) asks it for k samples and
    keeps the chunk's Window (wall, CPU and steal time, measured there)."""

    def __init__(self, worker: Worker, figure: Dict[str, Any], suite: Dict[str, Any],
                 inner: Optional[int] = None):
        self.worker, self.label = worker, worker.label
        got = worker.call({"op": "open", "figure": figure, "suite": suite, "inner": inner})
        self.inner = got.get("inner")
        self.single_thread = bool(got.get("single_thread"))
        self.windows: List[Window] = []

    def warm(self, n: int):
        return None

    def take(self, k: int) -> List[float]:
        got = self.worker.call({"op": "take", "k": int(k)})
        w = got["window"]
        self.windows.append(Window(w["wall_s"], w["cpu_s"], w.get("steal_s"),
                                   self.single_thread, 1, lost=w.get("lost")))
        return [float(x) for x in got["samples"]]

    def close(self) -> None:
        try:
            self.worker.call({"op": "close"})
        except HwtuneError:
            pass
