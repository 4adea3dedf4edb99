"""The importer's one error type: a usage error (exit 2) with one line that
names the file, the node and what to do."""

from hwtune.errors import UsageError


class OnnxImportError(UsageError):
    """An ONNX file hwtune cannot import (corrupt, unsupported, ambiguous)."""
