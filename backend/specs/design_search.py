"""What a hardware design search asks: which accelerator fields vary, over which values, which
objectives are minimised and which designs are allowed.

A search evaluates designs, not trainings: every design is the `base` accelerator with the
searched fields set, re-simulated on the stored workloads of trainings already done
(backend/sim/design_search.py). Training parameters are therefore not search fields (changing
them needs a new training, which an experiment's sweep does).

Designs are numbered 0..count-1: the grid first (every combination of the finite axes, the
first parameter varying slowest), then `samples` random designs drawn from `seed`. Open choices,
stated:

- Paths are accelerator fields WITHOUT the "accelerator." prefix ("rows",
  "mcache.lookups_per_cycle"); a path with the prefix is refused with the name to write instead.
- "grid" needs finite axes (values, or start/stop/step); "random" draws every axis (a value of a
  finite axis uniformly, an interval uniformly or log-uniformly); "both" is the grid over the
  finite axes (an interval axis keeps the base design's value there) followed by the random
  samples over every axis.
- The search fields are those AcceleratorConfig declares searchable (backend/specs/accelerator.py:
  Hardware). Integer fields (array size, SRAM KiB, unit rates: the int ones) take integer values:
  listed or ranged values must be whole numbers, sampled values are rounded (half to even)
  whatever the axis's `integer`.
- `samples` counts only in "random" and "both" mode.
- Objectives default to all three (time, energy, area): a 3-D front.
- Constraints apply per technique (a design's area and energy depend on the technique's hardware
  and workload); the SRAM bound is on ifmap + filter + ofmap KiB. Infeasible designs are counted,
  not kept.
- A search has at most MAX_CHUNKS chunks: a `chunk_size` that would make more is refused (422
  naming the smallest allowed), and a waiting search recorded under looser bounds fails at its
  start, rather than the chunk size silently raised, so the chunks a user asked for are
  the chunks that run, and a client that wants small chunks learns the bound from the answer.
  The cost a chunk adds is fixed (a message, a claim, a merge under the search's lock), so a
  bound on their count bounds the rows a search's start inserts and the overhead its workers
  pay, whatever the design count. A search recorded before keeps its chunks
  (`DesignSearch.stored`).
"""

from __future__ import annotations

import math
from typing import Any, Literal, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from backend.specs.accelerator import (
    ACCELERATOR_FIELDS,
    PRESETS,
    AcceleratorConfig,
    check_preset,
    hardware,
)
from backend.specs.axes import Scalar, SweepAxis

# The hardware fields a search may vary: those AcceleratorConfig declares searchable (Hardware),
# by dotted path. An int field takes whole values; a Literal field is a choice among its values.
SEARCH_FIELDS: tuple[str, ...] = tuple(
    path for path in ACCELERATOR_FIELDS if hardware(path).searchable
)
INTEGER_FIELDS = frozenset(
    path for path in SEARCH_FIELDS if ACCELERATOR_FIELDS[path].annotation is int
)
CHOICE_FIELDS = frozenset(
    path for path in SEARCH_FIELDS if get_origin(ACCELERATOR_FIELDS[path].annotation) is Literal
)
Objective = Literal["time", "energy", "area"]
# Every design's figures, in this order, with their units: seconds of the whole training, joules
# of the whole training, mm² at 45 nm.
FIGURES: tuple[Objective, ...] = ("time", "energy", "area")
MAX_DESIGNS = 1_000_000
MAX_SAMPLE = 20_000
# Each chunk costs a message, a claim, a lease and a merge under the search's row lock (tens of
# milliseconds of work whatever its size), so a search has at most this many.
MAX_CHUNKS = 1_000
# The validation context of a spec read back from the database (`DesignSearch.stored`).
STORED = {"stored": True}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchConstraints(_Spec):
    """Bounds a design must meet to be kept (each optional)."""

    area_mm2_max: float | None = Field(None, gt=0, description="area at most this (mm², 45 nm)")
    energy_j_max: float | None = Field(
        None, gt=0, description="energy of the whole training at most this (J)"
    )
    sram_kib_max: float | None = Field(
        None, gt=0, description="ifmap + filter + ofmap SRAM at most this (KiB)"
    )


def set_field(data: dict[str, Any], path: str, value: Scalar) -> None:
    """Set the dotted `path` of an accelerator config's dict (model_dump) to `value`."""
    head, _, tail = path.partition(".")
    if tail:
        data[head] = {**data[head], tail: value}
    else:
        data[head] = value


def resolve_base(base: str | AcceleratorConfig) -> AcceleratorConfig:
    return PRESETS[base] if isinstance(base, str) else base


def axis_values(axis: SweepAxis, integer: bool) -> list[Scalar]:
    return axis.finite_values(integer)


def is_finite(axis: SweepAxis) -> bool:
    return axis.low is None


class DesignSearch(_Spec):
    """A search over hardware designs around a base accelerator."""

    base: str | AcceleratorConfig = Field(
        ...,
        description=f"a preset name ({', '.join(PRESETS)}) or a full accelerator config: the "
        "design's fields that are not searched",
    )
    mode: Literal["grid", "random", "both"] = Field(
        "random", description="every grid point, random samples, or the grid then the samples"
    )
    parameters: dict[str, SweepAxis] = Field(
        ...,
        min_length=1,
        description=f"search field -> values; fields: {', '.join(SEARCH_FIELDS)} (no "
        "'accelerator.' prefix)",
    )
    samples: int = Field(
        1000, ge=1, le=MAX_DESIGNS, description="random designs ('random' and 'both' modes)"
    )
    seed: int = Field(0, ge=0, lt=2**63, description="seed of the random designs")
    objectives: list[Objective] = Field(
        default_factory=lambda: list(FIGURES),
        min_length=2,
        max_length=3,
        description="figures minimised together (2 or 3 of time, energy, area)",
    )
    constraints: SearchConstraints = Field(default_factory=SearchConstraints)
    sample_size: int = Field(
        MAX_SAMPLE, ge=0, le=MAX_SAMPLE, description="designs kept beside the fronts (picture)"
    )
    chunk_size: int = Field(
        20_000,
        ge=1,
        le=100_000,
        description=f"designs per chunk a worker evaluates; a search has at most {MAX_CHUNKS:,} "
        f"chunks, so chunk_size is at least the designs / {MAX_CHUNKS:,} (rounded up): a "
        "smaller one is refused, naming the smallest allowed",
    )

    @classmethod
    def stored(cls, spec: dict[str, Any]) -> DesignSearch:
        """A search's spec as stored: read without the bound on its chunk count, which a
        search recorded under looser bounds may exceed (started, it runs to its end; waiting,
        it fails at its start). Every other check applies."""
        return cls.model_validate(spec, context=STORED)

    @field_validator("base")
    @classmethod
    def _known_preset(cls, base: str | AcceleratorConfig) -> str | AcceleratorConfig:
        check_preset(base)
        return base

    @field_validator("objectives")
    @classmethod
    def _distinct(cls, objectives: list[str]) -> list[str]:
        if len(set(objectives)) != len(objectives):
            raise ValueError(f"objectives must be distinct, got {objectives}")
        return objectives

    @model_validator(mode="after")
    def _check_parameters(self, info: ValidationInfo) -> DesignSearch:
        base = self.base_config
        for path, axis in self.parameters.items():
            _check_axis(base, path, axis, self.mode)
        total = self.design_count
        if total > MAX_DESIGNS:
            raise ValueError(
                f"the search has {total:,} designs ({self.grid_size:,} grid points"
                + (f" + {self.samples:,} samples" if self.mode != "grid" else "")
                + f"); at most {MAX_DESIGNS:,}"
            )
        if self.chunk_count > MAX_CHUNKS and not (info.context or {}).get("stored"):
            raise ValueError(
                f"chunk_size {self.chunk_size:,} splits the search's {total:,} designs into "
                f"{self.chunk_count:,} chunks; at most {MAX_CHUNKS:,}: chunk_size at least "
                f"{smallest_chunk_size(total):,}"
            )
        return self

    @property
    def base_config(self) -> AcceleratorConfig:
        return resolve_base(self.base)

    @property
    def grid_axes(self) -> dict[str, list[Scalar]]:
        """The finite axes the grid runs over, with their values (none in 'random' mode)."""
        if self.mode == "random":
            return {}
        return {
            path: axis_values(axis, path in INTEGER_FIELDS)
            for path, axis in self.parameters.items()
            if is_finite(axis)
        }

    @property
    def grid_size(self) -> int:
        if self.mode == "random":
            return 0
        return math.prod(axis.value_count() for axis in self.parameters.values() if is_finite(axis))

    @property
    def random_count(self) -> int:
        return 0 if self.mode == "grid" else self.samples

    @property
    def design_count(self) -> int:
        return self.grid_size + self.random_count

    @property
    def chunk_count(self) -> int:
        return math.ceil(self.design_count / self.chunk_size)


def smallest_chunk_size(designs: int) -> int:
    """The smallest chunk_size that splits `designs` into at most MAX_CHUNKS chunks."""
    return max(1, math.ceil(designs / MAX_CHUNKS))


def _check_axis(base: AcceleratorConfig, path: str, axis: SweepAxis, mode: str) -> None:
    def fail(reason: str) -> None:
        raise ValueError(f"parameter '{path}': {reason}")

    if path.startswith("accelerator."):
        fail(
            f"write '{path.removeprefix('accelerator.')}' (search paths have no "
            "'accelerator.' prefix)"
        )
    if path.split(".")[0] == "training":
        fail(
            "training parameters are not search fields: changing them needs a new training "
            "(an experiment's sweep)"
        )
    if path not in SEARCH_FIELDS:
        fail(f"not a search field; choose one of {', '.join(SEARCH_FIELDS)}")
    if not is_finite(axis) and mode == "grid":
        fail("low/high intervals need mode 'random' or 'both'")
    if path in CHOICE_FIELDS:
        if axis.values is None:
            fail("a choice field takes a list of values")
        candidates: list[Scalar] = list(axis.values)  # type: ignore[arg-type]
    else:
        if axis.values is not None:
            for value in axis.values:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    fail(f"value {value!r} is not a number")
        if is_finite(axis):
            candidates = axis_values(axis, path in INTEGER_FIELDS)
        else:
            candidates = [axis.low, axis.high]  # type: ignore[list-item]
        if path in INTEGER_FIELDS:
            if is_finite(axis):
                for value in candidates:
                    if float(value) != round(float(value)):  # type: ignore[arg-type]
                        fail(f"value {value} is not a whole number ({path} is an integer field)")
            candidates = [round(float(v)) for v in candidates]  # type: ignore[arg-type]
        if candidates:
            candidates = sorted({min(candidates), max(candidates)})  # type: ignore[type-var]
    for value in candidates:
        data = base.model_dump()
        set_field(data, path, value)
        try:
            AcceleratorConfig.model_validate(data)
        except ValidationError as error:
            reasons = "; ".join(e["msg"] for e in error.errors())
            fail(f"value {value!r}: {reasons}")
