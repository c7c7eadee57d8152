"""The verdict on a (paper, preset) row, on fixed rows whose answer is known."""

from __future__ import annotations

import pytest

from backend.analysis.groups import Estimate
from backend.analysis.verdict import verdict


def row(mean: float, half: float, n: int = 3) -> Estimate:
    """A metric over n seeds with the given 95% half-width."""
    if n < 2:
        return Estimate(n, mean, None, None, None)
    return Estimate(n, mean, half, mean - half, mean + half)


@pytest.mark.parametrize(
    ("speedup", "accuracy", "paper", "outcome"),
    [
        (row(1.008, 0.004), row(-0.1, 0.3), 1.97, "no gain"),  # MERCURY's 1.008x "matched"
        (row(2.18, 0.02), row(-0.2, 0.3), 2.7, "reproduces"),
        (row(1.07, 0.02), row(0.1, 0.4), 1.47, "partial gain"),
        (row(2.18, 0.02, n=1), row(-0.2, 0, n=1), 2.7, "inconclusive (n < 2)"),
        (row(2.18, 0.02), row(-2.5, 0.5), 2.7, "loses accuracy"),
        (row(2.18, 0.02), row(-0.9, 1.63), 2.7, "partial gain"),  # ±1.63 pt reaches below -1
        (row(1.10, 0.2), row(0.0, 0.2), 1.47, "inconclusive"),  # the speedup interval holds 1
        (row(1.20, 0.01), row(0.0, 0.2), 1.47, "partial gain"),  # sqrt(1.47) = 1.212
        (row(1.22, 0.01), row(0.0, 0.2), 1.47, "reproduces"),
    ],
)
def test_fixed_rows(speedup: Estimate, accuracy: Estimate, paper: float, outcome: str) -> None:
    judged = verdict(speedup, accuracy, paper)
    assert judged.outcome == outcome, judged.why
    assert judged.why


def test_no_runs_is_inconclusive() -> None:
    assert verdict(None, None, 1.97).outcome == "inconclusive (n < 2)"
