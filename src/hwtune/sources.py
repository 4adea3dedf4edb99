"""Where a MODEL argument comes from: a model.json path, an ONNX file
(imported on the fly, cached), or the name of a bundled model
(`hwtune run lstm_small`), so the commands work from any directory.

The bundled models and the default check suite travel in the wheel as
hwtune/configs/ (package data); in a source checkout they are configs/.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from hwtune.errors import UsageError

ONNX_SUFFIX = ".onnx"


def configs_dir() -> Path:
    """The bundled configs: the installed package's copy, else the
    checkout's (running from a source tree)."""
    here = Path(__file__).resolve().parent
    for cand in (here / "configs", here.parent.parent / "configs"):
        if (cand / "models").is_dir():
            return cand
    raise UsageError("the bundled models are missing from this installation "
                     "(hwtune/configs/ in the package): reinstall hwtune")


def bundled_models() -> Dict[str, Path]:
    """Bundled model name -> its model.json."""
    models = configs_dir() / "models"
    return {p.stem: p for p in sorted(models.glob("*.json"))}


def default_suite() -> Path:
    return configs_dir() / "ci.toml"


def resolve_model(arg: str) -> str:
    """A path for MODEL: an existing file as given, else a bundled model of
    that name; UsageError listing the bundled names otherwise."""
    if os.path.isfile(arg):
        return arg
    if os.path.isdir(arg):
        raise UsageError(f"{arg} is a directory, not a model file")
    name = Path(arg).name
    looks_like_name = os.sep not in arg and not arg.endswith(ONNX_SUFFIX)
    if looks_like_name:
        stem = name[:-5] if name.endswith(".json") else name
        found = bundled_models().get(stem)
        if found is not None:
            return str(found)
    if looks_like_name:
        stem = name[:-5] if name.endswith(".json") else name
        raise UsageError(f"cannot read {arg}: no such file, and no bundled model of that name"
                         f"{did_you_mean(stem)}")
    raise UsageError(f"cannot read {arg}: no such file")


def bundled_dynamic() -> Dict[str, Path]:
    """The bundled dynamic models (configs/dynamic/*.json): name -> path."""
    folder = configs_dir() / "dynamic"
    return {p.stem: p for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def all_model_names() -> List[str]:
    """Every bundled model's name, static and dynamic."""
    return sorted(set(bundled_models()) | set(bundled_dynamic()))


def did_you_mean(name: str) -> str:
    """': did you mean lstm_small?' for a misspelt bundled name (difflib's
    closest), else a pointer to `hwtune model list`."""
    import difflib
    names = all_model_names()
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f": did you mean {close[0]}?"
    return f" (`hwtune model list` names the {len(names)} bundled models)"


def is_onnx(path: str) -> bool:
    return path.lower().endswith(ONNX_SUFFIX)


def load_any(arg: str, overrides: Optional[Dict[str, Any]] = None,
             shapes: Optional[Dict[str, Tuple[int, ...]]] = None, limits=None):
    """(validated Graph, path it came from) for a MODEL argument. An ONNX
    file is imported (cached by content); its --set values size symbolic
    dimensions and --shape gives whole input shapes. The C engine is asked
    after validation whether it takes the model (GraphError, located, when
    it does not), so no command passes a model `run` would refuse."""
    from hwtune.engine.accepts import require_accepted
    from hwtune.graph import load_model
    path = resolve_model(arg)
    if is_onnx(path):
        from hwtune.onnx.cache import cached_import
        json_path = cached_import(path, shapes, overrides)
        return require_accepted(load_model(json_path, None, limits)), path
    if shapes:
        raise UsageError("--shape sizes the inputs of an ONNX model; for a model.json use "
                         "--set NAME=VALUE on its vars")
    return require_accepted(load_model(path, overrides, limits)), path


def parse_shape(item: str) -> Tuple[str, Tuple[int, ...]]:
    """'x=1x3x224x224' -> ('x', (1, 3, 224, 224))."""
    name, sep, dims = item.partition("=")
    try:
        shape = tuple(int(d) for d in dims.lower().replace(",", "x").split("x"))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d < 1 for d in shape):
        raise UsageError(f'invalid --shape "{item}": expected NAME=D0xD1x..., e.g. '
                         "x=1x3x224x224")
    return name, shape


def list_models() -> List[Dict[str, Any]]:
    """Name, kind (static: a graph; dynamic: a vertex function run over
    input graphs with --inputs), path and description of every bundled
    model, static ones first."""
    import json

    out = []
    for kind, found in (("static", bundled_models()), ("dynamic", bundled_dynamic())):
        for name, path in found.items():
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                doc = {}
            out.append({"name": name, "kind": kind, "path": str(path),
                        "description": doc.get("comment") or doc.get("description", ""),
                        "vars": doc.get("vars", {})})
    return out
