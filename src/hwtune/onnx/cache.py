"""On-the-fly imports for `hwtune run/tune-graph/compare MODEL.onnx`,
cached by content: the key is the ONNX file's sha256, the shapes asked for
and the importer version, so the same file gives the same model.json (and
so the same graph hash in results.db, where its tuned config lives). A
cache entry also records its external data files (size, mtime) and is
rebuilt when one of them changes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Optional, Tuple

from hwtune.onnx.errors import OnnxImportError


def cache_root() -> Path:
    """$HWTUNE_CACHE_DIR, else $XDG_CACHE_HOME/hwtune, else ~/.cache/hwtune."""
    env = os.environ.get("HWTUNE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "hwtune"


def _stamp(path: str):
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def _externals(onnx_path: str):
    """{external data file: [size, mtime]} of the ONNX file."""
    base = os.path.dirname(os.path.abspath(onnx_path))
    import onnx
    from hwtune.onnx.reader import external_files
    model = onnx.load(onnx_path, load_external_data=False)
    out = {}
    for _, location in external_files(model):
        full = os.path.join(base, location)
        out[full] = _stamp(full)
    return out


def import_key(path: str, shapes=None, dims=None) -> str:
    from hwtune import __version__
    from hwtune.onnx.importer import IMPORTER_VERSION
    from hwtune.db.keys import hash_file
    h = hashlib.sha256()
    try:
        hash_file(h, path)
    except OSError as exc:
        raise OnnxImportError(f"{path}: cannot read: {exc.strerror}") from None
    extra = {"importer": IMPORTER_VERSION, "hwtune": __version__,
             "shapes": {k: list(v) for k, v in sorted((shapes or {}).items())},
             "dims": dict(sorted((dims or {}).items()))}
    h.update(json.dumps(extra, sort_keys=True).encode())
    return h.hexdigest()


def cached_import(path: str, shapes: Optional[Dict[str, Tuple[int, ...]]] = None,
                  dims: Optional[Dict[str, int]] = None) -> str:
    """model.json path of the import of `path` (imported now unless cached)."""
    from hwtune.onnx.importer import import_onnx
    if not os.path.isfile(path):
        raise OnnxImportError(f"{path}: no such file")
    key = import_key(path, shapes, dims)
    stem = Path(path).stem or "model"
    entry = cache_root() / "onnx" / key[:32]
    model_json = entry / f"{stem}.json"
    meta_path = entry / "source.json"
    if model_json.is_file() and meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
            if all(os.path.isfile(f) and _stamp(f) == s
                   for f, s in meta.get("external", {}).items()):
                return str(model_json)
        except (OSError, ValueError):
            pass  # a broken entry is rebuilt below
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".import-", dir=entry.parent))
    except OSError as exc:
        raise OnnxImportError(f"cannot create the import cache in {entry.parent}: "
                              f"{exc.strerror} (set HWTUNE_CACHE_DIR)") from None
    try:
        import_onnx(path, str(tmp / f"{stem}.json"), shapes, dims)
        meta = {"source": os.path.abspath(path), "key": key,
                "external": _externals(path)}
        (tmp / "source.json").write_text(json.dumps(meta, indent=1))
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(model_json)
