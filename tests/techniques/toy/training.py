"""The toy technique's training hook: it trains like the baseline and reports its strength as
its figure every epoch."""

from __future__ import annotations

from typing import Any

from backend.training.technique import EpochFigures, Technique


class Toy(Technique):
    name = "toy"

    def __init__(self, params: Any) -> None:
        self.params = params

    def epoch_figures(self) -> EpochFigures:
        return EpochFigures(scalars={"toy_level": self.params.strength})
