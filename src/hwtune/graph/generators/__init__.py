"""Generators of the bundled paper workloads, one module per model family.

Each `generate(**sizes)` returns an ordinary validated Graph equal to the
corresponding template in configs/models/templates (tests check this).
"""

from hwtune.graph.generators import inception, lstm, pathnet, phased_lstm, resnet

# family -> (generate function, template file under configs/models/templates)
FAMILIES = {
    "lstm": (lstm.generate, "lstm.json"),
    "phased_lstm": (phased_lstm.generate, "phased_lstm.json"),
    "pathnet": (pathnet.generate, "pathnet.json"),
    "inception": (inception.generate, "inception.json"),
    "resnet18": (resnet.generate, "resnet.json"),
}
