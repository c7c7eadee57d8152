"""The verdict on a (paper, preset) row, on fixed rows whose answer is known."""

from __future__ import annotations

import pytest

from backend.analysis.groups import Estimate, estimate
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
        (row(1.22, 0.01), row(0.0, 0.2), 1.47, "partial gain"),  # mean 1.22, lower bound 1.21
        (row(1.23, 0.01), row(0.0, 0.2), 1.47, "reproduces"),  # lower bound 1.22
    ],
)
def test_fixed_rows(speedup: Estimate, accuracy: Estimate, paper: float, outcome: str) -> None:
    judged = verdict(speedup, accuracy, paper)
    assert judged.outcome == outcome, judged.why
    assert judged.why


def test_no_runs_is_inconclusive() -> None:
    assert verdict(None, None, 1.97).outcome == "inconclusive (n < 2)"


def test_two_seeds_whose_mean_passes_but_interval_does_not() -> None:
    """1.9x and 2.0x against a 2.7x paper: the mean (1.95x) clears sqrt(2.7) = 1.643, the
    interval of two seeds reaches down to 1.31x, so the claim is not shown."""
    speedup = estimate([1.9, 2.0])
    assert speedup is not None and speedup.ci_low is not None
    assert speedup.mean > 2.7**0.5 > speedup.ci_low
    assert speedup.ci_low == pytest.approx(1.3147, abs=1e-4)
    judged = verdict(speedup, estimate([-0.1, 0.1]), 2.7)
    assert judged.outcome == "partial gain"
    assert "lower bound below 1.64" in judged.why


@pytest.mark.parametrize(
    ("ci_low", "outcome"),
    [
        (2.0, "reproduces"),  # the lower bound exactly at sqrt(4) = 2: reaches it
        (1.999, "partial gain"),  # the same mean, the lower bound just short
        (2.001, "reproduces"),
    ],
)
def test_the_lower_bound_decides_at_the_boundary(ci_low: float, outcome: str) -> None:
    """A 4x paper's half gain is 2x: the mean (2.5x) passes in every row, the lower bound
    alone decides."""
    speedup = Estimate(3, 2.5, 0.3, ci_low, 5.0 - ci_low)
    judged = verdict(speedup, row(0.0, 0.2), 4.0)
    assert judged.outcome == outcome, judged.why
