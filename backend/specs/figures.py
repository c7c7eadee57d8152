"""The figures a training measures in every epoch, declared once.

Two kinds: those the training engine measures for every training whatever its techniques (the
operand densities its recorder samples: natural ReLU sparsity is there without any technique),
declared here, and those a technique measures, declared in its folder (`TechniqueEntry.figures`).
An epoch stores them all in one JSON object (`epoch_metrics.figures`, and per layer in
`per_layer`); the API, the export, the charts and the paper check list them from `EPOCH_FIGURES`
(backend/specs/techniques.py), so adding a figure is its declaration and the code that measures
it.
"""

from __future__ import annotations

from backend.techniques.entry import Figure

TRAINING_FIGURES: tuple[Figure, ...] = (
    Figure(
        "density_fwd",
        "FWD density",
        "non-zero fraction of the conv/linear layers' inputs (sampled batches)",
    ),
    Figure(
        "density_bwd",
        "BWD density",
        "non-zero fraction of the gradients arriving at the conv/linear layers' outputs, after "
        "any pruning (sampled batches)",
    ),
)
