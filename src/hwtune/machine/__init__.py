"""Machine fingerprint: what hardware (and which limits) a result came from."""

from hwtune.machine.fingerprint import fingerprint, host_key

__all__ = ["fingerprint", "host_key"]
