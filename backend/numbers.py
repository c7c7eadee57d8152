"""Numbers written for people, the same way by the CLI and the dashboard.

frontend/js/format.js holds the same rules in JavaScript; tests/test_number_format.py feeds one
table of cases to both and compares what they write.

Model: a number is written with a unit that says how to read it.
- Scaled units: a time in seconds ("s") as ns/µs/ms/s/min/h, an energy stored in pJ ("pJ") as
  pJ/nJ/µJ/mJ/J/kJ (and an energy-delay product, "pJ·s", alike), a size in bytes ("bytes")
  as B/KiB/MiB/GiB/TiB, a count ("cycles", "MACs", "words") with k/M/G/T. The step is the
  largest whose factor the value reaches.
- Unscaled: "mm²", a ratio ("×", written "0.998×"), a fraction as per cent ("%", 0.973 ->
  "97.3%"), a difference of fractions in points ("pt", always signed), a plain number ("").
- A lone value has three significant figures, but never loses integer digits (1,024 stays
  1,024), and a whole plain number is written whole (a seed, 16); a plain number below 1e-3
  or from 1e15 up is written in scientific notation ("5.47e-7").
- A mean with an interval (or a spread): the half-width to two significant figures and the mean
  to the same decimal place, both in the unit the larger of the two picks ("171.0 ± 5.5 µJ");
  the mean keeps at most six significant figures.
- Rounding is half away from zero on the number's exact binary value (what JavaScript's
  toFixed and toExponential do); thousands are separated by commas; a missing number is "–".

Open choices: counts are scaled from 1,000 up (a whole count of cycles below that is exact);
"0" of a scaled unit is written in its base step ("0 s"); the minus sign is ASCII.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

MISSING = "–"
# A half-width this small against its mean is floating-point rounding (seeds that measured the
# same value), not a spread: the number is written alone.
ROUNDING_NOISE = 1e-9
SIGNIFICANT = 3
INTERVAL_SIGNIFICANT = 2
MEAN_MAX_SIGNIFICANT = 6


def _count(word: str) -> tuple[tuple[float, str], ...]:
    return ((1, word), (1e3, f"k {word}"), (1e6, f"M {word}"), (1e9, f"G {word}"),
            (1e12, f"T {word}"))  # fmt: skip


# Each scaled unit's steps: (factor in the stored unit, name), smallest first.
SCALES: dict[str, tuple[tuple[float, str], ...]] = {
    "s": ((1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1, "s"), (60, "min"), (3600, "h")),
    "pJ": ((1, "pJ"), (1e3, "nJ"), (1e6, "µJ"), (1e9, "mJ"), (1e12, "J"), (1e15, "kJ")),
    "bytes": ((1, "B"), (1024, "KiB"), (1024**2, "MiB"), (1024**3, "GiB"), (1024**4, "TiB")),
    "pJ·s": ((1, "pJ·s"), (1e3, "nJ·s"), (1e6, "µJ·s"), (1e9, "mJ·s"), (1e12, "J·s")),
    "cycles": _count("cycles"),
    "MACs": _count("MACs"),
    "words": _count("words"),
}
BASE_STEP = {"s": 3}  # the step a zero is written in, where it is not the first
# Written right after the number; every other unit follows a space.
TIGHT = {"×": "×", "%": "%"}
HUNDREDFOLD = ("%", "pt")


def _decimal(value: float) -> Decimal:
    return Decimal(value)  # exact: every float is a finite binary fraction


def _round(value: Decimal, decimals: int) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)


def _exponent(value: Decimal, significant: int) -> int:
    """The decimal exponent of `value` once rounded to `significant` figures (9.996 -> 1)."""
    if value == 0:
        return 0
    exponent = value.adjusted()
    rounded = value.quantize(Decimal(1).scaleb(exponent - significant + 1), ROUND_HALF_UP)
    return rounded.adjusted()


def _decimals(value: float, significant: int) -> int:
    if value == 0:
        return 0
    return max(0, significant - 1 - _exponent(_decimal(abs(value)), significant))


def _fixed(value: float, decimals: int, signed: bool = False) -> str:
    """`value` with `decimals` places, commas between thousands."""
    rounded = _round(_decimal(value), decimals)
    if rounded == 0:
        rounded = abs(rounded)
    text = f"{abs(rounded):,f}"
    if rounded < 0:
        return f"-{text}"
    return f"+{text}" if signed and rounded > 0 else text


def _scientific(value: float, significant: int) -> str:
    exact = _decimal(abs(value))
    exponent = _exponent(exact, significant)
    mantissa = _round(exact.scaleb(-exponent), significant - 1)
    return f"{'-' if value < 0 else ''}{mantissa}e{exponent}"


def _is_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _step(unit: str, magnitude: float) -> tuple[float, str]:
    """The factor and name of the step `magnitude` (in the stored unit) is written in."""
    steps = SCALES[unit]
    if magnitude == 0:
        return steps[BASE_STEP.get(unit, 0)]
    chosen = steps[0]
    for step in steps:
        if magnitude >= step[0]:
            chosen = step
    return chosen


def _with_unit(number: str, unit: str) -> str:
    if not unit:
        return number
    return f"{number}{TIGHT[unit]}" if unit in TIGHT else f"{number} {unit}"


def format_value(value: float | int | None, unit: str = "", signed: bool = False) -> str:
    """One number with its unit, to three significant figures (see the module's rules)."""
    if not _is_number(value):
        return MISSING
    assert value is not None
    number = float(value) * 100 if unit in HUNDREDFOLD else float(value)
    signed = signed or unit == "pt"
    if unit in SCALES:
        factor, name = _step(unit, abs(number))
        scaled = number / factor
        decimals = _decimals(scaled, SIGNIFICANT)
        steps = SCALES[unit]
        following = steps.index((factor, name)) + 1
        # 999.96 ms rounds to 1,000 ms: written as the next step, 1.00 s
        if (
            following < len(steps)
            and abs(float(_round(_decimal(scaled), decimals))) * factor >= (steps[following][0])
        ):
            factor, name = steps[following]
            scaled = number / factor
            decimals = _decimals(scaled, SIGNIFICANT)
        return _with_unit(_fixed(scaled, decimals, signed), name)
    if number != 0 and not unit and (abs(number) < 1e-3 or abs(number) >= 1e15):
        return _scientific(number, SIGNIFICANT)
    whole = not unit and number == int(number)
    return _with_unit(_fixed(number, 0 if whole else _decimals(number, SIGNIFICANT), signed), unit)


def format_estimate(
    mean: float | None, half: float | None, unit: str = "", signed: bool = False
) -> str:
    """A mean ± half-width (of an interval, or a spread), the mean to the half-width's
    precision, both in one unit: "171.0 ± 5.5 µJ", "97.31 ± 0.52%"."""
    if not _is_number(mean):
        return MISSING
    assert mean is not None
    if not _is_number(half) or abs(half) <= ROUNDING_NOISE * abs(mean):
        return format_value(mean, unit, signed)
    assert half is not None
    hundredfold = 100 if unit in HUNDREDFOLD else 1
    centre, spread = float(mean) * hundredfold, abs(float(half)) * hundredfold
    signed = signed or unit == "pt"
    name = unit
    if unit in SCALES:
        factor, name = _step(unit, max(abs(centre), spread))
        centre, spread = centre / factor, spread / factor
    elif not unit and (max(abs(centre), spread) < 1e-3 or max(abs(centre), spread) >= 1e15):
        return f"{_scientific(centre, SIGNIFICANT)} ± {_scientific(spread, INTERVAL_SIGNIFICANT)}"
    decimals = _decimals(spread, INTERVAL_SIGNIFICANT)
    if centre != 0:
        decimals = min(
            decimals, max(0, MEAN_MAX_SIGNIFICANT - 1 - _decimal(abs(centre)).adjusted())
        )
    half_text = _fixed(spread, decimals)
    if _round(_decimal(spread), decimals) == 0:  # far below the mean's sixth figure
        half_text = (
            _scientific(spread, INTERVAL_SIGNIFICANT)
            if not unit and spread < 1e-3
            else _fixed(spread, _decimals(spread, INTERVAL_SIGNIFICANT))
        )
    return _with_unit(f"{_fixed(centre, decimals, signed)} ± {half_text}", name)
