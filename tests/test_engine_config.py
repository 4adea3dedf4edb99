"""EngineConfig validation against the allowed CPUs, and resolution order:
flags > stored 'tuned' > stored 'user' > default."""

import pytest

from hwtune.db import ResultsDB
from hwtune.engine.config import EngineConfig, default_config, resolve
from hwtune.native.sched import schedulers
from hwtune.errors import UsageError

FP = {"cpu_model": "Test CPU", "vendor": "intel", "isa_best": "avx2", "sockets": 1,
      "physical_cores": 4, "logical_cpus": 4, "numa_nodes": 1}
DOC = {"format_version": 1, "name": "tiny", "seed": 0,
       "inputs": [{"name": "x", "shape": [2, 3]}], "params": [],
       "ops": [{"name": "a", "op": "relu", "inputs": ["x"]},
               {"name": "b", "op": "relu", "inputs": ["a"]}], "outputs": ["b"]}
CPUS4 = [0, 1, 2, 3]
OPS = ["a", "b"]


@pytest.fixture
def db():
    with ResultsDB.open(":memory:") as d:
        d.host_key = d.upsert_host(FP)
        d.graph_hash = d.put_graph(DOC)
        yield d


@pytest.fixture(autouse=True)
def no_quota(monkeypatch):
    # The cgroup quota of the test machine must not change the defaults.
    import hwtune.engine.config as config
    monkeypatch.setattr(config, "usable_cpu_count", lambda cpus: len(cpus))


def test_default_is_one_executor_with_every_cpu():
    cfg = default_config(4)
    assert (cfg.executors, cfg.threads, cfg.scheduler, cfg.pinned) == (1, 4, "sequential", False)
    assert EngineConfig(scheduler="critical-path").pinned
    assert not EngineConfig(scheduler="critical-path", pin=False).pinned
    assert not EngineConfig(scheduler="shared-queue").pinned


def test_too_many_threads_names_flags_and_cpus():
    with pytest.raises(UsageError) as exc:
        EngineConfig(executors=2, threads=3, scheduler="critical-path").validate([0, 1, 4, 5])
    msg = str(exc.value)
    assert "--executors 2 --threads 3" in msg and "0-1,4-5" in msg and "<= 4" in msg


@pytest.mark.parametrize("cfg,match", [
    (EngineConfig(scheduler="fifo"), "--scheduler 'fifo'"),
    (EngineConfig(executors=0), "--executors 0"),
    (EngineConfig(threads=True), "--threads True"),
    (EngineConfig(executors=2, scheduler="sequential"), "--scheduler sequential"),
    (EngineConfig(threads=2, op_threads={"a": 3}), r"op_threads\['a'\]"),
    (EngineConfig(op_threads={"zz": 1}), "not in the graph: zz"),
    (EngineConfig(op_priority={"a": float("inf")}), "finite"),
    (EngineConfig(op_params={"a": 16}), "template"),
])
def test_invalid_configs(cfg, match):
    with pytest.raises(UsageError, match=match):
        cfg.validate(CPUS4, OPS)


def test_every_scheduler_and_layout_that_fits_validates():
    for s, row in schedulers().items():
        for k in ([1] if row.single_team else [1, 2, 4]):
            for t in range(1, 4 // k + 1):
                EngineConfig(executors=k, threads=t, scheduler=s).validate(CPUS4, OPS)


def test_resolve_default_with_notice(db):
    r = resolve(db, db.host_key, db.graph_hash, {}, cpus=CPUS4, op_names=OPS)
    assert r.source == "default" and r.config == default_config(4)
    assert "default 1 executor x 4 threads" in r.notice and "--executors" in r.notice
    r = resolve(None, "h", "g", {}, cpus=CPUS4)
    assert r.source == "default"


def test_resolve_order_tuned_over_user(db):
    common = dict(pin=False, op_threads={}, op_params={}, op_priority={})
    db.put_engine_config(db.host_key, db.graph_hash, executors=1, threads_per_executor=2,
                         scheduler="shared-queue", source="user", **common)
    r = resolve(db, db.host_key, db.graph_hash, {}, cpus=CPUS4, op_names=OPS)
    assert (r.source, r.config.scheduler, r.config.threads, r.notice) == \
        ("user", "shared-queue", 2, None)
    db.put_engine_config(db.host_key, db.graph_hash, executors=2, threads_per_executor=2,
                         scheduler="critical-path", source="tuned", **common)
    r = resolve(db, db.host_key, db.graph_hash, {}, cpus=CPUS4, op_names=OPS)
    assert (r.source, r.config.executors, r.config.scheduler) == ("tuned", 2, "critical-path")


def test_flags_override_stored_fields(db):
    db.put_engine_config(db.host_key, db.graph_hash, executors=2, threads_per_executor=2,
                         scheduler="critical-path", pin=True, op_threads={"a": 2},
                         op_priority={"b": 1.0}, source="tuned")
    r = resolve(db, db.host_key, db.graph_hash, {"scheduler": "shared-queue"}, cpus=CPUS4,
                op_names=OPS)
    assert r.source == "tuned+flags" and r.config.scheduler == "shared-queue"
    assert r.config.executors == 2 and r.config.op_priority == {"b": 1.0}
    # a new team size drops per-op counts that no longer fit
    r = resolve(db, db.host_key, db.graph_hash, {"threads": 1}, cpus=CPUS4, op_names=OPS)
    assert r.config.threads == 1 and r.config.op_threads == {}
    # sequential alone means one executor
    r = resolve(db, db.host_key, db.graph_hash, {"scheduler": "sequential"}, cpus=CPUS4)
    assert (r.config.executors, r.config.threads) == (1, 2)


def test_flag_counts_rederive_the_other_count(db):
    r = resolve(db, db.host_key, db.graph_hash, {"executors": 2}, cpus=CPUS4)
    assert (r.config.executors, r.config.threads, r.config.scheduler) == \
        (2, 2, "critical-path")
    assert "--scheduler critical-path" in r.notice
    r = resolve(db, db.host_key, db.graph_hash, {"threads": 2}, cpus=CPUS4)
    assert (r.config.executors, r.config.threads) == (1, 2)
    r = resolve(db, db.host_key, db.graph_hash,
                {"executors": 1, "threads": 2, "scheduler": "sequential"}, cpus=CPUS4)
    assert r.notice is None and r.source == "default+flags"


@pytest.mark.parametrize("flags,match", [
    ({"executors": 3, "threads": 2}, "--executors 3 --threads 2"),
    ({"threads": 5}, "--threads 5"),
    ({"scheduler": "round-robin"}, "choose one of sequential"),
    ({"executors": 2, "scheduler": "sequential"}, "--scheduler sequential"),
    ({"colour": "red"}, "unknown engine setting"),
])
def test_resolve_refuses_impossible_flags(db, flags, match):
    with pytest.raises(UsageError, match=match):
        resolve(db, db.host_key, db.graph_hash, flags, cpus=CPUS4)


def test_config_round_trips_through_the_db(db):
    cfg = EngineConfig(executors=2, threads=2, scheduler="critical-path",
                       op_threads={"a": 1}, op_params={"a": {"oc_bn": 16}},
                       op_priority={"b": 3.0})
    cid = db.put_engine_config(db.host_key, db.graph_hash, source="user", **cfg.db_fields())
    back = EngineConfig.from_db_row(db.engine_config(db.host_key, db.graph_hash, "user"))
    assert cid and back == EngineConfig(**dict(cfg.__dict__, pin=True))
