"""ADA-GP (MICRO 2023): predict weight gradients with a small predictor network and alternate
backpropagated (BP) and predicted (GP) batches adaptively. The training hook: training.py,
which wires the predictors (predictors.py; the feedback predictor's fused arithmetic:
feedback_kernels.py; the paper's own design, `direct`: direct.py), the measured cosines and
calibrated steps (calibration.py), the adaptive BP/GP schedule (schedule.py), the per-layer
state (layer_state.py) and what the workload charges (cost.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from backend.techniques.adagp.params import AdaGPParams
from backend.techniques.entry import Figure, Paper, TechniqueEntry

if TYPE_CHECKING:
    from backend.training.technique import Technique


def _training_hook() -> type[Technique]:
    from backend.techniques.adagp.training import AdaGP

    return AdaGP


GP_FRACTION = Figure(
    "gp_fraction",
    "GP fraction",
    "batches trained on predicted gradients / batches (a training's: over all its batches, "
    "warm-up included; every epoch has as many batches)",
    over_training="mean",
)

TECHNIQUE = TechniqueEntry(
    name="adagp",
    label="ADA-GP",
    params_model=AdaGPParams,
    training_hook=_training_hook,
    hardware_extension="gradient_predictor",
    figures=(
        GP_FRACTION,
        Figure(
            "cosine_similarity",
            "predicted-gradient cosine",
            "cosine between the predicted and the true weight gradient, mean over the epoch's "
            "measured BP batches",
            percent=False,
        ),
    ),
    paper=Paper(
        title="ADA-GP: adaptive gradient prediction",
        venue="MICRO 2023",
        headline="1.47x average speedup over 15 models, 34% less energy (ratio 0.66), "
        "similar or higher accuracy",
        speedup=1.47,
        energy_ratio=0.66,
        accuracy="similar or higher",
        miniature=Path(__file__).with_name("miniature.yaml"),
        figure="gp_fraction",
    ),
)
