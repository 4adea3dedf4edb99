"""A step the kernels refuse is stored as an 'error' row; the scan goes on."""

import io
import json

from hwtune.db import ResultsDB
from hwtune.errors import NativeError
from hwtune.native.isa import selected_isa
from hwtune.report.export import write
from hwtune.scan import runner
from hwtune.scan.steps import DEFAULT_GEMM, ScanOptions
from hwtune.scan.summary import load_run


def test_failed_step_is_stored_with_status_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HWTUNE_SCAN_SCALE", "0.25")

    def refuse(self, step, noise):
        raise NativeError("hwt_bench_gemm: out of memory")

    monkeypatch.setattr(runner._Measurer, "gemm", refuse)
    warnings = []
    with ResultsDB.open(tmp_path / "r.db") as db:
        opts = ScanOptions(threads=(1,), quick=True, isa=None, reps=None, gemm=DEFAULT_GEMM,
                           eltwise_size=4096, corun=False)
        res = runner.run_scan(db, opts, warn=warnings.append)
        run = db.run(res.run_id)
        assert run["status"] == "complete"
        rows = db.measurements(res.run_id, bench="gemm")
        assert rows and all(r["status"] == "error" for r in rows)
        assert "out of memory" in rows[0]["note"] and rows[0]["samples"] == []
        assert db.measurements(res.run_id, bench="eltwise")  # the scan went on
        assert any("failed: hwt_bench_gemm: out of memory" in w for w in warnings)
        summary = load_run(db, res.run_id)
    json.dumps(summary)  # the --json path
    # The label names the variant this CPU runs, whatever it is (AVX2-only
    # hosts give avx2): never assume the developer's ISA.
    labels = [f"gemm {M}x{K}x{N} 1t {selected_isa()}" for M, K, N in DEFAULT_GEMM]
    assert [e["label"] for e in summary["errors"]] == labels
    label = labels[0]
    assert all(not g["rows"] for g in summary["gemm"])  # no fake 0 GFLOPS point
    out = io.StringIO()
    write("scan", summary, "terminal", out)
    text = out.getvalue()
    assert "Traceback" not in text and "nan" not in text.lower()
    assert f"failed: {label}: hwt_bench_gemm: out of memory" in text
