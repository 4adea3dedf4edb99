"""The importer's one error type: a usage error (exit 2) with one line that
names the file, the node and what to do; and Unsupported, which a rule
raises for a case it cannot import (the converter turns it into that line,
with the node's name), with InvalidAxis for a node the ONNX spec itself
rules out (an axis out of its range: onnx/axes.py)."""

from hwtune.errors import UsageError


class OnnxImportError(UsageError):
    """An ONNX file hwtune cannot import (corrupt, unsupported, ambiguous)."""


class Unsupported(Exception):
    """Raised by a rule: the node uses a case hwtune cannot import yet."""


class InvalidAxis(Unsupported):
    """An axis out of the range ONNX gives the op. Unlike a plain
    Unsupported, which a constant fold raises to leave the node to its
    converter, it refuses the node on either path: no other way of importing
    it makes the axis valid."""
