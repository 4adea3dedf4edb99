"""A tiny graph builder the generators share: append tensors and ops in
order, get an ordinary (expanded) Graph."""

from hwtune.graph.model import Graph, Op, Tensor


class Builder:
    def __init__(self, name: str, description: str = "", seed: int = 0):
        from hwtune.graph.limits import Limits
        self.graph = Graph(name=name, description=description, seed=seed,
                           inputs=[], params=[], ops=[], outputs=[])
        # The limit a template's expansion has: `model generate lstm --seq
        # 100000000` stops at it instead of building for minutes.
        self._left = Limits.from_env().max_expanded_items

    def _count(self, n: int = 1) -> None:
        self._left -= n
        if self._left < 0:
            from hwtune.graph.errors import fail
            from hwtune.graph.limits import Limits, how_to_raise
            fail("model", f"the graph would have more than "
                          f"{Limits.from_env().max_expanded_items} items "
                          f"({how_to_raise('max_expanded_items')})")

    def _tensor(self, kind, name, shape, init):
        """Append a tensor to the graph's `kind` list (inputs, params)."""
        self._count()
        tensors = getattr(self.graph, kind)
        tensors.append(Tensor(name, tuple(shape), init=dict(init),
                              loc=f"{kind}[{len(tensors)}]"))
        return name

    def input(self, name, shape, **init):
        return self._tensor("inputs", name, shape, init)

    def param(self, name, shape, **init):
        return self._tensor("params", name, shape, init)

    def op(self, name, op, inputs, outputs=None, **attrs):
        self._count()
        g = self.graph
        g.ops.append(Op(name, op, list(inputs), list(outputs or [name]), attrs,
                        loc=f"ops[{len(g.ops)}]"))
        return name if outputs is None else list(outputs)

    def output(self, *names):
        self._count(len(names))
        self.graph.outputs.extend(names)

    def build(self, validate=True, limits=None) -> Graph:
        if validate:
            from hwtune.graph.validate import validate_graph
            validate_graph(self.graph, limits)
        return self.graph
