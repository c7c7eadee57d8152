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
        findings=(
            "What sets the GP fraction: the adaptive rule's cosine gate, not accuracy. A GP run "
            "lengthens only while every layer's predicted gradient reaches twice the cosine "
            "that the previous BP batch's true gradient has with the current one "
            "(lengthen_ratio 2), and the default direct predictor's predictions rarely do, so "
            "GP acts on 3-13% of the batches (a plateau gate besides waits for the training "
            "loss to flatten). On the MNIST miniature a forced schedule cannot tell a predictor "
            "from skipping the backward pass: direct and the zero-gradient control lose about "
            "the same accuracy.",
            "Against its controls, at forced schedules on a workload where skipping hurts "
            "(LeNet-5 on 6,000 Fashion-MNIST images, 4 epochs, 5 seeds paired; "
            "python benchmarks/adagp_controls.py --seeds 0 1 2 3 4): the oracle control (the "
            "true gradient on GP batches, charged as GP) keeps 3.1 points more accuracy than "
            "the none control (a zero gradient) at 1 BP : 1 GP, and 7.6 at 1:3. The default "
            "predictor, direct, does not beat none (+0.5 points at 1:1, its interval reaching "
            "below 0; -0.9 at 1:3): its predictions are worth no more than a zero gradient. "
            "Only feedback beats none (+1.4 and +3.9 points, about half the gap), and it costs "
            "more than the backward pass it skips.",
        ),
    ),
)
