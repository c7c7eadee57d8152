"""The columns a run can be shown, sorted and grouped by: every field of a run row, every
declared measure, the figures derived from them, every training, accelerator and technique
field, and each epoch figure over the training.

Model: a `RunColumn` names a value of a run, its unit for the number formatter
(backend/numbers.py), and the SQL expression that computes it from the stored run, which serves
the list's extra columns, its sort and range filter, and the grouped summary alike (one
definition, so a sorted column and its cells never disagree). Spec fields are read from the
run's JSON configs: their kind (number, text, yes/no) comes from the spec models' annotations,
so a field added to a model is a column at once. An epoch figure has no expression: its value
over the training (`Figure.of_training`) is read from the page's epochs in Python, so it is
shown but not sorted.

Open choices: accelerator fields one level deep (`accelerator.energy.mac_pj`), lists and
deeper models left out; a technique field of a composed run is found by the technique's name
at each place of the composed list; durations are wall-clock, finished minus started.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import Float, case, cast, func, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql.functions import FunctionElement

from backend.api.schemas import RunOut
from backend.db.models import EpochMetric, Run
from backend.specs.accelerator import AcceleratorConfig
from backend.specs.figures import RUN_FIGURES
from backend.specs.techniques import EPOCH_FIGURES, TECHNIQUES
from backend.specs.training import TrainingConfig

Kind = Literal["number", "text", "bool", "time", "list"]
Group = Literal["run", "figure", "epoch figure", "training", "accelerator", "technique"]


@dataclass(frozen=True)
class RunColumn:
    key: str
    label: str
    group: Group
    kind: Kind
    unit: str  # for the number formatter; "" where it is plain or not a number
    description: str
    expression: Any = None  # SQL; None: shown, not sorted (an epoch figure, a list)
    in_row: bool = False  # a field of the run row itself (RunOut), not an extra

    @property
    def sortable(self) -> bool:
        return self.expression is not None

    @property
    def groupable(self) -> bool:
        """A value runs share (a name, a setting), not a measurement or a time."""
        return (
            self.sortable
            and self.group not in ("figure", "epoch figure")
            and self.kind != "time"
            and self.key not in ("id", "progress")
        )


class _Seconds(FunctionElement[float]):
    """`end - start` in seconds (both timestamps)."""

    type = Float()
    inherit_cache = True


@compiles(_Seconds)
def _seconds_sqlite(element: _Seconds, compiler: Any, **kw: Any) -> str:
    end, start = (compiler.process(c, **kw) for c in element.clauses)
    return f"((julianday({end}) - julianday({start})) * 86400.0)"


@compiles(_Seconds, "postgresql")
def _seconds_postgresql(element: _Seconds, compiler: Any, **kw: Any) -> str:
    end, start = (compiler.process(c, **kw) for c in element.clauses)
    return f"EXTRACT(EPOCH FROM ({end} - {start}))"


def _field_kind(annotation: Any) -> Kind | type[BaseModel] | None:
    """How a spec field's value is read: a number, text, yes/no, a nested model, or None
    (lists and the like)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = {_field_kind(a) for a in typing.get_args(annotation) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else None
    if typing.get_origin(annotation) is Literal:
        values = typing.get_args(annotation)
        return "number" if all(isinstance(v, int | float) for v in values) else "text"
    if annotation is bool:
        return "bool"
    if annotation in (int, float):
        return "number"
    if annotation is str:
        return "text"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _read(json_value: Any, kind: Kind) -> Any:
    if kind == "number":
        return json_value.as_float()
    if kind == "bool":
        return json_value.as_boolean()
    return json_value.as_string()


def _spec_columns(
    model: type[BaseModel], prefix: str, group: Group, column: Any, path: tuple[str, ...] = ()
) -> Iterator[RunColumn]:
    for name, field in model.model_fields.items():
        if name in ("name", "seed", "model", "dataset") and not path:
            continue  # shown by the run's own columns
        kind = _field_kind(field.annotation)
        if kind is None:
            continue
        if isinstance(kind, type):
            if not path:  # one level of nested settings
                yield from _spec_columns(kind, prefix, group, column, (name,))
            continue
        key = ".".join((prefix, *path, name))
        where = (*path, name)
        yield RunColumn(
            key=key,
            label=f"{prefix} {' '.join(where).replace('_', ' ')}",
            group=group,
            kind=kind,
            unit="",
            description=field.description or "",
            expression=_read(column[where if path else name], kind),
        )


def _technique_columns() -> Iterator[RunColumn]:
    places = range(len(TECHNIQUES))
    for entry in TECHNIQUES:
        for name, field in entry.params_model.model_fields.items():
            kind = _field_kind(field.annotation)
            if name == "name" or kind not in ("number", "text", "bool"):
                continue
            assert isinstance(kind, str)
            at = [
                (
                    Run.technique_params[(i, "name")].as_string() == entry.name,
                    _read(Run.technique_params[(i, name)], kind),
                )
                for i in places
            ]
            yield RunColumn(
                key=f"{entry.name}.{name}",
                label=f"{entry.label} {name.replace('_', ' ')}",
                group="technique",
                kind=kind,
                unit="",
                description=field.description or "",
                expression=case(*at),
            )


def derived_figures(of_baseline: Callable[[str], Any]) -> dict[str, Any]:
    """The SQL of each figure declared `stored=False` (backend/specs/figures.py);
    `of_baseline(key)` is a stored column of the run's baseline (a baseline run's own)."""
    return {
        "accuracy_delta": Run.accuracy - of_baseline("accuracy"),
        "baseline_stall_share": of_baseline("stall_share"),
        "energy_delay": Run.energy_pj * Run.seconds,  # pJ·s
        "duration": case((Run.status == "done", _Seconds(Run.finished_at, Run.started_at))),
        "dram_words": cast(Run.dram_bytes, Float)
        / func.nullif(Run.accelerator_config["word_bytes"].as_float(), 0),
    }


def _of_baseline(key: str) -> Any:
    """A stored column of the run's baseline, read by a subquery; a baseline run's own."""
    baseline = aliased(Run)
    of_baseline = select(getattr(baseline, key)).where(baseline.id == Run.baseline_run_id)
    return case((Run.is_baseline, getattr(Run, key)), else_=of_baseline.scalar_subquery())


DERIVED = derived_figures(_of_baseline)
assert set(DERIVED) == {m.key for m in RUN_FIGURES if not m.stored}, set(DERIVED)


RUN_FIELDS: dict[str, tuple[str, Kind]] = {
    "id": ("Run", "number"), "experiment_id": ("Experiment", "number"),
    "technique": ("Technique", "text"), "model": ("Model", "text"),
    "dataset": ("Dataset", "text"), "accelerator_name": ("Accelerator", "text"),
    "status": ("Status", "text"), "seed": ("Seed", "number"),
    "is_baseline": ("Baseline run", "bool"), "baseline_hardware": ("Baseline hardware", "text"),
    "attempt": ("Attempt", "number"), "progress": ("Progress", "number"),
    "created_at": ("Created", "time"), "started_at": ("Started", "time"),
    "finished_at": ("Finished", "time"), "did_not_learn": ("Did not learn", "bool"),
    "training_id": ("Training", "number"), "baseline_run_id": ("Baseline run id", "number"),
    "error": ("Reason", "text"), "params": ("Swept values", "list"),
    "tags": ("Tags", "list"), "notes": ("Notes", "text"),
    "iso_area": ("Iso-area dense designs", "text"),
}  # fmt: skip
UNSORTED_FIELDS = ("params", "tags", "notes", "error", "iso_area")


def _all_columns() -> Iterator[RunColumn]:
    for key, (label, kind) in RUN_FIELDS.items():
        yield RunColumn(
            key, label, "run", kind, "%" if key == "progress" else "", "",
            None if key in UNSORTED_FIELDS else getattr(Run, key), in_row=True,
        )  # fmt: skip
    for measure in RUN_FIGURES:
        expression = getattr(Run, measure.key) if measure.stored else DERIVED[measure.key]
        yield RunColumn(
            measure.key, measure.label, "figure", "number", measure.display_unit,
            measure.description, expression, in_row=measure.stored,
        )  # fmt: skip
    owner = {figure.key: entry.label for entry in TECHNIQUES for figure in entry.figures}
    for figure in EPOCH_FIGURES:
        over = "last epoch" if figure.over_training == "last" else "mean over epochs"
        yield RunColumn(
            f"epoch.{figure.key}",
            f"{owner[figure.key] + ' ' if figure.key in owner else ''}{figure.label}",
            "epoch figure", "number", "%" if figure.percent else "",
            f"{figure.description} ({over})",
        )  # fmt: skip
    yield from _spec_columns(TrainingConfig, "training", "training", Run.training_config)
    yield from _spec_columns(
        AcceleratorConfig, "accelerator", "accelerator", Run.accelerator_config
    )
    yield from _technique_columns()


COLUMNS: dict[str, RunColumn] = {column.key: column for column in _all_columns()}
assert set(RunOut.model_fields) <= set(COLUMNS), set(RunOut.model_fields) - set(COLUMNS)


def extra_values(db: Session, run_ids: list[int], keys: list[str]) -> dict[int, dict[str, Any]]:
    """The values of the columns `keys` that are not fields of the run row, per run."""
    out: dict[int, dict[str, Any]] = {run_id: {} for run_id in run_ids}
    wanted = [COLUMNS[key] for key in keys if not COLUMNS[key].in_row]
    computed = [column for column in wanted if column.expression is not None]
    if computed and run_ids:
        query = select(Run.id, *(c.expression.label(c.key) for c in computed))
        for row in db.execute(query.where(Run.id.in_(run_ids))).mappings():
            out[row["id"]].update({c.key: row[c.key] for c in computed})
    figures = [c.key.removeprefix("epoch.") for c in wanted if c.group == "epoch figure"]
    if figures and run_ids:
        trainings = dict(
            db.execute(select(Run.id, Run.training_id).where(Run.id.in_(run_ids))).all()
        )
        epochs: dict[int, list[dict[str, Any]]] = {}
        query = (
            select(EpochMetric.training_id, EpochMetric.figures)
            .where(EpochMetric.training_id.in_({t for t in trainings.values() if t}))
            .order_by(EpochMetric.training_id, EpochMetric.epoch)
        )
        for training_id, stored in db.execute(query):
            epochs.setdefault(training_id, []).append(stored or {})
        declared = {figure.key: figure for figure in EPOCH_FIGURES}
        for run_id, training_id in trainings.items():
            measured = epochs.get(training_id, [])
            for key in figures:
                values = [epoch.get(key) for epoch in measured]
                found = any(v is not None for v in values)
                value = declared[key].of_training(values) if found else None
                out[run_id][f"epoch.{key}"] = value
    return out
