"""Baseline: plain backpropagation, every pass dense; nothing to hook."""

from __future__ import annotations

from worker.training.technique import Technique


class Baseline(Technique):
    name = "baseline"
