"""Stacked LSTM (Graphi Table 1a, DeepCPU Table 1): the same graph as
configs/models/templates/lstm.json, written as a loop."""

from hwtune.graph.generators.builder import Builder


def lstm_cell(b: Builder, p: str, x: str, h_prev: str, c_prev: str, layer: int):
    """Append one LSTM cell; returns the names of (c~, h~) before any gate.

    Two matmuls (input and recurrent) rather than one on [x, h]: they are
    independent, which is the intra-cell parallelism Graphi schedules.
    """
    b.op(f"{p}.xw", "matmul", [x, f"W{layer}", f"b{layer}"])
    b.op(f"{p}.hw", "matmul", [h_prev, f"U{layer}"])
    b.op(f"{p}.gates", "add", [f"{p}.xw", f"{p}.hw"])
    b.op(f"{p}.split", "split", [f"{p}.gates"],
         outputs=[f"{p}.i", f"{p}.f", f"{p}.g", f"{p}.o"], axis=1)
    b.op(f"{p}.si", "sigmoid", [f"{p}.i"])
    b.op(f"{p}.sf", "sigmoid", [f"{p}.f"])
    b.op(f"{p}.tg", "tanh", [f"{p}.g"])
    b.op(f"{p}.so", "sigmoid", [f"{p}.o"])
    b.op(f"{p}.fc", "mul", [f"{p}.sf", c_prev])
    b.op(f"{p}.ig", "mul", [f"{p}.si", f"{p}.tg"])


def lstm_weights(b: Builder, layer: int, in_dim: int, hidden: int):
    b.param(f"W{layer}", (in_dim, 4 * hidden))
    b.param(f"U{layer}", (hidden, 4 * hidden))
    b.param(f"b{layer}", (4 * hidden,))


def generate(batch=64, seq=20, hidden=128, input=None, layers=4, seed=0):
    input = hidden if input is None else input
    b = Builder(f"lstm-{layers}x{hidden}-seq{seq}-b{batch}", seed=seed)
    for t in range(1, seq + 1):
        b.input(f"h0.{t}", (batch, input))
    for layer in range(1, layers + 1):
        b.input(f"h{layer}.0", (batch, hidden), init="zeros")
        b.input(f"c{layer}.0", (batch, hidden), init="zeros")
    for layer in range(1, layers + 1):
        lstm_weights(b, layer, input if layer == 1 else hidden, hidden)
    for layer in range(1, layers + 1):
        for t in range(1, seq + 1):
            p = f"L{layer}.{t}"
            lstm_cell(b, p, f"h{layer - 1}.{t}", f"h{layer}.{t - 1}", f"c{layer}.{t - 1}", layer)
            b.op(f"c{layer}.{t}", "add", [f"{p}.fc", f"{p}.ig"])
            b.op(f"{p}.tc", "tanh", [f"c{layer}.{t}"])
            b.op(f"h{layer}.{t}", "mul", [f"{p}.so", f"{p}.tc"])
    b.output(*[f"h{layers}.{t}" for t in range(1, seq + 1)])
    return b.build()
