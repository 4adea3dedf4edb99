"""Typed errors raised by the hwtune library.

The library never prints or exits; the click layer (hwtune.cli) turns these
into a one-line message and an exit code.
"""


class HwtuneError(Exception):
    """Base class: every expected failure the user can act on."""

    exit_code = 2


class UsageError(HwtuneError):
    """A bad argument: thread count, shape, size, ISA name."""


class EngineGraphError(UsageError):
    """The engine's C graph refused a tensor, op or attribute, or failed
    validation (unknown tensor, tensor produced twice or never, duplicate
    name, cycle)."""


class PlanError(UsageError):
    """An execution plan could not be built: bad options, or a graph that
    does not validate."""


class NativeError(HwtuneError):
    """The C library failed or could not be loaded."""


class OutputError(HwtuneError):
    """An output cannot be written: a missing directory, a read-only file, a
    full disk or stdout, a closed pipe."""


class DatabaseError(HwtuneError):
    """results.db cannot be opened, written, or is not an hwtune database."""


class SchemaTooNewError(DatabaseError):
    """results.db was written by a newer hwtune (schema version unknown here)."""


class Interrupted(HwtuneError):
    """Ctrl-C: finished measurements are kept."""

    exit_code = 130
