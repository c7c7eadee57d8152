"""SparseTrain (DAC 2020): prune small activation gradients stochastically and skip zeros, the
natural ReLU ones included, on a sparse-aware 1-D dataflow. Training hook: training.py; the
densities it is judged by are measured for every training (`backend.specs.figures`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from backend.techniques.entry import Paper, TechniqueEntry
from backend.techniques.sparsetrain.params import SparseTrainParams

if TYPE_CHECKING:
    from backend.training.technique import Technique


def _training_hook() -> type[Technique]:
    from backend.techniques.sparsetrain.training import SparseTrain

    return SparseTrain


TECHNIQUE = TechniqueEntry(
    name="sparsetrain",
    label="SparseTrain",
    params_model=SparseTrainParams,
    training_hook=_training_hook,
    hardware_extension="zero_skipping",
    paper=Paper(
        title="SparseTrain: dataflow sparsity",
        venue="DAC 2020",
        headline="~2.7x speedup and 2.2x energy efficiency (energy ratio ~0.45) on "
        "AlexNet/ResNet, accuracy kept",
        speedup=2.7,
        energy_ratio=round(1 / 2.2, 2),
        accuracy="kept",
        miniature=Path(__file__).with_name("miniature.yaml"),
        figure="density_bwd",
    ),
)
