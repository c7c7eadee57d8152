"""Does a (paper, preset) row reproduce its paper's speedup? One verdict, read from the row's
95% Student-t intervals over seeds (`backend.analysis.groups.estimate`), used by the papers page
and by `benchmarks/paper_check.py`.

The rules, checked in this order (the first that applies is the verdict):

1. fewer than 2 seeds: "inconclusive (n < 2)", there is no interval to judge;
2. the accuracy change's interval lies below -1 point: "loses accuracy";
3. the speedup's interval lies below 1.05: "no gain";
4. the speedup's interval lies above 1, its lower bound reaches at least sqrt(the paper's
   speedup) (half the paper's gain in log terms) and the accuracy change's interval lies above
   -1 point: "reproduces". The lower bound, not the mean: two seeds at 1.9x and 2.0x have a mean
   of 1.95x but an interval reaching down to 1.31x, and do not show a 2.7x paper's half gain;
5. the speedup's interval lies above 1 otherwise: "partial gain";
6. anything else: "inconclusive".

Open choices, stated: the interval covers the seeds only, not the preset's assumptions (energy
table, bandwidth, formats); a generic preset is judged by the same rule against the paper's
figure, although the paper did not build that array; energy is shown beside the verdict but is
not part of it. Each verdict comes with its reason, in words a reader can check against the row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from backend.analysis.groups import Estimate

ACCURACY_FLOOR = -1.0  # points of accuracy change a technique may lose and still reproduce
NO_GAIN_BELOW = 1.05  # a speedup whose interval lies below this is no gain worth building

Outcome = Literal[
    "inconclusive (n < 2)",
    "loses accuracy",
    "no gain",
    "reproduces",
    "partial gain",
    "inconclusive",
]


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    why: str


def verdict(
    speedup: Estimate | None, accuracy_change: Estimate | None, paper_speedup: float
) -> Verdict:
    """The verdict on one row: its speedup and its accuracy change (points, paired by seed)
    over seeds, against the speedup the paper reports."""
    seeds = 0 if speedup is None or accuracy_change is None else min(speedup.n, accuracy_change.n)
    if speedup is None or accuracy_change is None or seeds < 2:
        return Verdict("inconclusive (n < 2)", f"{seeds} seed(s): no interval to judge")
    assert speedup.ci_low is not None and speedup.ci_high is not None
    assert accuracy_change.ci_low is not None and accuracy_change.ci_high is not None
    if accuracy_change.ci_high < ACCURACY_FLOOR:
        return Verdict(
            "loses accuracy",
            f"accuracy change {_interval(accuracy_change)} pt lies below {ACCURACY_FLOOR:g}",
        )
    if speedup.ci_high < NO_GAIN_BELOW:
        return Verdict("no gain", f"speedup {_interval(speedup)} lies below {NO_GAIN_BELOW:g}")
    half_gain = math.sqrt(paper_speedup)
    if speedup.ci_low > 1:
        if speedup.ci_low >= half_gain and accuracy_change.ci_low > ACCURACY_FLOOR:
            return Verdict(
                "reproduces",
                f"speedup {_interval(speedup)} above 1, lower bound reaches {half_gain:.3g} "
                f"(half of {paper_speedup:g}x in log terms), accuracy change "
                f"{_interval(accuracy_change)} pt above {ACCURACY_FLOOR:g}",
            )
        short = (
            f"lower bound below {half_gain:.3g} (half of {paper_speedup:g}x in log terms)"
            if speedup.ci_low < half_gain
            else f"accuracy change {_interval(accuracy_change)} pt reaches below {ACCURACY_FLOOR:g}"
        )
        return Verdict("partial gain", f"speedup {_interval(speedup)} above 1, {short}")
    return Verdict("inconclusive", f"speedup {_interval(speedup)} includes 1")


def _interval(e: Estimate) -> str:
    return f"[{e.ci_low:.3g}, {e.ci_high:.3g}]"
