"""`hwtune compare`: one graph, its weights and its inputs run by hwtune
and by its peers (ONNX Runtime, PyTorch), outputs checked for agreement,
latencies sampled interleaved.

peers.py builds each side (a row per peer), torch_graph.py runs a graph in
PyTorch eager, timing.py samples them round-robin, run.py puts it together.
"""
