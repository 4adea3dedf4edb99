"""Open an ONNX file and settle its input shapes; every way a file can be
unusable is one OnnxImportError line naming the file and what to do."""

from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

from hwtune.onnx.errors import OnnxImportError

# Opsets whose semantics the rules implement (Slice inputs from 10, Split /
# Squeeze / Unsqueeze inputs and Softmax's axis from 13, Reduce* axes
# inputs and Split's num_outputs from 18). Exporters write 17 (PyTorch's
# TorchScript exporter) and 18 (its dynamo exporter).
MIN_OPSET, MAX_OPSET = 7, 22
DEFAULT_DOMAINS = ("", "ai.onnx")


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def opset_of(model) -> int:
    for o in model.opset_import:
        if o.domain in DEFAULT_DOMAINS:
            return int(o.version)
    return 1


def external_files(model):
    """(tensor name, location) of every tensor whose data lives in another
    file."""
    from onnx import TensorProto
    from onnx.external_data_helper import _get_all_tensors
    for t in _get_all_tensors(model):
        if t.HasField("data_location") and t.data_location == TensorProto.EXTERNAL:
            info = {e.key: e.value for e in t.external_data}
            yield t.name, info.get("location", "")


def _names(model):
    """The model's strings that become names in the imported model.json."""
    g = model.graph
    yield from (model.producer_name, model.producer_version, g.name)
    for n in g.node:
        yield from (n.name, n.op_type, n.domain, *n.input, *n.output)
    for v in (*g.input, *g.output, *g.initializer, *g.value_info):
        yield v.name


def read_model(path: str):
    """(ModelProto with external data loaded and local functions inlined,
    default-domain opset)."""
    import onnx
    from google.protobuf.message import DecodeError
    if not os.path.isfile(path):
        raise OnnxImportError(f"{path}: no such file")
    try:
        model = onnx.load(path, load_external_data=False)
    except (DecodeError, RuntimeError, ValueError, UnicodeDecodeError) as exc:
        raise OnnxImportError(f"{path}: not a valid ONNX file (truncated or corrupt: "
                              f"{_first_line(exc)})") from None
    except OSError as exc:
        raise OnnxImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    bad = next((s for s in _names(model) if isinstance(s, bytes)), None)
    if bad is not None:  # protobuf hands a string field that is not UTF-8 back as bytes
        raise OnnxImportError(f"{path}: not a valid ONNX file (a name is not UTF-8: {bad!r})")
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.output:
        raise OnnxImportError(f"{path}: not an ONNX model (no graph or no outputs; truncated?)")
    opset = opset_of(model)
    if opset > MAX_OPSET:
        raise OnnxImportError(f"{path}: ONNX opset {opset} is newer than hwtune imports "
                              f"({MIN_OPSET}..{MAX_OPSET}); re-export with "
                              f"opset_version={min(17, MAX_OPSET)}")
    if opset < MIN_OPSET:
        raise OnnxImportError(f"{path}: ONNX opset {opset} is older than hwtune imports "
                              f"({MIN_OPSET}..{MAX_OPSET}); convert it with "
                              f"onnx.version_converter")
    base = os.path.dirname(os.path.abspath(path))
    for name, location in external_files(model):
        full = os.path.join(base, location)
        if not location or not os.path.isfile(full):
            raise OnnxImportError(f'{path}: tensor "{name}" keeps its data in external file '
                                  f'"{location}", which is missing (expected at {full})')
    try:
        from onnx.external_data_helper import load_external_data_for_model
        load_external_data_for_model(model, base)
    except (OSError, ValueError) as exc:
        raise OnnxImportError(f"{path}: cannot read external data: {_first_line(exc)}") from None
    if model.functions:
        from onnx import inliner
        model = inliner.inline_local_functions(model)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise OnnxImportError(f"{path}: invalid ONNX model: {_first_line(exc)}") from None
    except ValueError:
        pass  # above protobuf's 2 GB limit: the checker needs a path; the import checks
    return model, opset


def tensor_value(t, where: str):
    """A TensorProto's values as a numpy array; OnnxImportError when they
    are not what its dims and type say (a data length that does not match
    the dims, bytes of another type, a negative dim). where: what to name
    it by, e.g. 'initializer "w"'."""
    from onnx import TensorProto, numpy_helper
    dims = list(t.dims)
    try:
        if any(d < 0 for d in dims):
            raise ValueError("negative dimension")
        return numpy_helper.to_array(t)
    except (ValueError, TypeError, KeyError) as exc:
        kind = TensorProto.DataType.Name(t.data_type) \
            if t.data_type in TensorProto.DataType.values() else f"type {t.data_type}"
        raise OnnxImportError(f"{where} ({kind}, dims {dims}) does not hold the data its type "
                              f"and dims say: {_first_line(exc)}") from None


def _show(dims) -> str:
    return "x".join("?" if d is None else str(d) for d in dims)


# ONNX input element types hwtune takes -> the model.json dtype (int32 ids
# are carried as int64 is: as float32 values, docs/onnx.md).
_INPUT_TYPES = {1: "float32", 7: "int64", 6: "int64", 9: "bool"}


def input_dtypes(model) -> Dict[str, str]:
    """Each graph input (initializers excluded) -> its model.json dtype
    ("float32", "int64" or "bool"); input_shapes refuses the other types."""
    inits = {t.name for t in model.graph.initializer}
    return {i.name: _INPUT_TYPES.get(i.type.tensor_type.elem_type, "float32")
            for i in model.graph.input if i.name not in inits}


def input_shapes(model, shapes: Optional[Dict[str, Tuple[int, ...]]] = None,
                 dims: Optional[Dict[str, int]] = None) -> Dict[str, Tuple[int, ...]]:
    """Each graph input (initializers excluded) -> its static shape, from
    the file with symbolic dimensions set by `dims` (dim name -> size) or a
    whole shape given in `shapes` (input name -> shape)."""
    from onnx import TensorProto
    shapes, dims = dict(shapes or {}), dict(dims or {})
    g = model.graph
    inits = {t.name for t in g.initializer}
    real = [i for i in g.input if i.name not in inits]
    names = [i.name for i in real]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise OnnxImportError(f'--shape names unknown input "{unknown[0]}" (the model\'s '
                              f"inputs: {', '.join(names) or 'none'})")
    symbols = set()
    out = {}
    for i in real:
        tt = i.type.tensor_type
        if i.type.WhichOneof("value") != "tensor_type":
            raise OnnxImportError(f'input "{i.name}" is not a tensor (sequences and maps are '
                                  "not supported)")
        if tt.elem_type not in _INPUT_TYPES:
            kind = TensorProto.DataType.Name(tt.elem_type).lower()
            raise OnnxImportError(f'input "{i.name}" has type {kind}; hwtune graphs take '
                                  "float32, int64, int32 and bool inputs")
        file_dims = None
        if tt.HasField("shape"):
            file_dims = []
            for d in tt.shape.dim:
                if d.HasField("dim_value") and d.dim_value > 0:
                    file_dims.append(int(d.dim_value))
                elif d.dim_param:
                    symbols.add(d.dim_param)
                    file_dims.append(dims.get(d.dim_param, d.dim_param))
                else:
                    file_dims.append(None)
        if i.name in shapes:
            given = tuple(int(d) for d in shapes[i.name])
            if file_dims is not None and len(file_dims) != len(given):
                raise OnnxImportError(f'--shape {i.name}={_show(given)}: the model declares '
                                      f"rank {len(file_dims)}, not {len(given)}")
            for k, (f, s) in enumerate(zip(file_dims or [], given)):
                if isinstance(f, int) and f != s:
                    raise OnnxImportError(f'--shape {i.name}={_show(given)}: dim {k} is fixed '
                                          f"at {f} in the model")
            out[i.name] = given
            continue
        if file_dims is None:
            raise OnnxImportError(f'input "{i.name}" has no shape in the model: give it with '
                                  f"--shape {i.name}=1x3x224x224 (its real dims)")
        for k, d in enumerate(file_dims):
            if isinstance(d, str) or d is None:
                sym = f'symbolic dimension "{d}"' if d else "an unknown dimension"
                example = "x".join(str(x) if isinstance(x, int) else "N" for x in file_dims)
                hint = f" or --set {d}=N" if d else ""
                raise OnnxImportError(f'input "{i.name}" has {sym} (dim {k} of '
                                      f"{_show(x if isinstance(x, int) else None for x in file_dims)}"
                                      f"): give it with --shape {i.name}={example}{hint}")
        out[i.name] = tuple(file_dims)
    stray = sorted(set(dims) - symbols)
    if stray and dims:
        raise OnnxImportError(f'--set names no symbolic dimension "{stray[0]}" of the model '
                              f"({', '.join(sorted(symbols)) or 'it has none'})")
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise OnnxImportError(f"--set {name}={value!r}: a dimension must be an integer >= 1")
    return out
