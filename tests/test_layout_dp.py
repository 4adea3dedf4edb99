"""The global layout search (NeoCPU Algorithm 2): the DP's cost equals the
brute-force minimum on small random graphs (chains, shortcuts, forks,
concats), its estimate equals the cost of the graph the pass builds from its
choice, and measured transform costs are stored and reused."""

import itertools
import math

import numpy as np
import pytest

from hwtune import machine
from hwtune.db import ResultsDB
from hwtune.errors import UsageError
from hwtune.graph import load_model
from hwtune.graph.passes.layout import apply_op_params, inserted_transforms
from hwtune.graph.passes.layout_rules import conv_blocks
from hwtune.tuners import layout_dp
from hwtune.tuners.layout_dp import choose_layouts, measured_transform_cost, plan_cost

CHANNELS = (8, 16, 24)


def random_graph(rng, n_convs, shape=(1, 16, 4, 4)):
    """A random CNN-like DAG with n_convs 1x1/3x3 convs, relu, batch_norm,
    pooling, add/sum joins of equal channels and channel concats."""
    ops, params = [], []
    avail = [("x", shape[1])]
    k = 0
    while k < n_convs:
        kind = str(rng.choice(["conv", "conv", "conv", "relu", "bn", "pool", "add", "sum",
                               "concat"]))
        recent = avail[-4:]
        src, c = recent[int(rng.integers(len(recent)))]
        name = f"n{len(ops)}"
        if kind == "conv":
            oc, ksz = int(rng.choice(CHANNELS)), int(rng.choice([1, 3]))
            params.append({"name": f"{name}.w", "shape": [oc, c, ksz, ksz]})
            ops.append({"name": name, "op": "conv2d", "inputs": [src, f"{name}.w"],
                        "attrs": {"padding": ksz // 2}})
            avail.append((name, oc))
            k += 1
        elif kind == "relu":
            ops.append({"name": name, "op": "relu", "inputs": [src]})
            avail.append((name, c))
        elif kind == "bn":
            for p in ("g", "b", "m", "v"):
                params.append({"name": f"{name}.{p}", "shape": [c], "low": 0.5, "high": 1.5})
            ops.append({"name": name, "op": "batch_norm",
                        "inputs": [src] + [f"{name}.{p}" for p in ("g", "b", "m", "v")]})
            avail.append((name, c))
        elif kind == "pool":
            ops.append({"name": name, "op": "pool2d", "inputs": [src],
                        "attrs": {"mode": "max", "kernel": 3, "stride": 1, "padding": 1}})
            avail.append((name, c))
        elif kind in ("add", "sum"):
            same = [t for t, cc in avail if cc == c and t != src]
            if not same:
                continue
            n_in = 2 if kind == "add" else 3
            others = [same[int(rng.integers(len(same)))] for _ in range(n_in - 1)]
            ops.append({"name": name, "op": kind, "inputs": [src] + others})
            avail.append((name, c))
        else:
            other, oc = avail[int(rng.integers(len(avail)))]
            if other == src:
                continue
            ops.append({"name": name, "op": "concat", "inputs": [src, other],
                        "attrs": {"axis": 1}})
            avail.append((name, c + oc))
    outputs = [avail[-1][0]]
    if rng.random() < 0.5 and avail[-2][0] != "x":
        outputs.append(avail[-2][0])
    return load_model({"name": "rand", "inputs": [{"name": "x", "shape": list(shape)}],
                       "params": params, "ops": ops, "outputs": outputs})


def random_candidates(rng, g, per_conv=3):
    """per_conv distinct (ic block, oc block) choices per conv (NCHW among
    them), each with a random time."""
    cands = {}
    for op in g.ops:
        if op.op != "conv2d":
            continue
        oc, ic = g.shapes[op.inputs[1]][:2]
        pairs = [(0, 0)] + [(a, b) for a in (4, 8, 16) for b in (4, 8, 16)
                            if ic % a == 0 and oc % b == 0]
        pick = rng.choice(len(pairs), size=min(per_conv, len(pairs)), replace=False)
        cands[op.name] = [({"layout": "NCHW"} if pairs[i] == (0, 0) else
                           {"ic_bn": pairs[i][0], "oc_bn": pairs[i][1]},
                           float(rng.uniform(1.0, 3.0)) * 1e-4) for i in pick]
    return cands


class RandomCosts:
    """A fixed random cost per (shape, src, dst), comparable to conv times
    so that the trade-off matters; counts calls."""

    def __init__(self, rng, scale=1e-4):
        self.rng, self.scale, self.table = rng, scale, {}

    def __call__(self, shape, src, dst):
        key = (tuple(shape), src, dst)
        if key not in self.table:
            self.table[key] = float(self.rng.uniform(0.1, 2.0)) * self.scale
        return self.table[key]


class RandomOpCosts:
    """A fixed random time per (layout-tolerant op, block), comparable to
    conv times; records what it was asked."""

    def __init__(self, rng, scale=1e-4):
        self.rng, self.scale, self.table = rng, scale, {}

    def __call__(self, op, shapes, block):
        assert len(shapes) == len(op.inputs) and all(len(s) == 4 for s in shapes[:1])
        key = (op.name, block)
        if key not in self.table:
            self.table[key] = float(self.rng.uniform(0.1, 2.0)) * self.scale
        return self.table[key]


def brute_force(g, cands, tc, op_cost=None):
    """Minimum over every combination, each costed on the graph the pass
    builds (independent of the DP's own bookkeeping)."""
    names = sorted(cands)
    best = math.inf
    for combo in itertools.product(*(range(len(cands[n])) for n in names)):
        params = {n: cands[n][i][0] for n, i in zip(names, combo)}
        secs = {n: cands[n][i][1] for n, i in zip(names, combo)}
        best = min(best, plan_cost(g, params, secs, tc, op_cost=op_cost))
    return best


def _chosen_seconds(cands, plan):
    """The time of each chosen candidate, looked up in the candidate lists."""
    return {name: min(s for q, s in cands[name] if conv_blocks(q) == conv_blocks(p))
            for name, p in plan.op_params.items()}


@pytest.mark.parametrize("seed", range(10))
def test_dp_prices_pools_and_norms_per_block_on_fused_graphs(seed):
    """With layout-tolerant ops priced per block, on the graph the engine
    runs (batch norms folded, residual adds and ReLUs in the CONVs): still
    the brute-force optimum, and still the cost of what the pass builds
    (which reads each fused residual in its CONV's output block)."""
    from hwtune.graph.passes.fuse import fuse_conv
    rng = np.random.default_rng(100 + seed)
    g = fuse_conv(random_graph(rng, n_convs=4 + seed % 3))
    cands = random_candidates(rng, g)
    tc, oc = RandomCosts(rng), RandomOpCosts(rng)
    plan = choose_layouts(g, cands, tc, op_cost=oc)
    assert plan.est_seconds == pytest.approx(brute_force(g, cands, tc, oc), rel=1e-12)
    assert plan_cost(g, plan.op_params, _chosen_seconds(cands, plan), tc, op_cost=oc) == \
        pytest.approx(plan.est_seconds, rel=1e-12)
    assert plan.est_seconds == pytest.approx(
        plan.conv_seconds + plan.transform_seconds + plan.op_seconds, rel=1e-12)


def test_a_pool_dear_in_blocks_keeps_its_producer_in_nchw():
    """conv -> max pool -> conv: the blocked first CONV is a little faster,
    but the pool after it costs far more blocked than in NCHW, so the DP
    takes the NCHW candidate; with the pool's prices swapped it blocks."""
    g = load_model({
        "name": "pool-chain", "inputs": [{"name": "x", "shape": [1, 16, 8, 8]}],
        "params": [{"name": "w1", "shape": [16, 16, 3, 3]}, {"name": "w2", "shape": [16, 16, 1, 1]}],
        "ops": [{"name": "c1", "op": "conv2d", "inputs": ["x", "w1"], "attrs": {"padding": 1}},
                {"name": "p", "op": "pool2d", "inputs": ["c1"],
                 "attrs": {"mode": "max", "kernel": 3, "stride": 1, "padding": 1}},
                {"name": "c2", "op": "conv2d", "inputs": ["p", "w2"]}],
        "outputs": ["c2"]})
    cands = {"c1": [({"layout": "NCHW"}, 1.1e-4), ({"ic_bn": 16, "oc_bn": 16}, 1.0e-4)],
             "c2": [({"layout": "NCHW"}, 1.0e-4)]}
    free = lambda shape, a, b: 1e-6  # noqa: E731
    dear_blocked = lambda op, shapes, b: 5e-4 if b else 1e-5  # noqa: E731
    plan = choose_layouts(g, cands, free, op_cost=dear_blocked)
    assert conv_blocks(plan.op_params["c1"]) == (0, 0)
    assert plan.op_seconds == pytest.approx(1e-5)
    cheap_blocked = lambda op, shapes, b: 1e-5 if b else 5e-4  # noqa: E731
    plan = choose_layouts(g, cands, free, op_cost=cheap_blocked)
    assert conv_blocks(plan.op_params["c1"]) == (16, 16)
    assert plan.op_seconds == pytest.approx(1e-5)


@pytest.mark.parametrize("seed", range(14))
def test_dp_equals_brute_force_on_small_random_graphs(seed):
    rng = np.random.default_rng(seed)
    g = random_graph(rng, n_convs=4 + seed % 3)  # 4-6 convs x 3 candidates
    cands = random_candidates(rng, g)
    tc = RandomCosts(rng)
    plan = choose_layouts(g, cands, tc)
    assert plan.exact
    assert plan.est_seconds == pytest.approx(brute_force(g, cands, tc), rel=1e-12)
    # The estimate is the cost of what the pass builds from the choice.
    assert plan_cost(g, plan.op_params, _chosen_seconds(cands, plan), tc) == \
        pytest.approx(plan.est_seconds, rel=1e-12)
    assert plan.transform_seconds == pytest.approx(
        sum(tc(s, a, b) for _, s, a, b in plan.transforms), rel=1e-9, abs=1e-15)


def _chain_graph(n=5, c=16):
    ops, params, src = [], [], "x"
    for i in range(n):
        params.append({"name": f"w{i}", "shape": [c, c, 3, 3]})
        ops += [{"name": f"c{i}", "op": "conv2d", "inputs": [src, f"w{i}"],
                 "attrs": {"padding": 1}},
                {"name": f"r{i}", "op": "relu", "inputs": [f"c{i}"]}]
        src = f"r{i}"
    return load_model({"name": "chain", "inputs": [{"name": "x", "shape": [1, c, 8, 8]}],
                       "params": params, "ops": ops, "outputs": [src]})


def test_chain_tradeoff_follows_transform_price():
    """Each conv's locally best scheme alternates blocks; cheap transforms
    take the local optima, dear ones keep one block all along."""
    g = _chain_graph()
    cands = {}
    for i in range(5):
        fast, slow = (8, 16) if i % 2 else (16, 8)
        cands[f"c{i}"] = [({"ic_bn": fast, "oc_bn": fast}, 1.0e-4),
                          ({"ic_bn": slow, "oc_bn": slow}, 1.2e-4)]
    cheap = choose_layouts(g, cands, lambda s, a, b: 1e-7)
    assert [cheap.op_params[f"c{i}"]["ic_bn"] for i in range(5)] == [16, 8, 16, 8, 16]
    dear = choose_layouts(g, cands, lambda s, a, b: 1e-3)
    blocks = {dear.op_params[f"c{i}"]["ic_bn"] for i in range(5)}
    assert len(blocks) == 1
    # Only the way in and the way out remain.
    assert len(dear.transforms) == 2
    assert dear.est_seconds < 5 * 1.2e-4 + 3 * 1e-3


def test_beam_cut_is_reported_and_still_consistent():
    rng = np.random.default_rng(99)
    g = random_graph(rng, n_convs=6)
    cands = random_candidates(rng, g)
    tc = RandomCosts(rng)
    full = choose_layouts(g, cands, tc)
    cut = choose_layouts(g, cands, tc, max_states=1)
    assert not cut.exact and full.exact
    assert cut.est_seconds >= full.est_seconds - 1e-15
    assert plan_cost(g, cut.op_params, _chosen_seconds(cands, cut), tc) == \
        pytest.approx(cut.est_seconds, rel=1e-12)


@pytest.mark.parametrize("model, overrides", [
    ("resnet18", {"image": 32, "classes": 10}),
    ("inception_small", {"image": 32, "batch": 1, "classes": 10}),
    ("pathnet_small", {"batch": 2}),
])
def test_bundled_models_plan_is_exact_and_consistent(model, overrides):
    g = load_model(f"configs/models/{model}.json", overrides)
    rng = np.random.default_rng(7)
    cands = random_candidates(rng, g, per_conv=4)
    tc = RandomCosts(rng)
    plan = choose_layouts(g, cands, tc)
    assert plan.exact
    assert plan_cost(g, plan.op_params, _chosen_seconds(cands, plan), tc) == \
        pytest.approx(plan.est_seconds, rel=1e-9)
    assert len(inserted_transforms(apply_op_params(g, plan.op_params))) == len(plan.transforms)


@pytest.mark.parametrize("cands, words", [
    ({"c9": [({"ic_bn": 16, "oc_bn": 16}, 1e-4)]}, 'no op named "c9"'),
    ({"c0": []}, "no candidates"),
    ({"c0": [({"ic_bn": 16, "oc_bn": 16}, -1.0)]}, "seconds must be"),
    ({"c0": [({"ic_bn": 16, "oc_bn": 16}, float("nan"))]}, "seconds must be"),
    ({"c0": [({"ic_bn": 3, "oc_bn": 16}, 1e-4)]}, "ic_bn=3 is not legal"),
    ({"c0": [{"ic_bn": 16}]}, "(params, seconds) pair"),
])
def test_bad_candidates_are_usage_errors(cands, words):
    with pytest.raises(UsageError) as exc:
        choose_layouts(_chain_graph(), cands, lambda s, a, b: 0.0)
    assert words in str(exc.value)


@pytest.fixture
def db(tmp_path):
    d = ResultsDB.open(tmp_path / "results.db")
    host = d.upsert_host(machine.fingerprint())
    run = d.start_run(host, "tune", {"test": "layout"})
    yield d, host, run
    d.close()


def test_measured_costs_are_real_stored_and_reused(db, monkeypatch):
    d, host, run = db
    cost = measured_transform_cost(d, run, host, threads=1, isa=_isa(), reps=7)
    small, big = (1, 32, 7, 7), (1, 32, 56, 56)
    assert cost(big, 16, 16) == 0.0
    t_small, t_big = cost(small, 0, 16), cost(big, 0, 16)
    assert 0 < t_small < t_big  # 64x the data
    rows = d.trials(host, tuner=layout_dp.TUNER)
    assert len(rows) == 2 and {r["status"] for r in rows} == {"ok"}
    assert {r["subject"] for r in rows} == {"1x32x7x7:NCHW->NCHW16c",
                                            "1x32x56x56:NCHW->NCHW16c"}
    assert all(r["n"] == 7 for r in rows)

    def no_measuring(*a, **k):
        raise AssertionError("a stored transform was measured again")

    monkeypatch.setattr(layout_dp, "time_transform", no_measuring)
    again = measured_transform_cost(d, None, host, threads=1, isa=_isa())
    assert again(big, 0, 16) == pytest.approx(t_big)
    assert len(d.trials(host, tuner=layout_dp.TUNER)) == 2


def test_measured_costs_drive_a_plan(db):
    d, host, run = db
    g = _chain_graph(n=3)
    cands = {f"c{i}": [({"ic_bn": 16, "oc_bn": 16}, 1e-4), ({"ic_bn": 8, "oc_bn": 8}, 1e-4)]
             for i in range(3)}
    tc = measured_transform_cost(d, run, host, threads=2, isa=_isa(), reps=5)
    plan = choose_layouts(g, cands, tc)
    # Equal conv times: any transform between convs is pure loss.
    assert len(plan.transforms) == 2 and plan.est_seconds > 3e-4
    assert {r["threads"] for r in d.trials(host, tuner=layout_dp.TUNER)} == {2}


def _isa():
    from hwtune.native.isa import selected_isa
    return selected_isa()


def test_measured_op_costs_are_real_stored_and_reused(db, monkeypatch):
    """A pool and a batch norm timed per block on the engine, stored as
    layout-op trials, and read back without measuring."""
    d, host, run = db
    g = load_model({
        "name": "tolerant", "inputs": [{"name": "x", "shape": [1, 32, 14, 14]}],
        "params": [{"name": n, "shape": [32], "low": 0.5, "high": 1.5}
                   for n in ("g", "b", "m", "v")],
        "ops": [{"name": "p", "op": "pool2d", "inputs": ["x"],
                 "attrs": {"mode": "avg", "kernel": 2, "stride": 2}},
                {"name": "n", "op": "batch_norm", "inputs": ["p", "g", "b", "m", "v"]}],
        "outputs": ["n"]})
    cost = layout_dp.measured_op_cost(d, run, host, threads=1, isa=_isa(), reps=5)
    ops = {op.name: op for op in g.ops}
    shapes = {name: [tuple(g.shapes[t]) for t in op.inputs] for name, op in ops.items()}
    got = {(name, b): cost(ops[name], shapes[name], b) for name in ops for b in (0, 16)}
    assert all(0 < v < 0.1 for v in got.values())
    rows = d.trials(host, tuner=layout_dp.OP_TUNER)
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
    assert any(r["subject"].startswith("pool2d|1x32x14x14|") and r["subject"].endswith(
        ":NCHW16c") for r in rows)

    def no_measuring(*a, **k):
        raise AssertionError("a stored op time was measured again")

    monkeypatch.setattr(layout_dp, "time_op", no_measuring)
    again = layout_dp.measured_op_cost(d, None, host, threads=1, isa=_isa())
    assert again(ops["p"], shapes["p"], 16) == pytest.approx(got[("p", 16)])
    assert len(d.trials(host, tuner=layout_dp.OP_TUNER)) == 4
    # The plan prices them: NCHW everywhere (no CONVs), so both at block 0.
    plan = choose_layouts(g, {}, lambda s, a, b: 0.0, op_cost=again)
    assert plan.op_seconds == pytest.approx(got[("p", 0)] + got[("n", 0)])
