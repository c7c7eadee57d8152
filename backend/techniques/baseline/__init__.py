"""Baseline: plain backpropagation, every pass dense. The reference every technique is
compared with; it needs no hardware extension and measures nothing of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.techniques.baseline.params import BaselineParams
from backend.techniques.entry import TechniqueEntry

if TYPE_CHECKING:
    from backend.training.technique import Technique


def _training_hook() -> type[Technique]:
    from backend.techniques.baseline.training import Baseline

    return Baseline


TECHNIQUE = TechniqueEntry(
    name="baseline", label="Baseline", params_model=BaselineParams, training_hook=_training_hook
)
