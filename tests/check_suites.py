"""The check suite the CLI tests measure: two figures and their reference
kernels, decided in seconds (tests/test_check_cli.py, test_check_levels.py,
test_docs_console.py)."""

_SUITE = """
[suite]
name = "{name}"
min_rounds = 3
max_rounds = 8
max_seconds = 5.0
chunk = 2
sample_seconds = 0.001
warmup = 1
{processes}
[thresholds]
# 200%: other users' load on a shared test machine never decides either way.
min_effect = 2.0
large_effect = 3.0

[[reference]]
kind = "blas_gemm"
M = 16
K = 16
N = 16
{eltwise_ref}
[[figure]]
name = "g"
kind = "gemm"
M = 16
K = 64
N = 64
{eltwise_fig}"""

_ELTWISE_REF = """
[[reference]]
kind = "numpy_eltwise"
n = 4096
"""

_ELTWISE_FIG = """
[[figure]]
name = "e"
kind = "eltwise"
op = "mul"
n = 8192
"""


def tiny_suite(name: str = "tiny", processes=3, eltwise: bool = True) -> str:
    """The suite's TOML: `processes` per recorded time figure (None: the
    suite leaves it to the default); eltwise: the element-wise figure and
    its reference beside the GEMM's."""
    return _SUITE.format(
        name=name,
        processes="" if processes is None else f"processes = {processes}\n",
        eltwise_ref=_ELTWISE_REF if eltwise else "",
        eltwise_fig=_ELTWISE_FIG if eltwise else "")
