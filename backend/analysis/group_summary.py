"""Runs grouped by one or more columns: how many, and per metric how many runs have it (n), their
mean and sample standard deviation."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from backend.analysis.groups import estimate


class MetricSummary(BaseModel):
    n: int = Field(description="runs of the group that have this metric")
    mean: float | None
    sd: float | None = Field(description="sample standard deviation (n - 1); None below 2 runs")


class GroupSummary(BaseModel):
    value: Any = Field(
        description="the grouping column's value shared by the group's runs (grouped by several "
        "columns: their values, in the order asked)"
    )
    runs: int = Field(description="runs in the group, whatever their status")
    metrics: dict[str, MetricSummary]


def mean_and_sd(values: Sequence[float]) -> MetricSummary:
    found = estimate(values)
    if found is None:
        return MetricSummary(n=0, mean=None, sd=None)
    return MetricSummary(n=found.n, mean=found.mean, sd=found.sd)


def _order(value: Any) -> Any:
    """Numbers by value, then text, then anything else (lists, None) by its text; several
    values place by place."""
    if isinstance(value, tuple):
        return tuple(_order(v) for v in value)
    if isinstance(value, int | float):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, str(value))


def summarise_groups(rows: Iterable[Sequence[Any]], metrics: Sequence[str]) -> list[GroupSummary]:
    """`rows` are (group value, metric values...) in the order of `metrics`, the value a list
    when grouped by several columns; groups come out sorted by value (None last)."""
    grouped: dict[Any, list[Sequence[Any]]] = defaultdict(list)
    for row in rows:
        grouped[tuple(row[0]) if isinstance(row[0], list) else row[0]].append(row[1:])
    out = []
    for value in sorted(grouped, key=_order):
        members = grouped[value]
        out.append(
            GroupSummary(
                value=list(value) if isinstance(value, tuple) else value,
                runs=len(members),
                metrics={
                    name: mean_and_sd([float(r[i]) for r in members if r[i] is not None])
                    for i, name in enumerate(metrics)
                },
            )
        )
    return out
