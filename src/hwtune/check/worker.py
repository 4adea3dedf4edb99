"""A measuring process: `python -m hwtune.check.worker`.

`hwtune check --against PYTHON` compares two builds by measuring each in its
own worker (this build's interpreter and PYTHON, which runs the other
build's copy of this module), round by round, one chunk at a time, so both
builds see the same machine within milliseconds of each other. The parent
only sends requests and reads replies: all timing happens here, through the
measurement layer.

Protocol: one JSON object per line on stdin, one reply per line on stdout
(`{"ok": true, ...}` or `{"ok": false, "error": "..."}`):

    {"op": "hello"}                     -> protocol, hwtune version, ISA
    {"op": "open", "figure": {...}, "suite": {...}, "inner": N|null}
                                        -> inner (calls per sample), single_thread
    {"op": "take", "k": K}              -> samples, window (wall, CPU, steal)
    {"op": "close"} / {"op": "quit"}
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, Optional

PROTOCOL = 1


class _Worker:
    def __init__(self):
        self.pool = None
        self.side = None

    def hello(self, req) -> Dict[str, Any]:
        from hwtune import __version__
        from hwtune.native.isa import selected_isa
        return {"protocol": PROTOCOL, "version": __version__, "isa": selected_isa(),
                "pid": os.getpid()}

    def open(self, req) -> Dict[str, Any]:
        from hwtune.check.measure import runner_for
        from hwtune.check.suite import Figure, suite_from_settings
        from hwtune.measure.preempt import WindowedSide
        from hwtune.native.threads import Pool
        self.close(req)
        f = req["figure"]
        fig = Figure(f["name"], f["kind"], dict(f["params"]))
        suite = suite_from_settings(req["suite"], fig)
        if fig.kind != "model":
            self.pool = Pool(executors=1, threads=fig.threads, pin=True)
        runner = runner_for(fig, self.pool, suite, req.get("inner"), db=None, host_key=None)
        single = fig.kind != "model" and fig.threads == 1
        self.side = WindowedSide(runner, single_thread=single, cpus=os.cpu_count() or 1)
        return {"inner": getattr(runner, "inner", None), "single_thread": single}

    def take(self, req) -> Dict[str, Any]:
        from hwtune.measure import settle
        if self.side is None:
            raise ValueError("take before open")
        settle()
        xs = self.side.take(int(req["k"]))
        return {"samples": [float(x) for x in xs], "window": self.side.windows[-1].to_json()}

    def close(self, req) -> Dict[str, Any]:
        if self.side is not None:
            self.side.close()
            self.side = None
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        return {}


def serve(inp, out) -> int:
    w = _Worker()
    for line in inp:
        line = line.strip()
        if not line:
            continue
        req: Optional[Dict[str, Any]] = None
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "quit":
                w.close(req)
                out.write(json.dumps({"ok": True}) + "\n")
                out.flush()
                return 0
            handler = {"hello": w.hello, "open": w.open, "take": w.take,
                       "close": w.close}.get(op)
            if handler is None:
                raise ValueError(f"unknown op {op!r}")
            reply = dict(handler(req), ok=True)
        except Exception as exc:  # every failure is a reply: the parent decides
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    w.close(None)
    return 0


def main() -> int:
    # Replies go to the real stdout; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr
    return serve(sys.stdin, out)


if __name__ == "__main__":
    sys.exit(main())
