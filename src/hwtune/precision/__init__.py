"""Precision as a tuned knob (issue #43): post-training quantisation of a
float graph (rewrite.py: int8 / bf16 per op), calibration and the error
measure (calibrate.py), and the per-op choice within an error bound that
tune-graph --precision makes (choose.py). docs/precision.md describes it."""
