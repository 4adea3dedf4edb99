"""hwtune: benchmark and autotune deep-learning graphs on multicore CPUs."""

__version__ = "0.1.0"
