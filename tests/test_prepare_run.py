"""prepare_run, the configured run written once (hwtune.engine.prepare):
the config from flags / stored rows / the default, each CONV's knobs for
the threads it runs at on the graph rewritten for them, the per-op tables
checked against that graph, the stored config row, and the engine opened
on it computing the reference's outputs."""

import numpy as np
import pytest

from hwtune.db.keys import graph_hash
from hwtune.engine.config import EngineConfig
from hwtune.engine.prepare import prepare_run
from hwtune.errors import UsageError
from hwtune.graph.generators.builder import Builder
from hwtune.graph.reference import run_reference
from hwtune.native.isa import selected_isa
from hwtune.native.threads import allowed_cpus
from hwtune.engine import workloads

ISA = selected_isa()


def conv_relu():
    b = Builder("conv-relu")
    t = b.input("x", (1, 16, 8, 8))
    t = b.op("A", "conv2d", [t, b.param("A.w", (16, 16, 3, 3))], stride=[1, 1], padding=[1, 1])
    b.output(b.op("A.relu", "relu", [t]))
    return b.build()


def test_nothing_stored_runs_the_default_and_computes_the_reference():
    g = conv_relu()
    run = prepare_run(None, "", g, "", {"threads": 1, "executors": 1})
    assert run.source == "default+flags"
    assert (run.config.threads, run.config.executors) == (1, 1)
    assert run.knobs.sources == {"A": "default"}
    assert run.describe_source(notes=False) == "default+flags; conv knobs: default for 1 op"
    eng = run.open()
    try:
        eng.run()
        got = eng.outputs()
    finally:
        eng.close()
    for name, ref in run_reference(g).items():
        scale = float(np.max(np.abs(ref))) or 1.0
        assert float(np.max(np.abs(got[name] - ref))) <= 1e-4 * scale


def _tuned_row(db, host, g, threads, **knobs):
    wl = workloads.conv_workload(g, g.ops[0])
    p = {k: v[0] for k, v in wl.knobs(ISA).items()}
    p.update(knobs)
    db.put_tuned(host, tuner=workloads.CONV_TUNER, subject=wl.key, isa=ISA, threads=threads,
                 search="grid", best_params=p, best_s=1e-4, trials=3)
    return p


def test_tuned_knobs_at_the_run_threads_rewrite_the_graph_of_a_config_with_knobs(db, host):
    g = conv_relu()
    gh = db.put_graph(g.to_json())
    _tuned_row(db, host, g, 1, ic_bn=8, oc_bn=8)
    # a tuned config whose knobs the layout DP chose at 2 threads, run at 1
    at2 = _tuned_row(db, host, g, 2, ic_bn=16, oc_bn=16)
    db.put_engine_config(host, gh, source="tuned",
                         **EngineConfig(executors=1, threads=2, scheduler="sequential",
                                        op_params={"A": dict(at2, layout="NCHWc")}
                                        ).db_fields())
    run = prepare_run(db, host, g, gh, {"threads": 1, "executors": 1})
    assert run.knobs.sources == {"A": "tuned@1t"}
    assert run.config.op_params["A"]["ic_bn"] == 8
    # the graph that runs is the layout pass's rewrite, with transforms
    assert any(op.op == "layout_transform" for op in run.graph.ops)
    assert "conv knobs: tuned@1t for 1 op" in run.describe_source()
    # at the config's own count, its own knobs
    assert prepare_run(db, host, g, gh).knobs.sources == {"A": "config@2t"}


def test_a_config_without_knobs_runs_the_template_defaults_whatever_is_stored(db, host):
    # Workload knobs stored by a tuning whose final comparison kept the
    # default never reach a run of the default (they were 2.5-41% slower
    # inside whole models: engine/conv_knobs.py)
    g = conv_relu()
    gh = db.put_graph(g.to_json())
    _tuned_row(db, host, g, 1, ic_bn=8, oc_bn=8)
    run = prepare_run(db, host, g, gh, {"threads": 1, "executors": 1})
    assert run.source == "default+flags"
    assert run.knobs.sources == {"A": "default"} and not run.config.op_params
    assert not any(op.op == "layout_transform" for op in run.graph.ops)
    # a user config saved from flags has no knobs either
    db.put_engine_config(host, gh, source="user",
                         **EngineConfig(executors=1, threads=1, scheduler="sequential"
                                        ).db_fields())
    assert prepare_run(db, host, g, gh).knobs.sources == {"A": "default"}


def test_the_config_row_is_stored_as_hwtune_run_stores_it(db, host):
    g = conv_relu()
    gh = db.put_graph(g.to_json())
    run = prepare_run(db, host, g, gh)
    assert run.source == "default"
    cid = run.config_id(db, host, gh)
    assert cid == db.engine_config(host, gh, "default")["id"]
    saved = run.config_id(db, host, gh, save=True)
    assert saved == db.engine_config(host, gh, "user")["id"]
    # now the stored user config is used; flags on it store nothing new
    again = prepare_run(db, host, g, gh, {"threads": 1})
    assert again.source == "user+flags" and again.config_id(db, host, gh) is None


def test_a_config_that_cannot_run_is_refused_before_anything_opens(db, host):
    g = conv_relu()
    gh = graph_hash(g.to_json())
    too_many = len(allowed_cpus()) + 1
    with pytest.raises(UsageError):
        prepare_run(None, "", g, gh, {"executors": 1, "threads": too_many})
    # per-op tables naming ops the graph that runs lacks are refused too
    db.put_graph(g.to_json())
    db.put_engine_config(host, gh, source="user",
                         **EngineConfig(executors=1, threads=1, scheduler="sequential",
                                        op_threads={"no-such-op": 1}).db_fields())
    with pytest.raises(UsageError):
        prepare_run(db, host, g, gh)
