"""Response models of the REST API.

The models of a run's, a layer-pass's and an epoch's figures are built from their declarations
(backend/specs/figures.py and each technique's folder): a figure declared there is served here,
under its key, with its description and unit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    computed_field,
    create_model,
    field_validator,
    model_validator,
)

from backend.specs.figures import LAYER_MEASURES, RUN_MEASURES, SUMMARISED, Measure
from backend.specs.techniques import EPOCH_FIGURES

T = TypeVar("T")


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


OutT = TypeVar("OutT", bound=BaseModel)


class _RowWith:
    """A row whose attributes are read from `values` first: a row seen with the fields of an
    answer that are not its columns."""

    def __init__(self, row: object, values: dict[str, Any]) -> None:
        self._row, self._values = row, values

    def __getattr__(self, name: str) -> Any:
        return self._values[name] if name in self._values else getattr(self._row, name)


def from_row(schema: type[OutT], row: object, **values: Any) -> OutT:
    """The answer `schema` validated from an ORM row's attributes (`from_attributes`), with
    `values` for its fields that the row has not (counts, what the caller may do with it)."""
    return schema.model_validate(_RowWith(row, values), from_attributes=True)


def _described(measure: Measure) -> str:
    return f"{measure.description} ({measure.unit})" if measure.unit else measure.description


def _measures_model(name: str, measures: tuple[Measure, ...], optional: bool) -> type[_Out]:
    """A model with one field per measure (None until a run is done, where `optional`)."""
    fields: dict[str, Any] = {
        m.key: (m.kind | None, Field(None, description=_described(m)))
        if optional
        else (m.kind, Field(description=_described(m)))
        for m in measures
    }
    return create_model(name, __base__=_Out, **fields)


RunMeasuresOut = _measures_model("RunMeasuresOut", RUN_MEASURES, optional=True)
LayerMeasuresOut = _measures_model("LayerMeasuresOut", LAYER_MEASURES, optional=False)


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


class ProgressOut(BaseModel):
    """How far an open run has got (backend/experiments/progress.py)."""

    fraction: float = Field(description="of the run done, 0..1 (its training, then simulation)")
    epoch: int = Field(description="epochs of its training measured so far")
    epochs: int | None = Field(description="epochs its training trains")
    seconds_left: float | None = Field(
        description="estimated from the wall time of its measured epochs, s (None until the "
        "first epoch is measured)"
    )


class ExperimentProgressOut(_Out):
    """How far an experiment has got (backend/experiments/progress.py)."""

    fraction: float = Field(description="mean over its runs, a finished run counted whole")
    running: int = Field(description="trainings running now")
    seconds_left: float | None = Field(
        description="estimated from the epochs measured so far, s (None until one is)"
    )


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
    trainings: int = 0
    progress: ExperimentProgressOut | None = Field(
        None, description="fraction done and time left (one experiment's page, not the list)"
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_runs(self) -> int:
        """its runs, whatever their status"""
        return sum(self.run_counts.model_dump().values())


class ExpansionPreview(BaseModel):
    runs: int = Field(description="runs the spec expands to, baselines included")
    trainings: int = Field(description="distinct trainings (each trains once)")
    baseline_runs: int


class RunMetrics(RunMeasuresOut):  # type: ignore[misc,valid-type]
    did_not_learn: bool | None = Field(
        None, description="test accuracy below chance + the did-not-learn margin (a setting)"
    )


class DenseDesignOut(BaseModel):
    """A dense design of a run's iso-area family (backend/sim/iso_area.py) and what the run's
    baseline training costs on it."""

    rows: int
    cols: int
    ifmap_sram_kib: int
    filter_sram_kib: int
    ofmap_sram_kib: int
    area_mm2: float = Field(description="its area at the run's node, mm²")
    seconds: float = Field(description="the baseline's training on it, s")
    energy_pj: float = Field(description="the baseline's training on it, pJ")


class IsoAreaOut(BaseModel):
    """The dense designs behind a run's iso-area measures: extensions off, dense storage, the
    run's clock, dataflow, word size and node; rows, columns and SRAMs varied over a grid."""

    area_budget_mm2: float = Field(description="the run's area, extensions included, mm²")
    candidates: int = Field(description="designs in the family")
    within_area: int = Field(description="of them, those of equal or smaller area")
    fastest: DenseDesignOut = Field(description="the one the iso-area speedup compares with")
    lowest_energy: DenseDesignOut = Field(
        description="the one the iso-area energy ratio compares with"
    )


class RunOut(RunMetrics):
    id: int
    experiment_id: int
    training_id: int | None
    baseline_run_id: int | None
    is_baseline: bool
    baseline_hardware: str = Field(
        description="technique run: the baseline it is compared with ('dense': every extension "
        "off, every tensor stored dense; 'same': its own accelerator with only zero-skipping and "
        "its storage formats); baseline run: its hardware"
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
    iso_area: IsoAreaOut | None = Field(
        None, description="the dense designs of equal or smaller area it is compared with"
    )


class RunRow(RunOut):
    """A run as the list shows it, with the extra columns asked for."""

    columns: dict[str, Any] = Field(
        default_factory=dict, description="the values of the extra columns asked for (column=)"
    )


class RunColumnOut(_Out):
    """A column the run list can show, sort and group by (backend/api/run_columns.py)."""

    key: str
    label: str
    group: str = Field(description="run, figure, epoch figure, training, accelerator or technique")
    kind: str = Field(description="number, text, bool, time or list")
    unit: str = Field(description="how its numbers read: s, pJ, bytes, cycles, ×, %, pt, ...")
    description: str
    sortable: bool
    groupable: bool
    in_row: bool = Field(description="a field of the run row itself; else in its `columns`")


class LayerOut(LayerMeasuresOut):  # type: ignore[misc,valid-type]
    position: int
    layer: str
    training_pass: str
    role: str
    details: dict[str, Any]


class _EpochBase(_Out):
    epoch: int
    train_loss: float | None
    train_accuracy: float | None
    test_loss: float | None
    test_accuracy: float | None
    seconds: float | None = Field(description="wall time of the epoch's training batches, s")
    wall_seconds: float | None = Field(
        None, description="wall time of the whole epoch, evaluation included, s"
    )
    per_layer: dict[str, Any] = Field(description="per layer, its figures under the same keys")

    @model_validator(mode="before")
    @classmethod
    def _spread_figures(cls, data: Any) -> Any:
        """A stored epoch's figures (one JSON object) become fields of their own."""
        if isinstance(data, dict):
            return {**data, **(data.get("figures") or {})}
        fields = {name: getattr(data, name) for name in cls.model_fields if hasattr(data, name)}
        return {**fields, **(getattr(data, "figures", None) or {})}


EpochOut = create_model(
    "EpochOut",
    __base__=_EpochBase,
    **{
        figure.key: (float | None, Field(None, description=figure.description))
        for figure in EPOCH_FIGURES
    },  # type: ignore[call-overload]
)


class FigureOut(BaseModel):
    """A figure a training measures per epoch, as declared (backend/specs/figures.py and each
    technique's folder)."""

    key: str
    label: str
    description: str
    percent: bool = Field(description="a fraction, shown in per cent")
    technique: str | None = Field(description="the technique that measures it (None: every run)")


class MeasureOut(BaseModel):
    """A figure a run (or one layer-pass of it) is judged by, as backend/specs/figures.py
    declares it: stored as a column of its own, or derived from stored ones."""

    key: str
    label: str = Field(description="its name for people")
    unit: str = Field(description="the unit it is stored in ('' a ratio or a fraction)")
    display_unit: str = Field(
        description="the unit it is written in (backend/numbers.py): '×' a ratio, '%' a "
        "fraction in per cent, 'pt' a difference of fractions, else `unit`"
    )
    description: str
    per_run: bool
    per_layer: bool
    stored: bool = Field(description="a column of its own; else computed from stored ones")
    total: Literal["sum", "max", "derived"] = Field(
        description="a layer-pass measure's run total: the sum or the largest of the "
        "layer-passes' values, or derived from other totals"
    )
    summarised: bool = Field(description="shown by the group summaries (mean over runs)")
    higher_is_better: bool


class FiguresOut(BaseModel):
    epoch: list[FigureOut]
    measures: list[MeasureOut]


class RunAttemptOut(_Out):
    attempt: int
    status: str = Field(description="how the attempt ended: failed or cancelled")
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    worker: str | None = Field(
        description="host:pid of the worker that last claimed it (shown to those who may edit "
        "the run, and administrators; null for team viewers)"
    )
    retried_at: datetime


class RunDetail(RunOut):
    technique_params: list[Any]
    training_config: dict[str, Any]
    accelerator_config: dict[str, Any]
    summary: dict[str, Any] | None
    layers: list[LayerOut]
    epochs: list[EpochOut]
    figures_per_layer: dict[str, dict[str, list[float | None]]] = Field(
        default_factory=dict,
        description="per epoch figure measured per layer (e.g. MERCURY's hit_rate), each layer's "
        "value in every epoch (None: not measured that epoch, e.g. reuse switched off)",
    )
    attempts: list[RunAttemptOut] = Field(
        default_factory=list,
        description="the run's earlier attempts, oldest first, each ended and then retried; "
        "the current one is the run itself (`attempt`)",
    )
    live: ProgressOut | None = Field(
        None, description="epoch, fraction and time left while the run is queued or running"
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


class _RunGroup(BaseModel):
    """Runs whose everything but the seed is equal, with each summarised figure's mean and 95%
    interval (the fields of `RunGroup`, one per figure declared `summarised`)."""

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
    iso_area: IsoAreaOut | None = Field(
        None,
        description="the dense designs of the group's first run that has them (its seeds share "
        "the area budget, and a dense design costs their baselines' trainings alike)",
    )


RunGroup = create_model(
    "RunGroup",
    __base__=_RunGroup,
    __doc__=_RunGroup.__doc__,
    **{m.key: (EstimateOut | None, Field(None, description=_described(m))) for m in SUMMARISED},  # type: ignore[call-overload]
)


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
