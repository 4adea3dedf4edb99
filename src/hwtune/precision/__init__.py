"""Precision as a tuned knob (issue #43): post-training quantisation of a
float graph (the rewrite itself, int8 / bf16 per op, is the graph pass
hwtune.graph.passes.op_precision), calibration and the error
measure (calibrate.py), and the per-op choice within an error bound that
tune-graph --precision makes (choose.py). docs/precision.md describes it."""
