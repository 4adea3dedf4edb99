"""The numpy reference of a dynamic model: every sample on its own, every
vertex on its own (one row at a time), children before parents, through the
ops' numpy references. It shares nothing with the engine's scheduling, so it
is the oracle of `hwtune run --check` and of the tests.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from hwtune.dynamic.model import DynModel
from hwtune.graph import ops as oplib
from hwtune.graph.reference import init_params


def split_ops(model: DynModel) -> Tuple[List[int], Dict[int, List[int]]]:
    """(F's ops, each readout's ops), each in a topological order: an op
    belongs to readout r when it reads, directly or not, a tensor r reads."""
    g = model.graph
    owner: Dict[str, int] = {x.name: x.readout for x in model.gathers if x.kind == "state"}
    f_ops: List[int] = []
    ro_ops: Dict[int, List[int]] = {r: [] for r in range(len(model.readouts))}
    for i in g.order:
        op = g.ops[i]
        rs = {owner[n] for n in op.inputs if n in owner}
        if rs:
            r = rs.pop()
            ro_ops[r].append(i)
            for n in op.outputs:
                owner[n] = r
        else:
            f_ops.append(i)
    return f_ops, ro_ops


def _f_steps(model: DynModel, f_ops: List[int]) -> List[tuple]:
    """F's ops and moves (to_edges, sum_edges) in an order where each runs
    after what it reads: the static order does not know that a moved tensor
    depends on its source."""
    g = model.graph
    have = {t.name for t in g.params}
    have |= {x.name for x in model.gathers if x.kind not in ("to_edges", "sum_edges", "state")}
    moves = [x for x in model.gathers if x.kind in ("to_edges", "sum_edges")]
    todo, steps = list(f_ops), []
    while todo or moves:
        progress = False
        for x in list(moves):
            if x.source in have:
                steps.append(("move", x))
                have.add(x.name)
                moves.remove(x)
                progress = True
        for i in list(todo):
            if all(n in have for n in g.ops[i].inputs):
                steps.append(("op", i))
                have.update(g.ops[i].outputs)
                todo.remove(i)
                progress = True
        if not progress:
            raise ValueError("the vertex function's ops cannot be ordered")
    return steps


def topo_order(n: int, child_off: np.ndarray, children: np.ndarray) -> List[int]:
    """A sample's local vertices, every child before its parents (DFS)."""
    done = np.zeros(n, bool)
    order: List[int] = []
    for root in range(n):
        if done[root]:
            continue
        stack = [(root, 0)]
        while stack:
            v, k = stack.pop()
            if done[v]:
                continue
            lo, hi = child_off[v], child_off[v + 1]
            if lo + k < hi:
                stack.append((v, k + 1))
                c = int(children[lo + k])
                if not done[c]:
                    stack.append((c, 0))
            else:
                done[v] = True
                order.append(v)
    return order


def run_reference(model: DynModel, arrays: Dict[str, np.ndarray],
                  params: Optional[Dict[str, np.ndarray]] = None,
                  samples: Optional[range] = None) -> Dict[str, object]:
    """Evaluate model over parsed samples (hwtune.native.dynamic.Samples.
    arrays()). Returns {"readouts": [[array per output] per readout] (rows
    in sample order, within a sample in vertex order), "states": [array
    [n_vertices, width] per state]}."""
    g = model.graph
    values = dict(params) if params is not None else init_params(g)
    f_ops, ro_ops = split_ops(model)
    steps = _f_steps(model, f_ops)
    voff, coff, kids = arrays["vertex_offsets"], arrays["child_offsets"], arrays["children"]
    tokens, feats = arrays["tokens"], arrays["features"]
    n_v = int(voff[-1])
    states = [np.zeros((n_v, w), np.float32) for _, w, _ in model.states]
    outs: List[List[List[np.ndarray]]] = [[[] for _ in r.outputs] for r in model.readouts]
    count = len(voff) - 1
    emb = values[model.embedding] if model.embedding else None

    def run_op(i, vals):
        op = g.ops[i]
        res = oplib.get(op.op).ref([vals[n] for n in op.inputs], op.resolved, len(op.outputs))
        for name, arr in zip(op.outputs, res):
            vals[name] = np.asarray(arr, np.float32)

    for s in samples if samples is not None else range(count):
        v0, v1 = int(voff[s]), int(voff[s + 1])
        n = v1 - v0
        local_off = coff[v0:v1 + 1] - coff[v0]
        local_kids = kids[coff[v0]:coff[v1]]
        is_child = np.zeros(n, bool)
        is_child[local_kids] = True
        for lv in topo_order(n, local_off, local_kids):
            v = v0 + lv
            ch = [v0 + int(c) for c in local_kids[local_off[lv]:local_off[lv + 1]]]
            vals = dict(values)
            for x in model.gathers:
                if x.kind == "vertex_input":
                    row = np.zeros((1, x.width), np.float32)
                    if model.input_kind == "tokens" and tokens[v] >= 0:
                        row = emb[tokens[v]][None, :]
                    elif model.input_kind == "features" and feats.shape[1]:
                        row = feats[v][None, :]
                    vals[x.name] = row
                elif x.kind == "child":
                    vals[x.name] = (states[x.state][ch[x.child]][None, :] if x.child < len(ch)
                                    else np.zeros((1, x.width), np.float32))
                elif x.kind == "child_sum":
                    vals[x.name] = (states[x.state][ch].sum(0, keepdims=True) if ch
                                    else np.zeros((1, x.width), np.float32))
                elif x.kind == "child_each":
                    vals[x.name] = states[x.state][ch].reshape(len(ch), x.width)
            for kind, item in steps:
                if kind == "op":
                    run_op(item, vals)
                elif item.kind == "to_edges":
                    vals[item.name] = np.repeat(vals[item.source], len(ch), axis=0)
                else:
                    vals[item.name] = vals[item.source].sum(0, keepdims=True)
            for i, (_, _, update) in enumerate(model.states):
                states[i][v] = vals[update][0]
        for r, ro in enumerate(model.readouts):
            if ro.at == "root":
                sel = [v0 + lv for lv in range(n) if not is_child[lv]]
            elif ro.at == "last":
                sel = [v1 - 1]
            else:
                sel = list(range(v0, v1))
            for v in sel:
                vals = dict(values)
                for x in model.gathers:
                    if x.kind == "state" and x.readout == r:
                        vals[x.name] = states[x.state][v][None, :]
                for i in ro_ops[r]:
                    run_op(i, vals)
                for k, name in enumerate(ro.outputs):
                    outs[r][k].append(vals[name])
    readouts = [[np.concatenate(rows, 0) if rows else
                 np.zeros((0, model.width(ro.outputs[k])), np.float32)
                 for k, rows in enumerate(per)] for per, ro in zip(outs, model.readouts)]
    return {"readouts": readouts, "states": states}

