"""The sides of a comparison, one row per peer in PEERS.

A Side is a name, a description of how it runs, run() (one forward pass)
and outputs() (name -> array of the last run). A peer whose library is not
installed raises PeerMissing with the install hint: an error when the user
named the peer (--with), a notice when it came from the default list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict

import numpy as np

from hwtune.errors import HwtuneError, UsageError


class PeerMissing(HwtuneError):
    """The peer's library is not installed (the message says how to get it):
    exit 2, a set-up for the user to fix, not a comparison that passed."""


@dataclass
class Side:
    key: str
    name: str
    describe: str
    run: Callable[[], None]
    outputs: Callable[[], Dict[str, np.ndarray]]
    close: Callable[[], None] = lambda: None


@dataclass
class Subject:
    """What every side computes: the graph hwtune runs, its weights and
    inputs, and the ONNX model the ONNX peers load."""

    graph: object
    params: Dict[str, np.ndarray]
    inputs: Dict[str, np.ndarray]
    onnx_bytes: bytes
    onnx_source: str      # "the file" or "exported from the model.json"
    threads: int


_ORT_TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64,
              "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def ort_side(s: Subject) -> Side:
    try:
        import onnxruntime as ort
    except ImportError:
        raise PeerMissing("ONNX Runtime is not installed: pip install 'hwtune[peers]'") from None
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = s.threads, 1
    # ORT's idle intra-op threads spin after a run and take the cores from
    # the hwtune sample interleaved next (measured on ResNet-18 conv2_x at 2
    # threads: hwtune 98.9 GFLOPS with spinning on, 146.5 off; ORT 219 -> 211).
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        sess = ort.InferenceSession(s.onnx_bytes, so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own exception types
        raise UsageError(f"ONNX Runtime cannot load the model: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                         ) from None
    names = [o.name for o in sess.get_outputs()]
    # hwtune carries int and bool inputs as float32 values: ORT gets them in
    # the type its model declares.
    types = {i.name: _ORT_TYPES.get(i.type, np.float32) for i in sess.get_inputs()}
    feeds = {k: np.ascontiguousarray(v, types.get(k, np.float32))
             for k, v in s.inputs.items()}
    last = {}

    def run():
        last["out"] = sess.run(None, feeds)

    return Side("ort", f"ONNX Runtime {ort.__version__}",
                f"{s.threads} intra-op threads, graph optimizations on, {s.onnx_source}",
                run, lambda: dict(zip(names, last["out"])))


def torch_side(s: Subject) -> Side:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise PeerMissing("PyTorch is not installed: pip install torch==2.13.0") from None
    from hwtune.compare.torch_graph import TorchGraph, version
    tg = TorchGraph(s.graph, s.params, s.inputs, s.threads)
    return Side("torch", f"PyTorch {version()}",
                f"{s.threads} threads, eager, one call per op", tg.run, tg.outputs)


PEERS: Dict[str, Callable[[Subject], Side]] = {"ort": ort_side, "torch": torch_side}
