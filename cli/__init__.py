"""The click layer: turns library calls and typed errors into commands."""

import os as _os
import signal as _signal


def _startup_signal(signum, frame):
    """SIGTERM / SIGHUP while hwtune is still starting (imports): nothing has
    begun, so nothing needs keeping; exit as main() would, 128 + N, without
    Python's traceback from inside an import. main() replaces this handler
    (hwtune.cli.streams.install_signals) before any work starts."""
    _os._exit(128 + signum)


for _name in ("SIGTERM", "SIGHUP"):
    if hasattr(_signal, _name) and _signal.getsignal(getattr(_signal, _name)) == _signal.SIG_DFL:
        try:
            _signal.signal(getattr(_signal, _name), _startup_signal)
        except (ValueError, OSError):  # not the main thread
            pass
