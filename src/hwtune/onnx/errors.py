"""The importer's one error type: a usage error (exit 2) with one line that
names the file, the node and what to do; and Unsupported, which a rule
raises for a case it cannot import (the converter turns it into that line,
with the node's name)."""

from hwtune.errors import UsageError


class OnnxImportError(UsageError):
    """An ONNX file hwtune cannot import (corrupt, unsupported, ambiguous)."""


class Unsupported(Exception):
    """Raised by a rule: the node uses a case hwtune cannot import yet."""
