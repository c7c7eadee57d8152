"""Seeds as statistics: runs that differ only in their seed form a group, summarised by the mean
and a Student-t confidence interval.

The group key is the one definition of "the same design point": a hash of the run's training
config without its seed, its technique settings, its accelerator config (with the extensions the
run uses) and, where a run records it, its baseline hardware. The API's grouped endpoint, the
CSV export's `group` column and the dashboard all use `group_key`; it is computed once, when an
experiment is expanded, and stored with each run (`runs.group_key`, indexed) so that the database
groups by it.

Per group and metric, the interval is mean +- t(1 - alpha/2, n - 1) * s / sqrt(n), s the sample
standard deviation over the runs: the seeds are the samples. A group of one run has a mean but
no interval. The accuracy delta is paired by seed: each run's accuracy minus that of its own
baseline (same training config and seed), so seed-to-seed variation common to both cancels.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

CONFIDENCE = 0.95


def group_key(
    training_config: Mapping[str, Any],
    technique_params: Sequence[Any],
    accelerator_config: Mapping[str, Any],
    baseline_hardware: str | None = None,
) -> str:
    """The key shared by runs whose everything but the seed is equal (32 hex digits)."""
    identity: dict[str, Any] = {
        "training": {k: v for k, v in training_config.items() if k != "seed"},
        "techniques": list(technique_params),
        "accelerator": dict(accelerator_config),
    }
    if baseline_hardware is not None:
        identity["baseline_hardware"] = baseline_hardware
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def run_group_key(run: Any) -> str:
    """`group_key` of a stored run (anything with the run's columns as attributes)."""
    return group_key(
        run.training_config,
        run.technique_params,
        run.accelerator_config,
        run.baseline_hardware,
    )


@dataclass(frozen=True)
class Estimate:
    """A metric over a group's runs: sample size, mean, sample standard deviation and the
    two-sided confidence interval of the mean (None for fewer than two samples)."""

    n: int
    mean: float
    sd: float | None
    ci_low: float | None
    ci_high: float | None


def estimate(values: Sequence[float], confidence: float = CONFIDENCE) -> Estimate | None:
    """Mean and Student-t confidence interval of `values` (None when there are none)."""
    n = len(values)
    if n == 0:
        return None
    return estimate_from(n, statistics.fmean(values), statistics.stdev(values) if n > 1 else None)


def estimate_from(
    n: int, mean: float | None, sd: float | None, confidence: float = CONFIDENCE
) -> Estimate | None:
    """The estimate of `n` values from their mean and sample standard deviation (as a database
    computes them): the Student-t interval is added here."""
    if n == 0 or mean is None:
        return None
    if n == 1 or sd is None:
        return Estimate(n, mean, None, None, None)
    half = t_quantile(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
    return Estimate(n, mean, sd, mean - half, mean + half)


@lru_cache(maxsize=1024)
def t_quantile(p: float, dof: int) -> float:
    """Student t's p-quantile with `dof` degrees of freedom. Remembered: a page of groups asks
    the same few seed counts again and again, and scipy takes about 0.2 ms each time."""
    from scipy import stats  # imported when first needed: expansion uses this module too

    return float(stats.t.ppf(p, dof))
