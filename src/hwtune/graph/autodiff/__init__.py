"""Reverse-mode differentiation of model.json graphs: training steps."""

from hwtune.graph.autodiff.build import (BATCH_NORM_MODES, DEFAULTS, LOSSES, LOSS_NAME,
                                         OPTIMIZERS, TrainSpec, is_training_graph,
                                         trainable_params, training_graph)
from hwtune.graph.autodiff.rules import RULES

__all__ = ["BATCH_NORM_MODES", "DEFAULTS", "LOSSES", "LOSS_NAME", "OPTIMIZERS", "RULES",
           "TrainSpec", "is_training_graph",
           "trainable_params", "training_graph"]
