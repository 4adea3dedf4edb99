"""Chrome trace export: structure Perfetto/chrome://tracing need, times in
microseconds from the first op, one named row per executor."""

import json

import pytest

from hwtune.engine.trace import OpEvent, chrome_trace, summary, write_chrome_trace
from hwtune.errors import UsageError

EVENTS = [
    ("conv1", "conv2d", 0, 2, 10.000100, 10.000350),
    ("relu1", "relu", 1, 1, 10.000400, 10.000410),
    ("fc", "gemm", 0, 2, 10.000360, 10.000900),
]


def _x(doc):
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def test_complete_events_have_the_fields_viewers_need():
    doc = chrome_trace(EVENTS, process_name="hwtune tiny")
    xs = _x(doc)
    assert len(xs) == 3
    for e in xs:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["pid"] == 1 and isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    by = {e["name"]: e for e in xs}
    assert by["conv1"]["ts"] == 0.0 and by["conv1"]["dur"] == pytest.approx(250.0)
    assert by["fc"]["ts"] == pytest.approx(260.0) and by["fc"]["tid"] == 0
    assert by["relu1"]["tid"] == 1
    assert by["relu1"]["args"] == {"op_type": "relu", "threads": 1}
    assert [e["name"] for e in xs] == ["conv1", "fc", "relu1"]  # ordered by start


def test_metadata_names_process_and_every_executor():
    doc = chrome_trace(EVENTS, process_name="hwtune tiny", metadata={"model": "tiny"})
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    names = {(e["name"], e["tid"]): e["args"] for e in meta}
    assert names[("process_name", 0)] == {"name": "hwtune tiny"}
    assert names[("thread_name", 0)] == {"name": "executor 0"}
    assert names[("thread_name", 1)] == {"name": "executor 1"}
    assert doc["otherData"] == {"model": "tiny"}


def test_written_file_loads_as_json(tmp_path):
    path = tmp_path / "out.json"
    dicts = [dict(zip(OpEvent._fields, e)) for e in EVENTS]
    assert write_chrome_trace(path, dicts) == 3
    doc = json.loads(path.read_text())
    assert isinstance(doc["traceEvents"], list) and len(_x(doc)) == 3
    assert not list(tmp_path.glob("*.tmp*"))


def test_empty_trace_is_still_valid():
    doc = chrome_trace([])
    assert _x(doc) == [] and json.loads(json.dumps(doc)) == doc


@pytest.mark.parametrize("bad", [
    [("a", "relu", 0, 1, 2.0, 1.0)],            # ends before it starts
    [("a", "relu", 0, 1, float("nan"), 1.0)],   # no time
    [("a", "relu", 0)],                         # too few fields
    [{"op_name": "a"}],                         # dict lacking fields
])
def test_bad_events_are_refused(bad):
    with pytest.raises(UsageError):
        chrome_trace(bad)


def test_unwritable_path_is_one_usage_error(tmp_path):
    with pytest.raises(UsageError, match="--trace"):
        write_chrome_trace(tmp_path / "missing" / "t.json", EVENTS)


def test_summary_makespan_and_busy():
    s = summary(EVENTS)
    assert s["ops"] == 3 and s["makespan_s"] == pytest.approx(800e-6)
    assert s["busy"][0] == pytest.approx((250 + 540) / 800)
    assert s["busy"][1] == pytest.approx(10 / 800)
    assert summary([]) == {"ops": 0, "makespan_s": 0.0, "busy": {}}
