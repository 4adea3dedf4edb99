"""Seeded input-graph generators for the bundled dynamic models (no
downloads): a model's "samples" spec names one and its parameters, and
`hwtune model samples` writes its JSON Lines.

  sst-tree       binary parse trees like the Stanford Sentiment Treebank's:
                 `leaves` uniform in [lo, hi], each split point uniform, a
                 token on every leaf (internal vertices have none)
  sentence       chains of `length` uniform in [lo, hi] tokens
  complete-tree  complete binary trees of `leaves` (a power of two) leaves
  random-dag     DAGs of `vertices` vertices, each with up to `arity`
                 children among the vertices before it (tests)

Vertices are written children first (post-order), so a tree's root is its
last vertex.
"""

from __future__ import annotations

import json
from typing import Dict, Iterator, List

import numpy as np

from hwtune.errors import UsageError

GENERATORS = ("sst-tree", "sentence", "complete-tree", "random-dag")


def _range(spec, key, default) -> tuple:
    value = spec.get(key, default)
    if isinstance(value, int):
        value = [value, value]
    if (not isinstance(value, list) or len(value) != 2 or
            not all(isinstance(v, int) and v >= 1 for v in value) or value[0] > value[1]):
        raise UsageError(f'samples.{key} must be an integer >= 1 or [low, high], got {value!r}')
    return value[0], value[1]


def _tree(rng, n_leaves: int, vocab: int) -> Dict[str, list]:
    tokens: List = []
    children: List[list] = []

    def build(n):  # iterative enough: SST trees are a few hundred vertices
        if n == 1:
            tokens.append(int(rng.integers(vocab)))
            children.append([])
            return len(tokens) - 1
        k = int(rng.integers(1, n))
        left = build(k)
        right = build(n - k)
        tokens.append(None)
        children.append([left, right])
        return len(tokens) - 1

    build(n_leaves)
    return {"tokens": tokens, "children": children}


def _complete(rng, n_leaves: int, vocab: int) -> Dict[str, list]:
    tokens = [int(t) for t in rng.integers(vocab, size=n_leaves)]
    children: List[list] = [[] for _ in range(n_leaves)]
    level = list(range(n_leaves))
    while len(level) > 1:
        nxt = []
        for a, b in zip(level[::2], level[1::2]):
            tokens.append(None)
            children.append([a, b])
            nxt.append(len(tokens) - 1)
        level = nxt
    return {"tokens": tokens, "children": children}


def samples(spec: Dict, count: int, seed: int, vocab: int) -> Iterator[Dict[str, object]]:
    """count samples of the generator spec names, from one seeded stream."""
    kind = spec.get("generator")
    if kind not in GENERATORS:
        raise UsageError(f"unknown sample generator {kind!r}: one of {', '.join(GENERATORS)}")
    if count < 1:
        raise UsageError(f"--count must be >= 1, got {count}")
    if vocab < 1:
        raise UsageError("the model's vertices take no tokens: its samples cannot be generated")
    rng = np.random.default_rng(seed)
    for i in range(count):
        if kind == "sst-tree":
            lo, hi = _range(spec, "leaves", [10, 52])
            out = _tree(rng, int(rng.integers(lo, hi + 1)), vocab)
        elif kind == "complete-tree":
            lo, _ = _range(spec, "leaves", 256)
            if lo & (lo - 1):
                raise UsageError(f"samples.leaves of a complete tree must be a power of two, "
                                 f"got {lo}")
            out = _complete(rng, lo, vocab)
        elif kind == "sentence":
            lo, hi = _range(spec, "length", [5, 60])
            n = int(rng.integers(lo, hi + 1))
            out = {"tokens": [int(t) for t in rng.integers(vocab, size=n)], "chain": True}
        else:
            lo, hi = _range(spec, "vertices", [1, 60])
            a_lo, a_hi = _range(spec, "arity", [1, 4])
            n = int(rng.integers(lo, hi + 1))
            arity = int(rng.integers(a_lo, a_hi + 1))
            kids = [sorted(set(int(c) for c in rng.integers(v, size=int(rng.integers(
                0, min(arity, v) + 1))))) if v else [] for v in range(n)]
            out = {"tokens": [int(t) for t in rng.integers(vocab, size=n)], "children": kids}
        out["id"] = i
        yield out


def write_jsonl(path: str, items) -> int:
    n = 0
    with open(path, "w") as fh:
        for item in items:
            fh.write(json.dumps(item, separators=(",", ":")) + "\n")
            n += 1
    return n
