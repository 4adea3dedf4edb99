"""What the seeded fuzzers (fuzz_models.py, fuzz_onnx.py) share: their
worker processes, their summary and their byte edits. The workers:
each fuzzer's worker is a process that reads mutant indices on stdin and
answers one JSON line per mutant; `drive` deals the indices to `workers`
such processes from as many threads, replacing a worker that crashed or
hung (its `ask` kills it and names the mutant) so the rest go on."""

from __future__ import annotations

import queue
import subprocess
import threading
from typing import Callable, Dict, List, Optional, Tuple


class WorkerProcess:
    """One worker process; subclasses add `ask(index, timeout)`."""

    def __init__(self, argv: List[str], env: Dict[str, str]):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)

    def send(self, index: int) -> Optional[Tuple[str, str]]:
        """Asks the worker for mutant `index`; a CRASH verdict when it is
        gone, else None (the caller reads the answer)."""
        try:
            self.proc.stdin.write(f"{index}\n".encode())
            self.proc.stdin.flush()
        except OSError:
            return "CRASH", f"worker gone (exit {self.proc.poll()})"
        return None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except Exception:
            self.kill()


def drive(indices: List[int], new_worker: Callable[[], WorkerProcess], timeout: float,
          workers: int, progress: Optional[Callable[[int, int], None]] = None
          ) -> Dict[int, Tuple[str, str]]:
    """{index: (verdict, detail)} of every index, asked of `workers` worker
    processes side by side."""
    todo: "queue.Queue[int]" = queue.Queue()
    for i in indices:
        todo.put(i)
    verdicts: Dict[int, Tuple[str, str]] = {}
    lock = threading.Lock()

    def run():
        w = new_worker()
        try:
            while True:
                try:
                    index = todo.get_nowait()
                except queue.Empty:
                    return
                if not w.alive:
                    w = new_worker()
                verdict, detail = w.ask(index, timeout)
                with lock:
                    verdicts[index] = (verdict, detail)
                    if progress:
                        progress(len(verdicts), len(indices))
        finally:
            w.close()

    threads = [threading.Thread(target=run) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return verdicts


def print_summary(out: dict, rows: List[dict], width: int) -> None:
    """A run's summary: mutants, seeds, workers and time, each verdict's
    count, then `rows` (failures, cases for review) one line each."""
    print(f"\n{out['count']} mutants of {out['seeds']} seeds (seed {out['seed']}, "
          f"{out['workers']} workers) in {out['seconds']} s")
    for verdict, n in sorted(out["verdicts"].items(), key=lambda kv: -kv[1]):
        print(f"  {verdict:<{width}} {n}")
    for f in rows:
        print(f"  #{f['index']} {f['verdict']}: {f['mutant']}: {f['detail']}")


def edit_bytes(data: bytes, kind: str, rng) -> Optional[bytes]:
    """A file's bytes with one bit flipped ("flip"), one random byte
    inserted ("insert") or cut at a random length ("truncate"); None for
    another kind (the caller's own). The same draws of rng in the same
    order as the fuzzers made them before, so seeds keep their mutants."""
    if kind == "flip" and data:
        i = rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    if kind == "insert":
        i = rng.randrange(len(data) + 1)
        return data[:i] + bytes([rng.randrange(256)]) + data[i:]
    if kind == "truncate":
        return data[:rng.randrange(len(data) + 1)]
    return None
