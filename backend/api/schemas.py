"""Response models of the REST API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

T = TypeVar("T")


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


Tag = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]


class AnnotationsIn(BaseModel):
    """Tags and notes of an experiment or a run; a field left out stays as it is."""

    model_config = ConfigDict(extra="forbid")

    tags: list[Tag] | None = Field(
        None, max_length=20, description="short labels, e.g. 'paper-figure-3' (replaces all)"
    )
    notes: str | None = Field(None, max_length=20_000, description="free text (replaces it)")

    @field_validator("tags")
    @classmethod
    def _distinct(cls, tags: list[str] | None) -> list[str] | None:
        return None if tags is None else list(dict.fromkeys(tags))


class RunCounts(BaseModel):
    queued: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    cancelled: int = 0


class ExperimentOut(_Out):
    id: int
    name: str
    status: str
    owner_id: int | None
    team_id: int | None
    created_at: datetime
    finished_at: datetime | None
    spec: dict[str, Any]
    tags: list[str] = Field(default_factory=list)
    notes: str = ""
    run_counts: RunCounts = Field(default_factory=RunCounts)
    total_runs: int = 0
    trainings: int = 0


class ExpansionPreview(BaseModel):
    runs: int = Field(description="runs the spec expands to, baselines included")
    trainings: int = Field(description="distinct trainings (each trains once)")
    baseline_runs: int


class RunMetrics(_Out):
    accuracy: float | None = None
    loss: float | None = None
    total_cycles: int | None = None
    compute_cycles: int | None = None
    stall_cycles: int | None = None
    energy_pj: float | None = None
    macs_algorithmic: int | None = None
    macs_actual: int | None = None
    macs_skipped: int | None = None
    macs_overhead: int | None = None
    dram_bytes: int | None = None
    speedup: float | None = None
    energy_ratio: float | None = None
    did_not_learn: bool | None = Field(
        None, description="test accuracy below chance + the did-not-learn margin (a setting)"
    )


class RunOut(RunMetrics):
    id: int
    experiment_id: int
    training_id: int | None
    baseline_run_id: int | None
    is_baseline: bool
    baseline_hardware: str = Field(
        description="technique run: the baseline it is compared with ('dense': every extension "
        "off; 'same': its own accelerator with only zero-skipping); baseline run: its hardware"
    )
    technique: str
    model: str
    dataset: str
    accelerator_name: str
    seed: int
    status: str
    progress: float
    error: str | None
    attempt: int = Field(description="1, one more for each retry of a failed or cancelled run")
    params: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    tags: list[str]
    notes: str


class LayerOut(_Out):
    position: int
    layer: str
    training_pass: str
    role: str
    macs_algorithmic: int
    macs_actual: int
    macs_skipped: int
    macs_overhead: int
    compute_cycles: int
    stall_cycles: int
    total_cycles: int
    utilization: float
    mapping_efficiency: float
    dram_bytes: int
    energy_pj: float
    details: dict[str, Any]


class EpochOut(_Out):
    epoch: int
    train_loss: float | None
    train_accuracy: float | None
    test_loss: float | None
    test_accuracy: float | None
    hit_rate: float | None
    density_fwd: float | None
    density_bwd: float | None
    gp_fraction: float | None
    cosine_similarity: float | None
    seconds: float | None
    per_layer: dict[str, Any]


class RunAttemptOut(_Out):
    attempt: int
    status: str = Field(description="how the attempt ended: failed or cancelled")
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    worker: str | None = Field(description="host:pid of the worker that last claimed it")
    retried_at: datetime


class RunDetail(RunOut):
    technique_params: list[Any]
    training_config: dict[str, Any]
    accelerator_config: dict[str, Any]
    summary: dict[str, Any] | None
    layers: list[LayerOut]
    epochs: list[EpochOut]
    hit_rate_per_layer: dict[str, list[float | None]] = Field(
        default_factory=dict,
        description="MERCURY: per layer, the share of FWD rows reused in each epoch (None: the "
        "layer did not reuse that epoch); empty for runs without MERCURY",
    )
    attempts: list[RunAttemptOut] = Field(
        default_factory=list,
        description="the run's earlier attempts, oldest first, each ended and then retried; "
        "the current one is the run itself (`attempt`)",
    )
    training_environment: dict[str, Any] | None = Field(
        None,
        description="what its training ran with: PyTorch build, intra-op threads, CPU "
        "instruction set, machine; the same config and seed give bit-identical results only "
        "under the same (None until the training has finished)",
    )


class Page(BaseModel, Generic[T]):
    total: int = Field(description="rows matching the filters, over all pages")
    limit: int
    offset: int
    items: list[T]


class Comparison(BaseModel):
    run_id: int
    baseline_run_id: int | None
    technique: str
    accelerator_name: str
    speedup: float | None = Field(description="baseline cycles / run cycles, same accelerator")
    energy_ratio: float | None = Field(description="run energy / baseline energy")
    accuracy: float | None
    baseline_accuracy: float | None
    accuracy_delta: float | None = Field(description="run accuracy - baseline accuracy")


class EstimateOut(BaseModel):
    n: int = Field(description="runs with this metric")
    mean: float
    sd: float | None = Field(description="sample standard deviation (n - 1), None for n = 1")
    ci_low: float | None = Field(description="95% Student-t interval of the mean, low end")
    ci_high: float | None = Field(description="95% Student-t interval of the mean, high end")


class RunGroup(BaseModel):
    """Runs whose everything but the seed is equal, with each metric's mean and 95% interval."""

    key: str = Field(description="the group key (also the `group` column of the export)")
    technique: str
    model: str
    dataset: str
    accelerator_name: str
    is_baseline: bool
    baseline_hardware: str = Field(description="the baseline its runs are compared with")
    params: dict[str, Any] = Field(description="the swept values of the group, seed left out")
    run_ids: list[int]
    seeds: list[int]
    done: int = Field(description="finished runs")
    did_not_learn: int = Field(description="runs flagged 'did not learn'")
    accuracy: EstimateOut | None
    accuracy_delta: EstimateOut | None = Field(
        description="run accuracy - its own baseline's accuracy (same seed), paired by seed"
    )
    speedup: EstimateOut | None
    energy_ratio: EstimateOut | None


class ParetoPoint(BaseModel):
    run_id: int
    technique: str
    accelerator_name: str
    speedup: float
    accuracy_drop: float
    energy_pj: float
    on_front_2d: bool = Field(description="undominated in (speedup up, accuracy drop down)")
    on_front_3d: bool = Field(description="undominated also counting energy (down)")


class TechniqueOut(BaseModel):
    """One technique of the technique table, as the submit form and the charts read it."""

    name: str = Field(description="the technique's `name` in a spec, e.g. 'mercury'")
    label: str = Field(description="its name for people, e.g. 'MERCURY'")
    params_schema: str = Field(
        description="the OpenAPI component of its knobs (components.schemas), e.g. 'MercuryParams'"
    )
    hardware_extension: str | None = Field(
        description="the accelerator extension its runs switch on (None: it needs none)"
    )
