"""Stacked PhasedLSTM (Neil et al. 2016; Graphi Table 1a): the same graph
as configs/models/templates/phased_lstm.json, written as a loop.

The time gate's piecewise-linear openness is max(min(2 phi/r, 2 - 2 phi/r),
leak phi): equal to the paper's k_t except in the sliver at the end of the
open phase where both branches are below leak * phi, where it keeps the
gate continuous instead of jumping down to leak * phi.
"""

from hwtune.graph.generators.builder import Builder
from hwtune.graph.generators.lstm import lstm_layer, lstm_weights


def generate(batch=64, seq=20, hidden=128, input=None, layers=4, leak=0.001,
             r_on=0.05, fused=False, hoist=0, seed=0):
    """fused / hoist: the LSTM cell in Graphi's or DeepCPU's form, as in
    hwtune.graph.generators.lstm (configs/models/templates/phased_lstm_fused.json)."""
    input = hidden if input is None else input
    b = Builder(f"phased-lstm-{layers}x{hidden}-seq{seq}-b{batch}", seed=seed)
    for t in range(1, seq + 1):
        b.input(f"h0.{t}", (batch, input))
        b.input(f"time.{t}", (batch, 1), low=10 * (t - 1), high=10 * t)
    for layer in range(1, layers + 1):
        b.input(f"h{layer}.0", (batch, hidden), init="zeros")
        b.input(f"c{layer}.0", (batch, hidden), init="zeros")
    for layer in range(1, layers + 1):
        lstm_weights(b, layer, input if layer == 1 else hidden, hidden)
        b.param(f"tau{layer}", (hidden,), low=1, high=100)
        b.param(f"s{layer}", (hidden,), low=0, high=10)
        b.param(f"r{layer}", (hidden,), init="constant", value=r_on)

    def combine(p, layer, t):
        c_prev, h_prev = f"c{layer}.{t - 1}", f"h{layer}.{t - 1}"
        b.op(f"{p}.cp", "add", [f"{p}.fc", f"{p}.ig"])
        b.op(f"{p}.tc", "tanh", [f"{p}.cp"])
        b.op(f"{p}.hp", "mul", [f"{p}.so", f"{p}.tc"])
        b.op(f"{p}.shift", "sub", [f"time.{t}", f"s{layer}"])
        b.op(f"{p}.cyc", "mod", [f"{p}.shift", f"tau{layer}"])
        b.op(f"{p}.phi", "div", [f"{p}.cyc", f"tau{layer}"])
        b.op(f"{p}.ratio", "div", [f"{p}.phi", f"r{layer}"])
        b.op(f"{p}.up", "affine", [f"{p}.ratio"], scale=2.0)
        b.op(f"{p}.down", "affine", [f"{p}.ratio"], scale=-2.0, shift=2.0)
        b.op(f"{p}.open", "minimum", [f"{p}.up", f"{p}.down"])
        b.op(f"{p}.closed", "affine", [f"{p}.phi"], scale=leak)
        b.op(f"{p}.k", "maximum", [f"{p}.open", f"{p}.closed"])
        b.op(f"{p}.dc", "sub", [f"{p}.cp", c_prev])
        b.op(f"{p}.kdc", "mul", [f"{p}.k", f"{p}.dc"])
        b.op(f"c{layer}.{t}", "add", [c_prev, f"{p}.kdc"])
        b.op(f"{p}.dh", "sub", [f"{p}.hp", h_prev])
        b.op(f"{p}.kdh", "mul", [f"{p}.k", f"{p}.dh"])
        b.op(f"h{layer}.{t}", "add", [h_prev, f"{p}.kdh"])

    for layer in range(1, layers + 1):
        lstm_layer(b, layer, seq, batch, fused, hoist, combine)
    b.output(*[f"h{layers}.{t}" for t in range(1, seq + 1)])
    return b.build()
