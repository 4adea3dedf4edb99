"""The measurement layer: sampling policy, the one interleaved sampling loop
(rotation, warm-up, check, limit, deadline, failures as data, raw samples
kept), re-measuring noisy figures, the engine comparison against the first
engine's outputs, and one op on the engine's pool through the op bench."""

import numpy as np
import pytest

from hwtune.errors import NativeError, UsageError
from hwtune.measure import (ERROR, OK, TIMEOUT, WRONG_ANSWER, FixedSampling, clock,
                            interleave)
from hwtune.measure.engine import FIRST, measure_engines
from hwtune.measure.noise import least_noisy
from hwtune.measure.policy import split
from hwtune.measure.sides import Side


class Fake(Side):
    """A side with scripted samples; logs every take into a shared list."""

    def __init__(self, label, log, value=1.0, fail_at=None, warm_s=0.001, out=None):
        self.label, self.log, self.value = label, log, value
        self.fail_at, self.warm_s, self.out = fail_at, warm_s, out
        self.taken = 0

    def warm(self, n):
        return self.warm_s if n else None

    def take(self, k):
        self.log.append(self.label)
        if self.fail_at is not None and self.taken >= self.fail_at:
            raise NativeError(f"{self.label} broke")
        self.taken += k
        return [self.value] * k

    def outputs(self):
        return self.out


# -- policy -------------------------------------------------------------------

@pytest.mark.parametrize("reps, rounds", [(1, None), (7, None), (9, 3), (10, 3), (21, 7),
                                          (5, 9)])
def test_fixed_sampling_takes_split_chunks(reps, rounds):
    p = FixedSampling(reps, rounds=rounds)
    p.start(2, None)
    got, samples = [], [[], []]
    while True:
        k = p.next_chunk(samples)
        if not k:
            break
        got.append(k)
        for s in samples:
            s.extend([1.0] * k)
    assert got == split(reps, rounds or reps) and sum(got) == reps


def test_budget_cuts_samples_but_not_below_the_minimum():
    p = FixedSampling(15, budget_s=120.0, min_reps=5)
    p.start(3, 20.0)
    assert p.planned == 6
    p.start(3, 100.0)
    assert p.planned == 5
    p.start(3, 0.01)
    assert p.planned == 15
    with pytest.raises(ValueError):
        FixedSampling(0)


def test_short_samples_are_extended_up_to_max_reps():
    p = FixedSampling(3, min_total_s=0.01, max_reps=6)
    s = [[]]
    while (k := p.next_chunk(s)):
        s[0].extend([0.001] * k)
    assert len(s[0]) == 6
    p, s = FixedSampling(3, min_total_s=0.01, max_reps=6), [[]]
    while (k := p.next_chunk(s)):
        s[0].extend([0.02] * k)
    assert len(s[0]) == 3


# -- the sampling loop ----------------------------------------------------------

def test_rounds_rotate_so_no_side_always_follows_the_same_one():
    log = []
    sides = [Fake(c, log) for c in "abc"]
    got = interleave(sides, FixedSampling(3))
    assert log == list("abc" "bca" "cab")
    assert all(m.status == OK and m.samples == [1.0] * 3 for m in got)


def test_failures_are_results_and_the_others_go_on():
    log = []
    sides = [Fake("ok", log), Fake("broken", log, fail_at=2),
             Fake("wrong", log, out={"y": 1}), Fake("slow", log, warm_s=5.0)]
    got = interleave(sides, FixedSampling(4), warmup=1, limit_s=1.0,
                     check=lambda s: "y differs" if s.out else None)
    ok, broken, wrong, slow = got
    assert ok.status == OK and len(ok.samples) == 4
    assert broken.status == ERROR and "broken broke" in broken.note
    assert broken.samples == [1.0, 1.0]  # raw samples are kept whatever the status
    assert wrong.status == WRONG_ANSWER and wrong.note == "y differs"
    assert slow.status == TIMEOUT and "limit" in slow.note
    assert "wrong" not in log and "slow" not in log  # never timed
    with pytest.raises(NativeError):
        interleave([Fake("b", [], fail_at=0)], FixedSampling(2), raise_errors=True)


def test_deadline_stops_after_a_round_and_says_so(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(clock, "monotonic", lambda: now[0])
    log = []

    class Ticking(Fake):
        def take(self, k):
            now[0] += 1.0
            return super().take(k)

    got = interleave([Ticking("a", log), Ticking("b", log)], FixedSampling(10),
                     deadline=101.5)
    assert [len(m.samples) for m in got] == [1, 1]
    assert all(m.status == OK and "1 of 10 samples (deadline)" in m.note for m in got)
    # A deadline already passed still gives every side one round.
    got = interleave([Fake("c", log)], FixedSampling(5), deadline=0.0)
    assert len(got[0].samples) == 1


def test_a_round_that_would_end_past_the_deadline_is_not_started(monkeypatch):
    """A round as long as the last one is not begun when it would end past
    the deadline (the budget's final comparison overran a 60 s budget by
    a whole round of fresh-engine chunks), once the policy's minimum is in."""
    now = [0.0]
    monkeypatch.setattr(clock, "monotonic", lambda: now[0])

    class Ticking(Fake):
        def take(self, k):
            now[0] += 1.0 * k
            return super().take(k)

    got = interleave([Ticking("a", [])], FixedSampling(20, rounds=20), deadline=5.5)
    # rounds end at 1, 2, ..., 5; a sixth would end at 6 > 5.5
    assert len(got[0].samples) == 5 and now[0] <= 5.5
    assert "5 of 20 samples (deadline)" in got[0].note
    # ...but never below the policy's minimum: 4 rounds of 1 s with 2.5 s left
    now[0] = 0.0
    got = interleave([Ticking("b", [])], FixedSampling(20, rounds=20, min_reps=4),
                     deadline=2.5)
    assert len(got[0].samples) == 3  # the passed deadline still stops it (at 3.0)
    now[0] = 0.0
    got = interleave([Ticking("c", [])], FixedSampling(20, rounds=20, min_reps=3),
                     deadline=2.5)
    assert len(got[0].samples) == 3  # the third round runs although it ends at 3.0


def test_settle_runs_before_every_chunk_when_asked():
    calls, log = [], []
    interleave([Fake("a", log), Fake("b", log)], FixedSampling(2),
               settle=lambda: calls.append(1), settle_each=True)
    assert len(calls) == 1 + 4
    calls.clear()
    interleave([Fake("a", log)], FixedSampling(2), settle=lambda: calls.append(1))
    assert len(calls) == 1


def test_each_chunk_is_reported_with_its_side_after_it_was_taken():
    """on_chunk(i, n) follows every chunk, in the order they ran, so a
    caller can tie each sample to what it probed before the chunk."""
    log, chunks = [], []
    got = interleave([Fake("a", log), Fake("b", log, fail_at=1), Fake("c", log)],
                     FixedSampling(6, rounds=3),
                     on_chunk=lambda i, n: chunks.append(("abc"[i], n)))
    assert [c for c, _ in chunks if c != "b"] == [x for x in log if x != "b"]
    assert [c for c, _ in chunks].count("b") == 1  # its failed chunk is not reported
    for side, m in zip("abc", got):
        assert sum(n for c, n in chunks if c == side) == len(m.samples)


def test_least_noisy_keeps_the_quietest_attempt():
    attempts = iter([[1.0, 2.0, 3.0], [1.0, 1.1, 1.2], [1.0, 1.5, 2.0]])
    best, n = least_noisy(lambda: next(attempts), lambda xs: (max(xs) - min(xs)) / xs[1],
                          threshold=0.01, retries=2)
    assert best == [1.0, 1.1, 1.2] and n == 3
    best, n = least_noisy(lambda: [1.0, 1.0], lambda xs: 0.0, threshold=0.01, retries=5)
    assert n == 1


# -- engines ----------------------------------------------------------------------

class FakeEngine:
    def __init__(self, y, fail_open=False):
        if fail_open:
            raise UsageError("config refused")
        self.y, self.runs, self.closed = np.asarray(y, np.float32), 0, False

    def run(self):
        self.runs += 1

    def outputs(self):
        return {"y": self.y}

    def close(self):
        self.closed = True


def test_engines_are_checked_against_the_first_and_always_closed():
    made = []

    def opener(y, fail=False):
        def make():
            e = FakeEngine(y, fail)
            made.append(e)
            return e
        return make

    got = measure_engines([opener([1.0, 2.0]), opener([1.0, 2.0]), opener([1.0, 9.0]),
                           opener([0.0], fail=True)], FixedSampling(3), warmup=2,
                          reference=FIRST, outputs=["y"])
    assert [m.status for m in got] == [OK, OK, WRONG_ANSWER, ERROR]
    assert "output 'y'" in got[2].note and "config refused" in got[3].note
    assert all(e.closed for e in made) and len(made) == 3
    assert [e.runs for e in made] == [2 + 3, 2 + 3, 2]


# -- one op on the engine's pool --------------------------------------------------

def _conv_op(x, w, b, params, pool, threads):
    """A blocked conv of a one-op graph through the layout pass, on the pool."""
    from hwtune.engine.lower import lower_graph
    from hwtune.graph.generators.builder import Builder
    from hwtune.graph.passes.layout import apply_op_params
    from hwtune.native import conv
    from hwtune.native.op_bench import OpBench

    bld = Builder("t")
    ins = [bld.input("x", x.shape), bld.param("w", w.shape), bld.param("b", b.shape)]
    bld.output(bld.op("conv", "conv2d", ins, padding=[1, 1]))
    g = apply_op_params(bld.build(), {"conv": params})
    i = next(k for k, o in enumerate(g.ops) if o.name == "conv")
    y = np.full(tuple(g.shapes[g.ops[i].outputs[0]]), np.nan, np.float32)
    inputs = [conv.to_nchwc(x, params["ic_bn"]),
              conv.to_blocked_weights(w, params["ic_bn"], params["oc_bn"]), b]
    return OpBench(pool, threads, lower_graph(g), i, inputs, [y]), y


def test_op_bench_runs_the_engines_conv_on_a_kept_pool():
    from hwtune.native import conv
    from hwtune.native.isa import selected_isa
    from hwtune.native.threads import Pool, allowed_cpus

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, 16, 8, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (16, 16, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 16).astype(np.float32)
    want = conv.conv2d_ref(x, w, b, pad=1)
    threads = min(2, len(allowed_cpus()))
    knobs = conv.knobs(x.shape, w.shape, pad=1, isa=selected_isa())
    with Pool(executors=1, threads=threads, pin=False) as pool:
        for ib, ob in ((knobs["ic_bn"][0], knobs["oc_bn"][-1]),
                       (knobs["ic_bn"][-1], knobs["oc_bn"][0])):
            params = dict(conv.default_params(x.shape, w.shape, pad=1), ic_bn=ib, oc_bn=ob)
            op, y = _conv_op(x, w, b, params, pool, threads)
            with op:
                s = op.run(1, 3, 2)
            assert len(s) == 3 and (s > 0).all()
            np.testing.assert_allclose(conv.from_nchwc(y), want, atol=1e-4)
        params = dict(conv.default_params(x.shape, w.shape, pad=1))
        with pytest.raises(UsageError, match="thread count"):
            _conv_op(x, w, b, params, pool, threads + 1)


def test_an_owner_closed_first_closes_what_uses_it():
    """A pool or C graph destroyed before an op bench that uses it (the order
    a garbage cycle after Ctrl-C may finalise them in) closes the bench
    first, so no destroy reads freed memory; the same for an engine's graph."""
    from hwtune.engine.lower import lower_graph
    from hwtune.graph.generators.builder import Builder
    from hwtune.native import conv
    from hwtune.engine.instance import NativeEngine
    from hwtune.native.plan import Plan
    from hwtune.native.threads import Pool

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, 8, 6, 6)).astype(np.float32)
    w = rng.uniform(-1, 1, (8, 8, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 8).astype(np.float32)
    params = dict(conv.default_params(x.shape, w.shape, pad=1))
    for owner in ("pool", "graph"):
        pool = Pool(executors=1, threads=1, pin=False)
        op, _ = _conv_op(x, w, b, params, pool, 1)
        first = pool if owner == "pool" else op._keep[0]
        first.close()
        assert first.closed and op.closed
        op.close()  # idempotent
        pool.close()
    bld = Builder("t")
    bld.output(bld.op("y", "relu", [bld.input("x", (4, 8))]))
    g = bld.build()
    eng = NativeEngine(g)
    eng._ng.close()
    assert eng.closed
    ng = lower_graph(g)
    plan = Plan(ng)
    ng.close()
    assert plan.closed


def test_op_bench_refuses_bad_buffers():
    from hwtune.native.op_bench import OpBench
    from hwtune.native.threads import Pool
    with Pool(executors=1, threads=1, pin=False) as pool:
        with pytest.raises(UsageError, match="float32"):
            OpBench(pool, 1, None, 0, [np.zeros(3)], [])


def test_outcome_of_a_measurement():
    from hwtune.measure import Measurement
    from hwtune.tuners.search import Outcome
    o = Outcome.of(Measurement(OK, [3.0, 1.0, 2.0]))
    assert o.status == OK and o.seconds == 2.0 and o.samples == [3.0, 1.0, 2.0]
    o = Outcome.of(Measurement(ERROR, [1.0], "broke"))
    assert o.status == ERROR and o.seconds is None and o.samples == [1.0]
    assert Outcome.of(Measurement(OK, [])).status == ERROR
