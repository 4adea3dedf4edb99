"""Backward CONVs in the CONV search (issue #15): a training step's stride-1
conv2d_grad_data runs as the forward CONV of dy, so its workload is that
CONV's (tuned once when a forward conv of the step has the same shapes),
tune-graph --train tunes it, and a run applies the tuned knobs to it with the
forward ops' sources."""

import json

import pytest

from hwtune.db import ResultsDB
from hwtune import machine
from hwtune.engine.config import EngineConfig
from hwtune.graph.autodiff import TrainSpec, training_graph
from hwtune.graph.generators.builder import Builder
from hwtune.graph.passes.layout import apply_op_params
from hwtune.native.isa import selected_isa
from hwtune.engine import conv_knobs
from hwtune.tuners import conv_grad as cl_gw
from hwtune.tuners import conv_local as cl

import knob_checks
from knob_checks import assert_runs_like_the_reference, hwtune

ISA = selected_isa()
GRAD_B = "grad/B/conv2d_grad_data"


def two_convs():
    """x -> A (8->8, 3x3, no bias) -> relu -> B (8->8): B's data gradient is
    a forward CONV of A's and B's shapes; A needs none (x is an input)."""
    return knob_checks.two_convs((2, 8, 6, 6), 8, 8)


def step():
    return training_graph(two_convs(), TrainSpec(loss="mse"))


def op(graph, name):
    return next(o for o in graph.ops if o.name == name)


def test_a_data_gradient_is_its_forward_conv_and_shares_its_workload():
    g = step()
    assert [o.name for o in g.ops if o.op == "conv2d_grad_data"] == [GRAD_B]
    wl = cl.conv_workload(g, op(g, GRAD_B))
    assert (wl.x_shape, wl.w_shape, wl.stride, wl.pad) == ((2, 8, 6, 6), (8, 8, 3, 3),
                                                          (1, 1), (1, 1))
    assert wl.per_run_weights and "per_run" in wl.key
    # the step's weights are inputs: its forward CONVs pack them per run too
    groups = cl.workload_groups(g)
    assert len(groups) == 1
    (_, names), = groups.values()
    assert sorted(names) == ["A", "B", GRAD_B]
    # a forward pass's params are not per run: another workload
    assert cl.conv_workload(two_convs(), op(two_convs(), "A")).key != wl.key


def test_strided_data_gradients_take_their_own_im2col_knobs(db, host):
    b = Builder("strided")
    t = b.input("x", (2, 4, 8, 8))
    t = b.op("A", "conv2d", [t, b.param("A.w", (4, 4, 3, 3))], stride=[1, 1], padding=[1, 1])
    t = b.op("B", "conv2d", [t, b.param("B.w", (8, 4, 3, 3))], stride=[2, 2], padding=[1, 1])
    b.output(t)
    g = training_graph(b.build(), TrainSpec(loss="mse"))
    grad = op(g, "grad/B/conv2d_grad_data")
    assert not cl.tuned_op(g, grad) and cl_gw.has_own_knobs(g, grad)
    assert all(grad.name not in names for _, names in cl.workload_groups(g).values())
    wl = cl_gw.workload(g, grad)
    assert wl.tuner == "conv-grad-data" and wl.out_shape == (2, 4, 8, 8)
    assert set(wl.knobs()) == {"units", "tile_cols"}
    assert grad.name in cl_gw.workload_groups(g)[wl.key][1]
    with pytest.raises(Exception, match="reg_n"):
        apply_op_params(g, {grad.name: {"reg_n": 2}})
    with pytest.raises(Exception, match="units=3 is not legal"):
        apply_op_params(g, {grad.name: {"units": 3}})
    run_graph = apply_op_params(g, {grad.name: {"units": 4, "tile_cols": 64}})
    assert op(run_graph, grad.name).attrs["units"] == 4
    db.put_tuned(host, tuner=wl.tuner, subject=wl.key, isa=ISA, threads=2, search="grid",
                 best_params={"units": 1, "tile_cols": 256}, best_s=1e-4, trials=3)
    k = conv_knobs.choose(db, host, g, {}, threads=2, params_threads=None, isa=ISA)
    assert k.sources[grad.name] == "tuned@2t"
    assert k.op_params[grad.name] == {"units": 1, "tile_cols": 256}


def test_tuned_knobs_reach_the_data_gradient_and_keep_the_step_exact(db, host):
    g = step()
    wl = cl.conv_workload(g, op(g, GRAD_B))
    knobs = wl.knobs(ISA)
    tuned = {k: v[0] for k, v in knobs.items()}
    tuned.update(ic_bn=4, oc_bn=2, reg_n=knobs["reg_n"][-1], unroll_ker=1, reg_h=2, winograd=0)
    db.put_tuned(host, tuner=cl.TUNER, subject=wl.key, isa=ISA, threads=1, search="grid",
                 best_params=tuned, best_s=1e-4, trials=3)
    gw = cl_gw.workload(g, op(g, "B.w.grad"))
    gw_tuned = {"winograd": 2, "units": 4, "tile_cols": 256, "chunk_tiles": 128}
    assert gw.canonical(gw_tuned) == gw_tuned != gw.default_params()
    db.put_tuned(host, tuner=cl_gw.TUNER, subject=gw.key, isa=ISA, threads=1, search="grid",
                 best_params=gw_tuned, best_s=1e-4, trials=3)
    k = conv_knobs.choose(db, host, g, {}, threads=1, params_threads=None, isa=ISA)
    # A.w.grad and B.w.grad share a workload (the same x and dy shapes)
    assert k.sources == {"A": "tuned@1t", "B": "tuned@1t", GRAD_B: "tuned@1t",
                         "A.w.grad": "tuned@1t", "B.w.grad": "tuned@1t"}
    assert conv_knobs.choose(db, host, g, {}, threads=2, params_threads=None,
                             isa=ISA).sources["B.w.grad"] == "tuned@1t(nearest)"
    assert k.op_params[GRAD_B]["layout"] == "NCHW"
    # a config with knobs (stored workload knobs reach only such a config's
    # runs), chosen at 2 threads: the run at 1 takes the rows tuned at 1
    cfg = EngineConfig(executors=1, threads=1, scheduler="sequential",
                       op_params={"A": k.op_params["A"]})
    new, run_graph, _ = conv_knobs.for_run(db, host, g, cfg, params_threads=2, isa=ISA)
    attrs = op(run_graph, GRAD_B).attrs
    assert {key: attrs[key] for key in ("ic_bn", "oc_bn", "reg_h", "winograd")} == \
        {"ic_bn": 4, "oc_bn": 2, "reg_h": 2, "winograd": 0}
    for name in ("A.w.grad", "B.w.grad"):
        assert {key: op(run_graph, name).attrs[key] for key in gw_tuned} == gw_tuned
    assert_runs_like_the_reference(g, run_graph, new)


def test_tune_graph_train_tunes_the_data_gradient_and_run_uses_it(tmp_path):
    model = tmp_path / "two.json"
    model.write_text(json.dumps(two_convs().to_json()))
    path = tmp_path / "results.db"
    args = ("tune-graph", str(model), "--train", "--loss", "mse", "--only", "conv",
            "--search", "grid", "--trials", "3", "--reps", "1", "--json")
    ok = hwtune(*args, db=path)
    assert ok.returncode == 0, ok.stderr
    kept = json.loads(ok.stdout)["verdict"]["uses"]
    g = step()
    key = cl.conv_workload(g, op(g, GRAD_B)).key
    with ResultsDB.open(str(path)) as d:
        rows = d._query("SELECT subject, threads FROM tuned_subjects WHERE tuner = 'conv'", [])
        trials = d._query("SELECT count(*) AS n FROM tuning_trials WHERE tuner = 'conv'",
                          [])[0]["n"]
    assert [r["subject"] for r in rows] == [key]
    threads = rows[0]["threads"]
    with ResultsDB.open(str(path)) as d:  # the untuned plan, measured beside the knobs
        assert d._query("SELECT count(*) AS n FROM tuning_trials WHERE tuner = 'conv-nchw' "
                        "AND subject = ?", [key])[0]["n"] == 1
    gw_keys = sorted(cl_gw.workload_groups(g))
    with ResultsDB.open(str(path)) as d:
        gw_rows = d._query("SELECT subject FROM tuned_subjects WHERE tuner = ?", [cl_gw.TUNER])
        gw_trials = d._query("SELECT count(*) AS n FROM tuning_trials WHERE tuner = ?",
                             [cl_gw.TUNER])[0]["n"]
    assert sorted(r["subject"] for r in gw_rows) == gw_keys and gw_trials >= 2
    ran = hwtune("run", str(model), "--train", "--loss", "mse", "--threads", str(threads),
                 "--iterations", "1", "--check", "--json", db=path)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["check"]["ok"]
    # the tuned config's op_params when the final comparison kept it (the
    # knobs, or the untuned plan where that measured faster); the template
    # defaults when it kept the default (stored workload knobs reach a run
    # only through a config with knobs: engine/conv_knobs.py)
    applied = (f"config@{threads}t",) if kept != "default" else ("default",)
    assert out["conv_knobs"]["sources"][GRAD_B] in applied
    grads = [o.name for o in g.ops if o.op == "conv2d_grad_weight"]
    assert len(grads) == 2
    assert all(out["conv_knobs"]["sources"][n] in applied for n in grads)
    # a rerun measures nothing again
    again = hwtune(*args, db=path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["stages"]["conv"]["measured"] == 0
    with ResultsDB.open(str(path)) as d:
        assert d._query("SELECT count(*) AS n FROM tuning_trials WHERE tuner = 'conv'",
                        [])[0]["n"] == trials
        assert d._query("SELECT count(*) AS n FROM tuning_trials WHERE tuner = ?",
                        [cl_gw.TUNER])[0]["n"] == gw_trials


def test_the_weight_gradient_knob_attributes_are_the_c_declaration():
    from hwtune.graph.ops.train import GRAD_WEIGHT_KNOBS
    from hwtune.native import grad_conv
    assert grad_conv.knob_names() == GRAD_WEIGHT_KNOBS
    legal = grad_conv.knobs((2, 8, 6, 6), (8, 8, 3, 3), stride=1, pad=1)
    assert set(legal) == set(GRAD_WEIGHT_KNOBS) and legal["winograd"] == [0, 2]
    assert grad_conv.knobs((2, 8, 6, 6), (8, 8, 3, 3), stride=2, pad=1)["winograd"] == [0]
    # the default is today's rule: Winograd from 32 channels each side
    assert grad_conv.default_params((2, 8, 6, 6), (8, 8, 3, 3), stride=1, pad=1)["winograd"] == 0
    assert grad_conv.default_params((2, 32, 6, 6), (32, 32, 3, 3), stride=1,
                                    pad=1)["winograd"] == 2


def gw_workload():
    g = step()
    return cl_gw.workload(g, next(o for o in g.ops if o.op == "conv2d_grad_weight"))


def test_weight_gradient_space_has_one_point_per_distinct_run():
    wl = gw_workload()
    space = wl.space()
    points = list(space.points())
    assert wl.default_params() in points
    # Winograd points never vary the im2col tile, im2col points never the chunk
    default = wl.default_params()
    for p in points:
        if p["winograd"]:
            assert p["tile_cols"] == default["tile_cols"]
        else:
            assert p["chunk_tiles"] == default["chunk_tiles"]
    # 6x6 outputs of 2 images: every tile_cols value gives whole-image tiles
    # and every chunk_tiles both images, so only the algorithm and the units
    # are left to search
    assert len(points) == 2 * 3


def test_knob_values_that_give_the_same_plan_are_one_point():
    from hwtune.native import grad_conv
    # ResNet-18's 64x56x56 layer: 784 tiles an image, so 64 and 128 both
    # chunk one image (the default 128 names them); 256 and 512 too
    x, w = (16, 64, 56, 56), (64, 64, 3, 3)
    p = {"winograd": 2, "units": 1, "tile_cols": 1024, "chunk_tiles": 64}
    assert grad_conv.canonical(p, x, w, stride=1, pad=1) == dict(p, tile_cols=256,
                                                                 chunk_tiles=128)
    # 56 columns a row: tile_cols 64 and 128 give 1 and 2 rows, distinct
    q = dict(p, winograd=0, tile_cols=64)
    assert grad_conv.canonical(q, x, w, stride=1, pad=1)["tile_cols"] == 64
    with pytest.raises(Exception, match="not legal"):
        grad_conv.canonical(dict(p, units=3), x, w, stride=1, pad=1)


def test_a_wrong_weight_gradient_is_stored_as_a_wrong_answer(db, host):
    from hwtune.tuners.loop import TrialStore, run_search
    from hwtune.tuners.search import OK, WRONG_ANSWER, make_search

    def corrupt(dw):
        dw.flat[dw.size // 2] += 0.5

    wl = gw_workload()
    run = db.start_run(host, "tune", {})
    st = TrialStore(db, run, host, tuner=cl_gw.TUNER, subject=wl.key, isa=ISA, threads=1)
    m = cl_gw.GradConvMeasure(wl, threads=1, isa=ISA, reps=2, min_sample_s=2e-4,
                                check_hook=corrupt)
    try:
        res = run_search(make_search("grid", wl.space(), max_trials=4), m, st)
        rows = db.trials(host, tuner=cl_gw.TUNER, subject=wl.key)
        assert len(rows) == 4 and {r["status"] for r in rows} == {WRONG_ANSWER}
        assert all("max abs error" in r["note"] for r in rows)
        assert res.best_params is None
        # the real kernel passes the same check
        m.check_hook = None
        assert all(m(r["params"]).status == OK for r in rows)
    finally:
        m.close()


@pytest.mark.parametrize("untuned_s, source", [(0.5e-4, "untuned@1t"), (2e-4, "tuned@1t")])
def test_a_faster_untuned_plan_replaces_a_steps_tuned_knobs(db, host, untuned_s, source):
    """A training step's CONV (per-run weights): its untuned plan (the
    per-run Winograd rule is no point of the search's space), measured
    faster than the tuned knobs at that count, runs instead."""
    from hwtune.tuners import conv_nchw
    g = step()
    wl = cl.conv_workload(g, op(g, GRAD_B))
    tuned = {k: v[0] for k, v in wl.knobs(ISA).items()}
    db.put_tuned(host, tuner=cl.TUNER, subject=wl.key, isa=ISA, threads=1, search="grid",
                 best_params=tuned, best_s=1e-4, trials=3)
    run = db.start_run(host, "tune", {})
    db.add_trial(run, host, tuner=conv_nchw.TUNER, search="measure", subject=wl.key, isa=ISA,
                 threads=1, params=conv_nchw.PARAMS, status="ok", median_s=untuned_s,
                 samples=[untuned_s])
    k = conv_knobs.choose(db, host, g, {}, threads=1, params_threads=None, isa=ISA)
    assert {k.sources[n] for n in ("A", "B", GRAD_B)} == {source}
    if source.startswith("untuned"):
        assert k.op_params[GRAD_B] == {"layout": "NCHW"}
        cfg = EngineConfig(executors=1, threads=1, scheduler="sequential")
        _, run_graph, _ = conv_knobs.for_run(db, host, g, cfg, params_threads=None, isa=ISA)
        assert "ic_bn" not in op(run_graph, GRAD_B).attrs


def test_the_plan_of_a_training_step_has_its_gradient_workloads_and_cuts_them(tmp_path):
    """tune-graph's plan costs the CONV gradients' searches beside the
    forward CONVs' (they were left out of it: a budget planned without them
    and the gradients took the time of later stages), and a budget too small
    for them cuts them: a cut search is not stored as tuned, so a rerun
    resumes it."""
    model = tmp_path / "two.json"
    model.write_text(json.dumps(two_convs().to_json()))
    path = tmp_path / "results.db"
    g = step()
    gw = cl_gw.workload_groups(g)
    args = ("tune-graph", str(model), "--train", "--loss", "mse", "--only", "conv",
            "--reps", "1")
    plan = json.loads(hwtune(*args, "--plan", "--json", db=path).stdout)
    items = {i["name"]: i for i in plan["items"] if i["stage"] == "conv"}
    for key, (wl, names) in gw.items():
        assert items[key]["trials"] == wl.space().size(), key
        assert items[key]["cost_s"] > 0
    # A budget the final comparison alone outlasts: the plan gives them nothing.
    tight = json.loads(hwtune(*args, "--budget", "0.2", "--plan", "--json", db=path).stdout)
    cut = {i["name"]: i for i in tight["items"] if i["name"] in gw}
    assert set(cut) == set(gw) and all(i["cut"] and i["allowed_trials"] == 0
                                       for i in cut.values()), cut
    ran = hwtune(*args, "--budget", "0.2", "--json", db=path)
    assert ran.returncode == 0, ran.stderr

    def gradient_rows(table):
        with ResultsDB.open(str(path)) as d:
            return d._query(f"SELECT count(*) AS n FROM {table} WHERE tuner = ?",
                            [cl_gw.TUNER])[0]["n"]
    assert gradient_rows("tuning_trials") == gradient_rows("tuned_subjects") == 0
    # without the budget they are tuned
    ran = hwtune(*args, "--json", db=path)
    assert ran.returncode == 0, ran.stderr
    assert gradient_rows("tuned_subjects") == len(gw)
