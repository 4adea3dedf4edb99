"""The plain (NCHW) form of a graph that already holds blocked ops: the
inverse of the layout rewrite pass (`layout.py`), so that a model written in
NCHW[x]c (by the layout pass, or by a user) can be tuned and run with
layouts hwtune chooses itself.

Walks the graph in topological order tracking, for every tensor held in a
blocked layout, its plain copy:
- a layout_transform is dropped: its output is the plain copy of its input
  (re-blocked or not);
- a blocked conv2d, pool2d, global_pool2d or batch_norm runs in NCHW on the
  plain copies (a conv's 6-D weight [O/o, I/i, KH, KW, i, o] on its OIHW
  copy); its output is held blocked as before, its plain copy is what it
  now writes;
- element-wise ops and joins of equal shapes (add, mul, ...) and concat
  along N, C, H or W run on the plain copies when every 5-D operand's block
  is known, and their output keeps the block of their inputs;
- anything else that reads a blocked tensor (a flatten, a reshape) gets the
  blocked tensor itself, made from its plain copy by one layout_transform.
A blocked graph input or param read by a blocked op gets one transform to
NCHW / OIHW (on a param the engine folds it at prepare). Graph outputs keep
their names and blocked shapes. Op names never change, so per-op settings
keep applying; a plain graph is returned as it is.
"""

from typing import Dict, List, Optional

from hwtune.graph.model import Graph, Op
from hwtune.graph.naming import fresh_name
from hwtune.graph.passes.rewrite import ensure_validated, op_like, with_ops
from hwtune.graph.passes.layout_rules import (_layout_class, layout_name, plain_layout_of,
                                              weight_layout_name)

_BLOCKED_OPS = ("conv2d", "pool2d", "global_pool2d", "batch_norm")


def is_plain(graph: Graph) -> bool:
    return not any(op.op == "layout_transform" or (op.resolved or {}).get("layout") == "NCHWc"
                   for op in graph.ops)


class _Unblock:
    def __init__(self, graph: Graph):
        self.g = graph
        self.ops: List[Op] = []
        self.taken = set(graph.shapes) | {op.name for op in graph.ops}
        self.layout: Dict[str, str] = {}      # tensor held blocked -> its layout
        self.plain: Dict[str, str] = {}       # tensor held blocked -> its plain copy
        self.blocked: Dict[str, str] = {}     # tensor -> the name of its blocked form
        self.renamed: Dict[str, str] = {}     # a dropped transform's plain output -> source

    def name(self, t: str) -> str:
        return self.renamed.get(t, t)

    def emit(self, name, kind, inputs, outputs, attrs, like: Optional[Op] = None):
        self.ops.append(op_like(name, kind, inputs, outputs, attrs, like))

    def transform(self, src_name: str, src: str, dst: str, base: str) -> str:
        name = fresh_name(base, self.taken, ".")
        self.emit(name, "layout_transform", [src_name], [name], {"src": src, "dst": dst})
        return name

    def plain_of(self, t: str, layout: Optional[str]) -> str:
        """The plain copy of t, held (or, for a graph input or param, stored)
        in `layout`; t itself when it is plain."""
        if t in self.plain:
            return self.plain[t]
        if layout is None or t in self.renamed:
            return self.name(t)
        # A graph input or param in a blocked layout.
        self.layout[t] = layout
        self.blocked[t] = t
        self.plain[t] = self.transform(t, layout, plain_layout_of(layout),
                                       f"{t}@{plain_layout_of(layout).lower()}")
        return self.plain[t]

    def blocked_of(self, t: str) -> str:
        """t in the layout the original graph holds it in."""
        if t not in self.layout:
            return self.name(t)
        if t not in self.blocked:
            lay = self.layout[t]
            if t in self.g.outputs:  # its writer wrote the plain copy under another name
                self.emit(f"{t}@{lay.lower()}", "layout_transform", [self.plain[t]], [t],
                          {"src": plain_layout_of(lay), "dst": lay})
                self.blocked[t] = t
            else:
                self.blocked[t] = self.transform(self.plain[t], plain_layout_of(lay), lay,
                                                 f"{t}@{lay.lower()}")
        return self.blocked[t]

    def outputs(self, op: Op, layout: Optional[str]) -> List[str]:
        """Names the op writes its (plain) outputs to; records the layout
        the original graph holds them in."""
        outs = []
        for t in op.outputs:
            if layout is None or len(self.g.shapes[t]) < 5:
                outs.append(t)
                continue
            # A graph output keeps its name for its blocked form.
            s = fresh_name(f"{t}@nchw", self.taken, ".") if t in self.g.outputs else t
            self.layout[t], self.plain[t] = layout, s
            if s == t:
                self.blocked.pop(t, None)
            outs.append(s)
        return outs

    def blocked_op(self, op: Op):
        shapes = [self.g.shapes[t] for t in op.inputs]
        inputs = []
        for i, (t, s) in enumerate(zip(op.inputs, shapes)):
            if op.op == "conv2d" and i == 1 and len(s) == 6:  # (a depthwise one's is 4-D)
                inputs.append(self.plain_of(t, weight_layout_name(s[4], s[5])))
            elif len(s) == 5:
                inputs.append(self.plain_of(t, layout_name(s[4])))
            else:
                inputs.append(self.name(t))
        attrs = {k: v for k, v in op.attrs.items() if k != "layout"}
        out_layout = layout_name(self.g.shapes[op.outputs[0]][4])
        self.emit(op.name, op.op, inputs, self.outputs(op, out_layout), attrs, like=op)

    def keeps_layout(self, op: Op) -> Optional[str]:
        """The layout an element-wise op or join keeps, when it can run on
        the plain copies; None otherwise."""
        cls = _layout_class(op.op)
        layouts = {self.layout[t] for t in op.inputs if t in self.layout}
        if len(layouts) != 1:
            return None
        if any(len(self.g.shapes[t]) >= 5 and t not in self.layout for t in op.inputs):
            return None  # a 5-D operand of unknown block (a blocked bias, say)
        if cls == "elementwise" and len(op.inputs) == 1:
            return layouts.pop()
        shapes = {tuple(self.g.shapes[t]) for t in op.inputs}
        if cls == "join" and len(shapes) == 1:
            return layouts.pop()
        if cls == "join" and all(t in self.layout for t in op.inputs):
            # A per-channel scale [N, C/x, 1, 1, x] beside [N, C/x, H, W, x]
            # (layout_rules.op_layout): plain, [N, C, 1, 1] beside [N, C, H, W].
            full = max(shapes, key=lambda sh: sh[2] * sh[3] if len(sh) == 5 else 0)
            if len(full) == 5 and all(sh == full or sh == (full[0], full[1], 1, 1, full[4])
                                      for sh in shapes):
                return layouts.pop()
        if op.op == "concat" and all(t in self.layout for t in op.inputs):
            axis = op.resolved["axis"] % 5
            if axis < 4:
                return layouts.pop()
        return None

    def run(self) -> List[Op]:
        for i in self.g.order:
            op = self.g.ops[i]
            r = op.resolved or {}
            if op.op == "layout_transform":
                src, dst = r["src"], r["dst"]
                x = op.inputs[0]
                plain = self.plain_of(x, src if src != plain_layout_of(src) else None)
                y = op.outputs[0]
                if dst == plain_layout_of(dst):
                    self.alias(y, plain)
                else:
                    self.layout[y], self.plain[y] = dst, plain
                    self.blocked.pop(y, None)
                    if y in self.g.outputs:
                        self.blocked[y] = y
                        self.emit(op.name, "layout_transform", [plain], [y],
                                  {"src": plain_layout_of(dst), "dst": dst}, like=op)
                continue
            if op.op in _BLOCKED_OPS and r.get("layout") == "NCHWc":
                self.blocked_op(op)
                continue
            keep = self.keeps_layout(op)
            if keep is not None:
                inputs = [self.plain.get(t, self.name(t)) for t in op.inputs]
                attrs = dict(op.attrs)
                self.emit(op.name, op.op, inputs, self.outputs(op, keep), attrs, like=op)
                continue
            self.emit(op.name, op.op, [self.blocked_of(t) for t in op.inputs], op.outputs,
                      op.attrs, like=op)
        for t in self.g.outputs:
            if t in self.layout:
                self.blocked_of(t)
        return self.ops

    def alias(self, y: str, plain: str):
        """y is the plain tensor `plain` under another name: any other name
        is read as `plain` from now on; a graph output keeps its name, which
        the op that wrote `plain` takes (the layout pass's NCHW copy of a
        blocked output), or else a copy."""
        if y not in self.g.outputs:
            self.renamed[y] = plain
            return
        writer = next((o for o in self.ops if plain in o.outputs), None)
        if writer is None or plain in self.g.outputs:
            self.emit(fresh_name(f"{y}@copy", self.taken, "."), "reshape", [plain], [y],
                      {"shape": list(self.g.shapes[y])})
            return
        for o in self.ops:
            o.inputs = [y if t == plain else t for t in o.inputs]
            o.outputs = [y if t == plain else t for t in o.outputs]
        for m in (self.plain, self.renamed, self.blocked):
            for k, v in m.items():
                if v == plain:
                    m[k] = y


def to_plain(graph: Graph) -> Graph:
    """`graph` if it holds no blocked op or layout_transform, else a new
    validated Graph computing the same outputs in NCHW (module doc)."""
    graph = ensure_validated(graph)
    if is_plain(graph):
        return graph
    new = with_ops(graph, _Unblock(graph).run())
    from hwtune.graph.validate import validate_graph
    validate_graph(new)
    return new
