"""One axis of a sweep or a design search: the values one field takes (a list, a range, or an
interval to sample), shared by experiment sweeps (backend/specs/experiment.py) and hardware
design searches (backend/specs/design_search.py)."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from backend.specs.titles import field_title

Scalar = float | int | str | bool
# The most values a range (start/stop/step) may have. A sweep's runs and a search's designs
# have their own, smaller bounds; this one keeps a range's count a number that is safe to
# compute and to list, whatever floats it is given.
MAX_RANGE_VALUES = 1_000_000


class SweepAxis(BaseModel):
    """The values one field takes: a list, a range, or (random sampling) an interval."""

    # No NaN or infinity: a bound or step that is not a number has no range and no interval.
    model_config = ConfigDict(
        extra="forbid", field_title_generator=field_title, allow_inf_nan=False
    )

    values: list[Scalar] | None = Field(
        None, min_length=1, max_length=10_000, description="explicit values (grid or random choice)"
    )
    start: float | None = Field(None, description="range start, inclusive")
    stop: float | None = Field(None, description="range stop, inclusive")
    step: float | None = Field(None, gt=0, description="range step")
    low: float | None = Field(None, description="random sampling: lower bound")
    high: float | None = Field(None, description="random sampling: upper bound")
    log: bool = Field(False, description="random sampling: uniform in log space")
    integer: bool = Field(False, description="round sampled or ranged values to integers")

    @model_validator(mode="after")
    def _one_form(self) -> SweepAxis:
        forms = [
            self.values is not None,
            self.start is not None or self.stop is not None or self.step is not None,
            self.low is not None or self.high is not None,
        ]
        if sum(forms) != 1:
            raise ValueError("give exactly one of: values; start/stop/step; low/high")
        if forms[1] and (self.start is None or self.stop is None or self.step is None):
            raise ValueError("a range needs start, stop and step")
        if forms[1] and self.stop < self.start:  # type: ignore[operator]
            raise ValueError("stop must not be below start")
        if forms[1] and self.range_count() is None:
            raise ValueError(
                f"the range from {self.start:g} to {self.stop:g} by step {self.step:g} has more "
                f"than {MAX_RANGE_VALUES:,} values; at most {MAX_RANGE_VALUES:,}: use a larger "
                "step or a narrower range"
            )
        if forms[2]:
            if self.low is None or self.high is None or self.high < self.low:
                raise ValueError("an interval needs low <= high")
            if self.log and self.low <= 0:
                raise ValueError("a log interval needs low > 0")
        return self

    def range_count(self) -> int | None:
        """How many values the range has (it includes its stop, within rounding), or None when
        that is more than MAX_RANGE_VALUES: a span or a span / step beyond the largest float
        (stop - start overflows, or a tiny step) is more, never an error."""
        assert self.start is not None and self.stop is not None and self.step is not None
        steps = (self.stop - self.start) / self.step
        if not math.isfinite(steps) or steps + 1e-9 >= MAX_RANGE_VALUES:
            return None
        return math.floor(steps + 1e-9) + 1

    def value_count(self) -> int:
        """How many values a list or range axis has, without listing them."""
        if self.values is not None:
            return len(self.values)
        count = self.range_count()
        assert count is not None  # the validator refused longer ranges
        return count

    def finite_values(self, integer: bool = False) -> list[Scalar]:
        """The values of a list or range axis (a range includes its stop, within rounding);
        `integer` rounds ranged values to integers as the axis's own `integer` does."""
        if self.values is not None:
            return list(self.values)
        assert self.start is not None
        count = self.value_count()
        values = [self.start + i * self.step for i in range(count)]
        return (
            [round(v) for v in values]
            if self.integer or integer
            else [round(v, 12) for v in values]
        )
