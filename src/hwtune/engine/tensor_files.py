"""Graph inputs from .npy files and outputs to an .npz archive
(`hwtune run --input NAME=FILE.npy --save-outputs OUT.npz`, compare)."""

from __future__ import annotations

import os
from typing import Dict, Mapping

import numpy as np

from hwtune.errors import UsageError


def load_inputs(graph, files: Mapping[str, str]) -> Dict[str, np.ndarray]:
    """name -> float32 array read from each .npy file; the name must be a
    graph input and the shape must be the one the model declares."""
    declared = {t.name: tuple(t.shape) for t in graph.inputs}
    out = {}
    for name, path in files.items():
        if name not in declared:
            raise UsageError(f'--input {name}={path}: the model has no input "{name}" '
                             f"(inputs: {', '.join(declared) or 'none'})")
        try:
            arr = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise UsageError(f"--input {name}={path}: no such file") from None
        except (OSError, ValueError) as exc:
            raise UsageError(f"--input {name}={path}: not a .npy array file "
                             f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                             ) from None
        if not isinstance(arr, np.ndarray) or not (np.issubdtype(arr.dtype, np.number)
                                                   or arr.dtype == np.bool_):
            raise UsageError(f"--input {name}={path}: expected a numeric array, got "
                             f"{getattr(arr, 'dtype', type(arr).__name__)}")
        if tuple(arr.shape) != declared[name]:
            raise UsageError(f"--input {name}={path}: shape {list(arr.shape)}, the model "
                             f"declares {list(declared[name])}")
        tensor = next(t for t in graph.inputs if t.name == name)
        if tensor.dtype != "float32":
            _check_ints(name, path, arr, tensor)
        out[name] = np.ascontiguousarray(arr, dtype=np.float32)
    return out


def _check_ints(name, path, arr, tensor) -> None:
    """An int64 / bool input (carried as float32 values): integers within
    the range the model declares (the rows of the table it indexes)."""
    low, high = int(tensor.init.get("low", 0)), int(tensor.init.get("high", 2))
    vals = np.asarray(arr, np.float64)
    bad = ~np.isfinite(vals) | (vals != np.trunc(vals)) | (vals < low) | (vals >= high)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise UsageError(f"--input {name}={path}: {tensor.dtype} values must be integers in "
                         f"[{low}, {high}) (the range the model declares for {name}); found "
                         f"{arr[where].item()!r} at {list(where)}")


def save_outputs(path: str, outputs: Mapping[str, np.ndarray]) -> None:
    """Write every output, by name, to one .npz archive (np.load(path)[name])."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"--save-outputs {path}: its directory does not exist")
    if not path.endswith(".npz"):
        raise UsageError(f"--save-outputs {path}: the file name must end in .npz")
    try:
        np.savez(path, **{k: np.asarray(v) for k, v in outputs.items()})
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
