"""Filtering and sorting of runs, shared by the list, Pareto and export endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import HTTPException, Query
from fastapi.exceptions import RequestValidationError
from sqlalchemy import Select, String, and_, cast, or_, select
from sqlalchemy.orm import Session

from backend.api.access import Viewer, run_visible_to
from backend.api.run_columns import COLUMNS
from backend.db.models import Experiment, Run

# Every column with an SQL expression (backend/api/run_columns.py) sorts; the numeric ones also
# filter by range.
SORTABLE = {key: column.expression for key, column in COLUMNS.items() if column.sortable}
METRICS = {key for key, column in COLUMNS.items() if column.sortable and column.kind == "number"}


@dataclass
class RunFilters:
    experiment_id: list[int]
    technique: list[str]
    model: list[str]
    dataset: list[str]
    status: list[str]
    accelerator: list[str]
    is_baseline: bool | None
    param: list[str]
    range: list[str]
    sort: str
    q: str = ""
    run_id: tuple[int, ...] = ()  # only these runs (a shared dashboard's); empty: any

    def where(self) -> list[Any]:
        clauses: list[Any] = []
        for column, values in (
            (Run.experiment_id, self.experiment_id),
            (Run.technique, self.technique),
            (Run.model, self.model),
            (Run.dataset, self.dataset),
            (Run.status, self.status),
            (Run.accelerator_name, self.accelerator),
        ):
            if values:
                clauses.append(column.in_(values))
        if self.is_baseline is not None:
            clauses.append(Run.is_baseline.is_(self.is_baseline))
        clauses.extend(_param_clause(item) for item in self.param)
        clauses.extend(_range_clause(item) for item in self.range)
        if self.q.strip():
            clauses.append(_search_clause(self.q.strip()))
        if self.run_id:
            clauses.append(Run.id.in_(self.run_id))
        return clauses

    def order_by(self) -> list[Any]:
        order = []
        for raw in filter(None, (part.strip() for part in self.sort.split(","))):
            name = raw.lstrip("-+")
            if name not in SORTABLE:
                raise HTTPException(
                    422, f"sort: unknown column '{name}'; sortable: {', '.join(sorted(SORTABLE))}"
                )
            column = SORTABLE[name]
            ordered = column.desc() if raw.startswith("-") else column.asc()
            # NULLS LAST keeps unfinished runs at the end; on NOT NULL columns it would only
            # stop the database from walking an index.
            nullable = getattr(getattr(column, "expression", column), "nullable", True)
            order.append(ordered.nulls_last() if nullable else ordered)
        order.append(Run.id.asc())
        return order


def _param_clause(item: str) -> Any:
    path, sep, value = item.partition(":")
    if not sep or not path:
        raise HTTPException(422, f"param: '{item}' must look like 'path:value'")
    field = Run.params[path]
    try:
        number = float(value)
    except ValueError:
        if value.lower() in ("true", "false"):
            return field.as_boolean().is_(value.lower() == "true")
        return field.as_string() == value
    return field.as_float() == number


SEARCHED_EXPERIMENT = (Experiment.name, Experiment.notes, cast(Experiment.tags, String))
SEARCHED_RUN = (
    Run.notes,
    cast(Run.tags, String),
    Run.technique,
    Run.model,
    Run.dataset,
    Run.accelerator_name,
)


def _search_clause(text: str) -> Any:
    """Runs whose experiment name, tags, notes, technique, model, data set or accelerator
    contain every word of `text`, ignoring case."""
    words = []
    for word in text.split():
        pattern = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        experiments = select(Experiment.id).where(
            or_(*(column.ilike(pattern, escape="\\") for column in SEARCHED_EXPERIMENT))
        )
        words.append(
            or_(
                Run.experiment_id.in_(experiments),
                *(column.ilike(pattern, escape="\\") for column in SEARCHED_RUN),
            )
        )
    return and_(*words)


def _range_clause(item: str) -> Any:
    parts = item.split(":")
    if len(parts) != 3 or parts[0] not in METRICS:
        raise HTTPException(
            422,
            f"range: '{item}' must look like 'metric:min:max' (either bound may be empty) "
            f"with metric one of {', '.join(sorted(METRICS))}",
        )
    column = SORTABLE[parts[0]]
    clauses = []
    try:
        if parts[1]:
            clauses.append(column >= float(parts[1]))
        if parts[2]:
            clauses.append(column <= float(parts[2]))
    except ValueError as exc:
        raise HTTPException(422, f"range: bounds of '{item}' must be numbers") from exc
    return and_(*clauses) if clauses else and_(True)


async def run_filters(
    experiment_id: Annotated[list[int], Query(description="only these experiments")] = [],  # noqa: B006
    technique: Annotated[list[str], Query(description="e.g. mercury, mercury+sparsetrain")] = [],  # noqa: B006
    model: Annotated[list[str], Query(description="model names")] = [],  # noqa: B006
    dataset: Annotated[list[str], Query(description="data set names")] = [],  # noqa: B006
    status: Annotated[
        list[str], Query(description="queued, running, done, failed, cancelled")
    ] = [],  # noqa: B006
    accelerator: Annotated[list[str], Query(description="accelerator names")] = [],  # noqa: B006
    is_baseline: Annotated[bool | None, Query(description="only baselines, or none")] = None,
    param: Annotated[
        list[str], Query(description="swept value, 'path:value', e.g. 'mercury.signature_bits:16'")
    ] = [],  # noqa: B006
    range: Annotated[
        list[str], Query(description="metric range 'metric:min:max', e.g. 'speedup:1.2:'")
    ] = [],  # noqa: B006
    sort: Annotated[str, Query(description="comma-separated columns, '-' for descending")] = "-id",
    q: Annotated[
        str,
        Query(
            max_length=200,
            description="words to find (all of them, any case) in the experiment's name, tags "
            "and notes, the run's tags and notes, technique, model, data set and accelerator",
        ),
    ] = "",
) -> RunFilters:
    # async, doing no I/O: FastAPI then calls it on the event loop, not through a thread hop
    texts = {"technique": technique, "model": model, "dataset": dataset, "status": status}
    texts |= {"accelerator": accelerator, "param": param, "range": range, "sort": [sort], "q": [q]}
    errors = [
        {"type": "string_nul", "loc": ("query", name), "msg": "must not contain a NUL character"}
        for name, values in texts.items()
        if any("\x00" in value for value in values)
    ]
    if errors:
        raise RequestValidationError(errors)
    return RunFilters(
        experiment_id,
        technique,
        model,
        dataset,
        status,
        accelerator,
        is_baseline,
        param,
        range,
        sort,
        q,
    )


def filtered_runs(
    db: Session, viewer: Viewer, filters: RunFilters, entity: Any = Run
) -> Select[tuple[Any]]:
    """The visible runs matching the filters, selecting `entity` (the Run, or some columns)."""
    return select(entity).select_from(Run).where(run_visible_to(viewer), *filters.where())
