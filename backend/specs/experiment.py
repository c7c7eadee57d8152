"""What a researcher submits: an experiment, which the server expands into runs.

An experiment names one training config, one or more technique sets, one or more accelerators,
the seeds, and optionally a sweep over any numeric or choice field. The sweep's axes are paths:

- ``training.<field>`` (e.g. ``training.learning_rate``),
- ``accelerator.<field>`` and nested ``accelerator.energy.dram`` (applied to every accelerator),
- ``<technique>.<field>`` (e.g. ``mercury.signature_bits``, applied where that technique runs).

After its trainings an experiment may also run a hardware design search over their stored
workloads (`search`, backend/specs/design_search.py; run by backend/searches/).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from backend.specs.accelerator import PRESETS, AcceleratorConfig, check_preset
from backend.specs.axes import SweepAxis
from backend.specs.design_search import STORED, DesignSearch
from backend.specs.techniques import TechniqueParams
from backend.specs.titles import field_title
from backend.specs.training import TrainingConfig

BaselineHardware = Literal["dense", "same"]

# What a 'same' baseline keeps of its accelerator: the dense training gets the natural
# sparsity (ReLU, pooling) that any zero-skipping array exploits, and nothing else.
SAME_BASELINE_EXTENSIONS = frozenset({"zero_skipping"})


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", field_title_generator=field_title)


class Sweep(_Spec):
    """A grid over every combination, or a seeded random sample of points."""

    mode: Literal["grid", "random"] = Field("grid", description="full grid or random sample")
    samples: int = Field(10, ge=1, le=100_000, description="random mode: points to draw")
    seed: int = Field(0, ge=0, description="random mode: seed of the sampler")
    parameters: dict[str, SweepAxis] = Field(
        default_factory=dict, description="axis path -> values, e.g. 'accelerator.rows'"
    )

    @model_validator(mode="after")
    def _intervals_only_in_random_mode(self) -> Sweep:
        for path, axis in self.parameters.items():
            if self.mode == "grid" and axis.low is not None:
                raise ValueError(f"parameter '{path}': low/high intervals need mode 'random'")
        return self


def _technique_set_kind(value: Any) -> str:
    return "composition" if isinstance(value, list) else "technique"


# A discriminator (rather than a plain union) reports only the errors of the form given, so a
# 422 says "techniques.0.technique.mercury.signature_bits" and nothing about the other form.
TechniqueSet = Annotated[
    Annotated[TechniqueParams, Tag("technique")]
    | Annotated[list[TechniqueParams], Tag("composition")],
    Discriminator(_technique_set_kind),
    Field(description="one technique, or a list of techniques composed in one run"),
]
AcceleratorChoice = Annotated[
    str | AcceleratorConfig,
    Field(description=f"a preset name ({', '.join(PRESETS)}) or a full accelerator config"),
]


class ExperimentSpec(_Spec):
    """An experiment: the cross product of techniques, accelerators, seeds and sweep points."""

    name: str = Field(..., min_length=1, max_length=200, description="shown in tables")
    description: str = Field("", max_length=5000, description="free text")
    team_id: int | None = Field(None, description="share with this team (you must be a member)")
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    techniques: list[TechniqueSet] = Field(
        ..., min_length=1, max_length=50, description="technique sets to compare with baseline"
    )
    accelerators: list[AcceleratorChoice] = Field(
        default_factory=lambda: ["tpu-like"],
        min_length=1,
        max_length=100,
        description="accelerators every training is simulated on",
    )
    seeds: list[int] = Field(
        default_factory=lambda: [0], min_length=1, max_length=100, description="training seeds"
    )
    sweep: Sweep | None = Field(None, description="optional sweep over any field")
    baseline_hardware: BaselineHardware = Field(
        "dense",
        description="what each run's speedup is measured against: 'dense' = the dense training "
        "on the accelerator with every extension off, storing every tensor dense; 'same' = the "
        "dense training on the run's own accelerator with only zero-skipping left on, with its "
        "storage formats (what a technique adds on top of a zero-skipping array)",
    )
    search: DesignSearch | None = Field(
        None,
        description="a hardware design search over the stored workloads of the trainings, run "
        "once they are done: the fronts of time, energy and area per technique",
    )

    @classmethod
    def stored(cls, spec: dict[str, Any]) -> ExperimentSpec:
        """An experiment's spec as stored: its `search` read as `DesignSearch.stored` reads a
        search's (without the bounds a spec recorded before them may exceed)."""
        return cls.model_validate(spec, context=STORED)

    @field_validator("accelerators")
    @classmethod
    def _known_presets(cls, accelerators: list[Any]) -> list[Any]:
        for choice in accelerators:
            check_preset(choice)
        return accelerators

    @field_validator("seeds")
    @classmethod
    def _seeds_in_range(cls, seeds: list[int]) -> list[int]:
        for seed in seeds:
            if not 0 <= seed < 2**31:
                raise ValueError(f"seed {seed} must be in [0, 2^31)")
        return seeds
