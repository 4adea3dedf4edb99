"""ONNX import and export.

import_onnx (importer.py) turns an ONNX file into a model.json and a
weights sidecar: reader.py opens and checks the file and settles input
shapes, convert.py walks the nodes folding constants, rules.py is the table
of ONNX ops (one row each), fold.py evaluates constant nodes. cache.py
serves `hwtune run MODEL.onnx` from a content-keyed cache; export.py writes
a model.json graph back out as ONNX for the peers of `hwtune compare`.
The `onnx` package is imported only inside these modules' functions.
"""
