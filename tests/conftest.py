"""Fixtures shared by the test files: an in-memory results.db and a host in it."""

import signal

import pytest

from hwtune.db import ResultsDB

# A made-up machine: tests that store rows need a host; nothing reads its values.
FINGERPRINT = {
    "cpu_model": "Test CPU", "vendor": "intel", "isa_best": "avx2", "sockets": 1,
    "physical_cores": 4, "logical_cpus": 8, "numa_nodes": 1,
    "isa": {"avx2": True}, "volatile": {"cpu_mhz": 3000.0},
}


@pytest.fixture
def db():
    with ResultsDB.open(":memory:") as d:
        yield d


@pytest.fixture
def host(db):
    return db.upsert_host(FINGERPRINT)


def sigint_default():
    """Popen(preexec_fn=...) for tests that press Ctrl-C: a job started in
    the background by a non-interactive shell (a CI runner) inherits SIGINT
    ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
