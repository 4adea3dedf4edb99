"""Stacked LSTM (Graphi Table 1a, DeepCPU Table 1): the same graph as
configs/models/templates/lstm.json (fused=False) or configs/models/templates/lstm_fused.json
(fused=True), written as a loop.

fused=False is Graphi's cell: per step an input and a recurrent matmul,
independent, which is the intra-cell parallelism Graphi schedules.

fused=True is DeepCPU's (Sec. 5.2.1): the four gate matmuls of a step are
one [B,H] x [H,4H] matmul (W and U already hold the gates side by side), and
the input projection x_t W + b, which does not depend on the recurrence, is
hoisted out of it: one [hoist*B, I] x [I, 4H] matmul per `hoist` steps,
sliced per step. Both forms compute the same function of the same inputs
and params. Measured here (1 thread, interleaved, medians): the hoisting
runs deepcpu_lstm_i256_h256 2.5x and deepcpu_lstm_i1024_h1024 1.9x faster,
the GEMV of every step's projection becoming one GEMM per chunk. Chunks
shorter than the sequence let layer l+1 start on chunk k while layer l runs
chunk k+1: lstm_medium and lstm_large use 5 steps, [320, I] x [I, 4H], big
enough for the packed GEMM's full rate (113 GFLOPS at M=64 and at M=1920 on
one core here), and the executor sweep then picks 2 executors x 1 thread.

fused_cell=True (the default) writes the element-wise part of a step as one
lstm_cell op (src/hwtune/graph/ops/rnn.py) on the recurrent matmul's gates,
adding the step's rows of the input projection itself (no add, and in the
DeepCPU form no slice); fused_cell=False writes it as the eleven ops of the
textbook cell (add, split, sigmoid x3, tanh x2, mul x3, add).
"""

from hwtune.graph.generators.builder import Builder

# The engine's op I/O limit (HWT_OP_MAX_IO): a chunk's concat joins at most
# this many steps, so DeepCPU's seq-100 workloads hoist 64 + 36 steps.
MAX_CONCAT = 64


def lstm_gates(b: Builder, p: str, gates: str, c_prev: str):
    """Split [B,4H] pre-activations into i, f, g, o and append the gate
    nonlinearities and the two products of c = f c_prev + i g."""
    b.op(f"{p}.split", "split", [gates],
         outputs=[f"{p}.i", f"{p}.f", f"{p}.g", f"{p}.o"], axis=1)
    b.op(f"{p}.si", "sigmoid", [f"{p}.i"])
    b.op(f"{p}.sf", "sigmoid", [f"{p}.f"])
    b.op(f"{p}.tg", "tanh", [f"{p}.g"])
    b.op(f"{p}.so", "sigmoid", [f"{p}.o"])
    b.op(f"{p}.fc", "mul", [f"{p}.sf", c_prev])
    b.op(f"{p}.ig", "mul", [f"{p}.si", f"{p}.tg"])


def lstm_cell(b: Builder, p: str, x: str, h_prev: str, c_prev: str, layer: int):
    """Append one Graphi LSTM cell; returns nothing: the products fc and ig
    are left for the caller to combine into c (plain or phased)."""
    b.op(f"{p}.xw", "matmul", [x, f"W{layer}", f"b{layer}"])
    b.op(f"{p}.hw", "matmul", [h_prev, f"U{layer}"])
    b.op(f"{p}.gates", "add", [f"{p}.xw", f"{p}.hw"])
    lstm_gates(b, p, f"{p}.gates", c_prev)


def fused_cell(b: Builder, p: str, xw_chunk: str, row: int, batch: int, h_prev: str,
               c_prev: str, layer: int):
    """Append one DeepCPU cell whose input projection is rows row*batch ..
    (row+1)*batch of its chunk's hoisted projection xw_chunk."""
    b.op(f"{p}.xw", "slice", [xw_chunk], axis=0, begin=row * batch, end=(row + 1) * batch)
    b.op(f"{p}.hw", "matmul", [h_prev, f"U{layer}"])
    b.op(f"{p}.gates", "add", [f"{p}.xw", f"{p}.hw"])
    lstm_gates(b, p, f"{p}.gates", c_prev)


def cell_op(b: Builder, p: str, x: str, h_prev: str, c_prev: str, layer: int, t: int,
            xw_chunk=None, x_row=0):
    """Append one step as the recurrent matmul and a single lstm_cell op that
    adds the input projection: x W + b (Graphi form), or rows x_row.. of the
    hoisted chunk xw_chunk (DeepCPU form)."""
    attrs = {"x_row": x_row} if xw_chunk is not None else {}
    if xw_chunk is None:
        xw_chunk = b.op(f"{p}.xw", "matmul", [x, f"W{layer}", f"b{layer}"])
    b.op(f"{p}.hw", "matmul", [h_prev, f"U{layer}"])
    b.op(f"{p}.cell", "lstm_cell", [f"{p}.hw", c_prev, xw_chunk],
         outputs=[f"h{layer}.{t}", f"c{layer}.{t}"], **attrs)


def hoisted_projection(b: Builder, layer: int, k: int, steps):
    """x_t W + b for the steps of chunk k at once: their inputs concatenated
    row-wise, one matmul. Returns the name of the [len(steps)*B, 4H] result."""
    b.op(f"X{layer}.{k}", "concat", [f"h{layer - 1}.{t}" for t in steps], axis=0)
    return b.op(f"XW{layer}.{k}", "matmul", [f"X{layer}.{k}", f"W{layer}", f"b{layer}"])


def chunk_steps(seq: int, hoist: int) -> int:
    """Steps per hoisted projection: hoist, or the whole sequence when 0,
    never above the engine's op I/O limit."""
    return min(hoist if hoist > 0 else seq, MAX_CONCAT)


def lstm_weights(b: Builder, layer: int, in_dim: int, hidden: int):
    b.param(f"W{layer}", (in_dim, 4 * hidden))
    b.param(f"U{layer}", (hidden, 4 * hidden))
    b.param(f"b{layer}", (4 * hidden,))


def lstm_layer(b: Builder, layer: int, seq: int, batch: int, fused: bool, hoist: int, combine,
               cell: bool = False):
    """All cells of one layer in step order; combine(p, layer, t) appends
    what turns the cell's products into c and h (cell=False), or each step
    is one lstm_cell op (cell=True, combine unused). Fused: chunk k's hoisted
    projection comes right before its cells, so with chunks shorter than the
    sequence the next layer can start on chunk k while this one runs k+1."""
    chunk = chunk_steps(seq, hoist)
    for t in range(1, seq + 1):
        p, h_prev, c_prev = f"L{layer}.{t}", f"h{layer}.{t - 1}", f"c{layer}.{t - 1}"
        x = f"h{layer - 1}.{t}"
        k, row = (t - 1) // chunk + 1, (t - 1) % chunk
        if fused and row == 0:
            hoisted_projection(b, layer, k, range(t, min(t + chunk, seq + 1)))
        if cell:
            cell_op(b, p, x, h_prev, c_prev, layer, t, f"XW{layer}.{k}" if fused else None,
                    row * batch if fused else 0)
            continue
        if not fused:
            lstm_cell(b, p, x, h_prev, c_prev, layer)
        else:
            fused_cell(b, p, f"XW{layer}.{k}", row, batch, h_prev, c_prev, layer)
        combine(p, layer, t)


def generate(batch=64, seq=20, hidden=128, input=None, layers=4, fused=False, hoist=0,
             fused_cell=True, seed=0):
    input = hidden if input is None else input
    b = Builder(f"lstm-{layers}x{hidden}-seq{seq}-b{batch}", seed=seed)
    for t in range(1, seq + 1):
        b.input(f"h0.{t}", (batch, input))
    for layer in range(1, layers + 1):
        b.input(f"h{layer}.0", (batch, hidden), init="zeros")
        b.input(f"c{layer}.0", (batch, hidden), init="zeros")
    for layer in range(1, layers + 1):
        lstm_weights(b, layer, input if layer == 1 else hidden, hidden)

    def combine(p, layer, t):
        b.op(f"c{layer}.{t}", "add", [f"{p}.fc", f"{p}.ig"])
        b.op(f"{p}.tc", "tanh", [f"c{layer}.{t}"])
        b.op(f"h{layer}.{t}", "mul", [f"{p}.so", f"{p}.tc"])

    for layer in range(1, layers + 1):
        lstm_layer(b, layer, seq, batch, fused, hoist, combine, cell=fused_cell)
    b.output(*[f"h{layers}.{t}" for t in range(1, seq + 1)])
    return b.build()
