"""The weights sidecar of a model.json: real parameter values in a file
next to it, in the safetensors layout.

Layout (what safetensors writes, so its readers open these files too):
  bytes 0..7   header length N, unsigned 64-bit little-endian
  bytes 8..    N bytes of JSON: {name: {"dtype": "F32", "shape": [...],
               "data_offsets": [begin, end]}, "__metadata__": {str: str}},
               padded with spaces
  then         the tensors' raw little-endian float32 bytes, back to back;
               offsets count from the end of the header.
A JSON header and raw floats, so the stand-alone C runner reads the file
with its JSON parser and one fread per tensor (no zip, no numpy format).
The header is padded so that the data starts on a 64-byte boundary.

A model refers to the file by path (relative to the model.json) and its
sha256; a file whose content no longer matches is refused, so a graph hash
in results.db always names the same numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from hwtune.errors import UsageError

DTYPE = "F32"
# safetensors readers refuse headers above 100 MB; a header entry is ~80
# bytes, so this still holds a million tensors.
MAX_HEADER_BYTES = 100_000_000
DATA_ALIGN = 64
SUFFIX = ".weights.safetensors"


class WeightsError(UsageError):
    """A weights file that is missing, corrupt or not the one the model names."""


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_weights(path: str, arrays: Iterable[Tuple[str, np.ndarray]],
                  metadata: Optional[Dict[str, str]] = None) -> str:
    """Write (name, array) pairs as float32; returns the file's sha256.
    Written to a temporary file and renamed, so a reader never sees half a
    file."""
    header: Dict[str, object] = {}
    blobs: List[np.ndarray] = []
    offset = 0
    for name, arr in arrays:
        a = np.ascontiguousarray(arr, dtype="<f4")
        if name in header or name == "__metadata__":
            raise WeightsError(f"weights: duplicate or reserved tensor name {name!r}")
        header[name] = {"dtype": DTYPE, "shape": [int(d) for d in a.shape],
                        "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a)
        offset += a.nbytes
    header["__metadata__"] = {"format": "hwtune-weights", **(metadata or {})}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-(8 + len(text))) % DATA_ALIGN)
    directory = os.path.dirname(os.path.abspath(path))
    h = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=".weights-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in (struct.pack("<Q", len(text)), text):
                fh.write(chunk)
                h.update(chunk)
            for a in blobs:
                data = memoryview(a).cast("B") if a.size else b""
                fh.write(data)
                h.update(data)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise WeightsError(f"cannot write weights {path}: {exc.strerror or exc}") from None
    return h.hexdigest()


class WeightsFile:
    """An opened, checked weights file: its tensors' shapes, and their values
    on demand (read from disk each time: the engine keeps its own copy)."""

    def __init__(self, path: str, ref: str, sha256: str, entries: Dict[str, dict],
                 data_start: int):
        self.path = path          # absolute
        self.ref = ref            # as the model.json writes it
        self.sha256 = sha256
        self.entries = entries
        self.data_start = data_start

    def shape(self, name: str) -> Optional[Tuple[int, ...]]:
        e = self.entries.get(name)
        return None if e is None else tuple(e["shape"])

    def array(self, name: str) -> np.ndarray:
        e = self.entries[name]
        begin, end = e["data_offsets"]
        count = (end - begin) // 4
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.data_start + begin)
                data = np.fromfile(fh, dtype="<f4", count=count)
        except OSError as exc:
            raise WeightsError(f"cannot read weights {self.path}: {exc.strerror}") from None
        if data.size != count:
            raise WeightsError(f"weights {self.path}: truncated at tensor {name!r}")
        return data.astype(np.float32, copy=False).reshape(e["shape"])

    def to_json(self) -> Dict[str, str]:
        return {"file": self.ref, "sha256": self.sha256}


def read_header(path: str) -> Tuple[Dict[str, dict], int]:
    """(entries, data start) of a weights file; WeightsError when it is not
    a float32 safetensors file whose offsets tile its data exactly."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise WeightsError(f"weights {path}: not a safetensors file (too short)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES or 8 + n > size:
                raise WeightsError(f"weights {path}: not a safetensors file (header length {n})")
            raw = fh.read(n)
    except OSError as exc:
        raise WeightsError(f"cannot read weights {path}: {exc.strerror}") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise WeightsError(f"weights {path}: corrupt header (not JSON)") from None
    if not isinstance(header, dict):
        raise WeightsError(f"weights {path}: corrupt header (not an object)")
    header.pop("__metadata__", None)
    data_len = size - 8 - n
    for name, e in header.items():
        ok = (isinstance(e, dict) and e.get("dtype") == DTYPE
              and isinstance(e.get("shape"), list)
              and all(isinstance(d, int) and d >= 0 for d in e["shape"])
              and isinstance(e.get("data_offsets"), list) and len(e["data_offsets"]) == 2
              and all(isinstance(o, int) for o in e["data_offsets"]))
        if not ok:
            dtype = e.get("dtype") if isinstance(e, dict) else None
            why = (f"dtype {dtype} (hwtune reads F32)" if dtype not in (None, DTYPE)
                   else "malformed entry")
            raise WeightsError(f"weights {path}: tensor {name!r}: {why}")
        begin, end = e["data_offsets"]
        count = int(np.prod(e["shape"], dtype=np.int64))
        if not 0 <= begin <= end <= data_len or end - begin != 4 * count:
            raise WeightsError(f"weights {path}: tensor {name!r}: offsets {begin}..{end} do "
                               f"not fit shape {e['shape']} in {data_len} data bytes")
    return header, 8 + n


# One parse and one hash per file version per process: tuners load the same
# model many times.
_OPENED: Dict[tuple, WeightsFile] = {}


def open_weights(path: str, ref: str, sha256: Optional[str] = None) -> WeightsFile:
    """Open and check a weights file; sha256, when given, must match."""
    path = os.path.abspath(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise WeightsError(f"weights file {ref} not found ({path}: {exc.strerror})") from None
    key = (path, st.st_size, st.st_mtime_ns)
    wf = _OPENED.get(key)
    if wf is None:
        entries, start = read_header(path)
        wf = WeightsFile(path, ref, file_sha256(path), entries, start)
        _OPENED[key] = wf
    if sha256 is not None and sha256.lower() != wf.sha256:
        raise WeightsError(f"weights file {ref} has sha256 {wf.sha256[:12]}..., the model "
                           f"names {sha256[:12]}...: it changed since the model was written "
                           "(re-import the model, or fix \"weights.sha256\")")
    return WeightsFile(path, ref, wf.sha256, wf.entries, wf.data_start)
