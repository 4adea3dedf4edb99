"""hwtune: benchmark and autotune deep-learning graphs on multicore CPUs.

The Python API is hwtune.api (docs/api.md); load, run and tune are also
here: `hwtune.run(hwtune.load("lstm_small"))`."""

__version__ = "0.1.0"

from hwtune import api  # noqa: E402 - after __version__, which the library reads
from hwtune.api import load, run, tune  # noqa: E402

__all__ = ["__version__", "api", "load", "run", "tune"]
