"""The process's edges: signals, and the standard streams.

- SIGTERM and SIGHUP are handled like Ctrl-C: each calls whatever SIGINT's
  handler is at that moment (KeyboardInterrupt by default; a scan defers it
  while a row is written), so finished work is kept and the run is marked
  'interrupted'; the exit code is then 128 + the signal's number (143, 129).
- A stdout that cannot take a character (PYTHONIOENCODING=ascii, a C
  locale) gets an ASCII stand-in instead of a UnicodeEncodeError: "µs"
  becomes "us", "×" "x".
- Output written after the command returns (a redirected stdout is block
  buffered) is flushed before exit, so a full disk is one `error:` line and
  exit 2; a closed pipe (`hwtune report | head`) ends quietly with 141, as
  the shell's own tools do.
- A standard stream closed before start (`hwtune scan >&-`): its file
  descriptor is held on /dev/null, so that no file hwtune opens later (the
  database) takes its number and receives stray output; a closed stdout
  then fails at the first write, as GNU tools do (one `error:` line, exit
  2: the work done before it, a stored scan, is kept), and a command that
  prints nothing exits cleanly. A closed stderr loses the messages only.
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import signal
import sys
import unicodedata

# Signals handled like Ctrl-C, and the ones received (for the exit code).
HANDLED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
_received: list = []

# Characters hwtune prints that have a conventional ASCII spelling; others
# fall back to their decomposition without accents, else "?".
_ASCII = {"µ": "u", "μ": "u", "×": "x", "±": "+-", "–": "-", "—": "-", "…": "...",
          "≥": ">=", "≤": "<=", "→": "->", "←": "<-", "°": "deg", "²": "^2", "³": "^3",
          "·": ".", "•": "*", "≈": "~", "‘": "'", "’": "'", "“": '"', "”": '"', "✓": "ok",
          "✗": "x", "▁": "_", "█": "#", "░": ".", "▒": ":", "▓": "#", "│": "|", "─": "-"}
_HANDLER = "hwtune-ascii"


def _ascii_fallback(exc):
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        sub = _ASCII.get(ch)
        if sub is None:
            sub = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or "?"
        out.append(sub)
    return "".join(out), exc.end


codecs.register_error(_HANDLER, _ascii_fallback)


def on_signal(signum, frame):
    """SIGTERM / SIGHUP: do what Ctrl-C does now."""
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:  # SIGINT ignored (a background job): still stop, and keep the work
        raise KeyboardInterrupt


def install_signals() -> None:
    from hwtune import interrupts
    interrupts.install()  # Ctrl-C inside a finalizer is deferred, not lost
    for sig in HANDLED:
        try:
            signal.signal(sig, on_signal)
        except (ValueError, OSError):
            pass  # not the main thread, or the platform refuses: keep the default


def interrupt_exit_code() -> int:
    return 128 + int(_received[-1] if _received else signal.SIGINT)


def signal_note() -> str:
    if not _received:
        return ""
    return f" ({signal.Signals(_received[-1]).name})"


class ClosedStream(io.TextIOBase):
    """sys.stdout when the process started with it closed: every write is
    the OSError (EBADF) a write to the closed descriptor would have been."""

    encoding = "utf-8"

    def __init__(self, name: str):
        super().__init__()
        self.stream_name = name

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        if not s:
            return 0
        raise OSError(errno.EBADF, f"{self.stream_name} is closed")

    def flush(self) -> None:
        pass


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
        return False
    except OSError:
        return True


def _hold_closed_streams() -> None:
    """Put /dev/null on any of fds 0-2 closed at start; a closed stdout
    becomes a ClosedStream, a closed stderr /dev/null."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if not _closed(fd):
            continue
        try:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        except OSError:
            pass
        if fd == 1:
            sys.stdout = ClosedStream(name)
        elif fd == 2:
            try:
                sys.stderr = open(fd, "w", closefd=False, encoding="utf-8")
            except OSError:
                pass


def _rich_broken_pipe(self) -> None:
    exit_broken_pipe()


def setup() -> None:
    _hold_closed_streams()
    install_signals()
    try:  # rich exits 1 on a closed pipe; every output here ends the same way
        from rich.console import Console
        if hasattr(Console, "on_broken_pipe"):
            Console.on_broken_pipe = _rich_broken_pipe
    except ImportError:
        pass
    for stream in (sys.stdout, sys.stderr):
        enc = getattr(stream, "encoding", None) or ""
        try:
            utf = codecs.lookup(enc).name.startswith("utf")
        except LookupError:
            utf = False
        if not utf and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors=_HANDLER)
            except (ValueError, OSError):
                pass


def is_broken_pipe(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or getattr(exc, "errno", None) == errno.EPIPE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's own flush at exit has
    nothing left to fail on."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass


def exit_broken_pipe() -> None:
    _silence_stdout()
    sys.exit(128 + int(signal.SIGPIPE))


def finish(code) -> None:
    """Flush stdout and exit with code; a failed flush is an output error.
    A signal from now on is ignored: the work is over, and one arriving
    while the interpreter shuts down would kill it instead."""
    for sig in HANDLED + (signal.SIGINT,):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (ValueError, OSError):
            pass
    try:
        sys.stdout.flush()
    except OSError as exc:
        if is_broken_pipe(exc):
            exit_broken_pipe()
        _silence_stdout()
        try:
            sys.stderr.write(f"error: cannot write the output: {exc.strerror or exc}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        if code in (0, None):
            code = 2
    except ValueError:
        pass  # stdout already closed
    sys.exit(code)
