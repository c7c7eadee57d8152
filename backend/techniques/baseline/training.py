"""Baseline: plain backpropagation, every pass dense; nothing to hook."""

from __future__ import annotations

from backend.techniques.baseline.params import BaselineParams
from backend.training.technique import Technique


class Baseline(Technique):
    name = "baseline"

    def __init__(self, params: BaselineParams) -> None:
        self.params = params
