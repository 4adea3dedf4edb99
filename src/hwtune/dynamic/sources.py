"""Where a dynamic MODEL argument comes from: a model.json declaring
"vertex", or the name of a bundled one (configs/dynamic/)."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Optional

from hwtune.errors import UsageError
from hwtune.sources import bundled_dynamic, did_you_mean


def find_dynamic(arg: str) -> Optional[str]:
    """The path of MODEL when it is a dynamic model (a bundled name, or a
    .json file whose text declares "vertex"), else None."""
    if os.path.isfile(arg):
        if not arg.endswith(".json"):
            return None
        try:
            with open(arg, "rb") as fh:
                data = fh.read()
        except OSError:
            return None
        if b'"vertex"' not in data:  # the common case, without parsing
            return None
        try:  # a static model may name a tensor "vertex": only the top level counts
            doc = json.loads(data)
        except ValueError:
            return None  # the static loader reports the file's syntax error
        return arg if isinstance(doc, dict) and "vertex" in doc else None
    if os.sep in arg:
        return None
    stem = arg[:-5] if arg.endswith(".json") else arg
    found = bundled_dynamic().get(stem)
    return str(found) if found else None


def resolve_dynamic(arg: str) -> str:
    path = find_dynamic(arg)
    if path is None:
        if os.path.isfile(arg):
            raise UsageError(f"{arg} is not a dynamic model (it declares no \"vertex\" "
                             "function); --inputs is for dynamic models")
        stem = arg[:-5] if arg.endswith(".json") else arg
        raise UsageError(f"cannot read {arg}: no such file, and no bundled dynamic model of "
                         f"that name{did_you_mean(stem)}")
    return path


def samples_digest(path: str) -> str:
    """sha256 (hex) of an input-graph file's bytes: which samples a stored
    figure was measured on, whatever the file is called."""
    from hwtune.db.keys import hash_file
    h = hashlib.sha256()
    try:
        hash_file(h, path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return h.hexdigest()
