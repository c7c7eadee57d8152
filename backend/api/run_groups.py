"""Runs grouped by `group_key` (all but the seed equal), each metric as a mean with its
confidence interval; only runs the user may see, filtered like the run list.

Model: the database does the grouping. Each run stores its group key (`runs.group_key`,
indexed, computed at expansion), and one GROUP BY over the visible, filtered runs gives per
group and metric n, the mean and the sample standard deviation of the finished runs' values;
the Student-t interval is added in Python (`backend.analysis.groups.estimate_from`). A second
query reads only (group key, id, seed) of the same runs in id order for each group's run ids
and seeds, a third the describing columns of each group's first run, and a fourth the iso-area
designs of each group's first run that has them. Nothing reads the runs' JSON configs.
tests/pipeline/test_run_groups.py checks the answers against the Python reference (`estimate`
over each group's values) on random groups, on both databases.

Open choices: on PostgreSQL `avg` and `stddev_samp` in one hashed pass; SQLite has no standard
deviation, so there the mean is a window average over the group and the squared deviations from
it are summed in a second pass (sd = sqrt(ss / (n - 1)), taken in Python: SQLite may lack sqrt);
a one-pass sum of squares minus n * mean^2 would lose precision. The member lists come from a
narrow query rather than `array_agg`, which SQLite lacks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict
from typing import Any

from sqlalchemy import ColumnElement, and_, case, func, select
from sqlalchemy.orm import Session, aliased

from backend.analysis.groups import estimate_from
from backend.api.access import Viewer
from backend.api.run_columns import derived_figures
from backend.api.run_query import RunFilters, filtered_runs
from backend.api.schemas import EstimateOut, RunGroup
from backend.db.models import Run
from backend.specs.figures import SUMMARISED

DESCRIBING = (
    Run.id,
    Run.technique,
    Run.model,
    Run.dataset,
    Run.accelerator_name,
    Run.is_baseline,
    Run.baseline_hardware,
    Run.params,
)
METRICS = tuple(measure.key for measure in SUMMARISED)

# A finished run's id where it has iso-area designs (NULL otherwise): each group's first is read.
ISO_AREA_RUN = case((and_(Run.status == "done", Run.iso_area_speedup.is_not(None)), Run.id))


def _metric_values(baseline: Any) -> dict[str, ColumnElement[Any]]:
    """Each summarised figure of a finished run (NULL for the others); `baseline` is the run's
    baseline, joined, for the derived ones (a baseline run is its own reference: its accuracy
    delta is 0)."""
    done = Run.status == "done"
    derived = derived_figures(
        lambda key: case((Run.is_baseline, getattr(Run, key)), else_=getattr(baseline, key))
    )
    return {
        m.key: case((done, getattr(Run, m.key) if m.stored else derived[m.key])) for m in SUMMARISED
    }


def run_groups(db: Session, user: Viewer, filters: RunFilters) -> list[RunGroup]:
    """Groups of the visible runs matching the filters, in the order of their first run."""
    baseline = aliased(Run)
    values = _metric_values(baseline)
    key = Run.group_key
    runs = filtered_runs(db, user, filters, key.label("key")).outerjoin(
        baseline, baseline.id == Run.baseline_run_id
    )
    counts = [
        func.min(Run.id).label("first"),
        func.sum(case((Run.status == "done", 1), else_=0)).label("done"),
        func.sum(case((Run.did_not_learn.is_(True), 1), else_=0)).label("did_not_learn"),
        func.min(ISO_AREA_RUN).label("iso_first"),
    ]
    if db.get_bind().dialect.name == "postgresql":
        # One pass, hashed by key; PostgreSQL's float8 avg and stddev_samp are accurate
        # (Youngs-Cramer), not a sum of squares minus n * mean^2.
        query = runs.add_columns(
            *counts,
            *(func.count(value).label(f"{name}_n") for name, value in values.items()),
            *(func.avg(value).label(f"{name}_mean") for name, value in values.items()),
            *(func.stddev_samp(value).label(f"{name}_sd") for name, value in values.items()),
        ).group_by(key)
        summaries = db.execute(query.order_by(func.min(Run.id))).mappings().all()
    else:
        summaries = _two_pass(db, runs, values)
    if not summaries:
        return []

    members: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for group, run_id, seed in db.execute(
        filtered_runs(db, user, filters, key).add_columns(Run.id, Run.seed).order_by(Run.id)
    ):
        members[group].append((run_id, seed))
    firsts = {
        row["id"]: row
        for row in db.execute(
            select(*DESCRIBING).where(Run.id.in_([s["first"] for s in summaries]))
        ).mappings()
    }
    iso_ids = [summary["iso_first"] for summary in summaries if summary["iso_first"]]
    iso_areas = dict(db.execute(select(Run.id, Run.iso_area).where(Run.id.in_(iso_ids))).all())
    return [
        _group(
            summary,
            firsts[summary["first"]],
            members[summary["key"]],
            iso_areas.get(summary["iso_first"]),
        )
        for summary in summaries
    ]


def _two_pass(db: Session, runs: Any, values: dict[str, ColumnElement[Any]]) -> list[Any]:
    """The group figures where the database has no accurate standard deviation (SQLite): the
    mean as a window average over the group, then the squared deviations from it summed."""
    rows = runs.add_columns(
        Run.id.label("id"),
        case((Run.status == "done", 1), else_=0).label("done"),
        case((Run.did_not_learn.is_(True), 1), else_=0).label("did_not_learn"),
        ISO_AREA_RUN.label("iso_id"),
        *(value.label(name) for name, value in values.items()),
        *(
            func.avg(value).over(partition_by=Run.group_key).label(f"{name}_mean")
            for name, value in values.items()
        ),
    ).subquery()
    spread = {name: rows.c[name] - rows.c[f"{name}_mean"] for name in METRICS}
    summaries = db.execute(
        select(
            rows.c.key,
            func.min(rows.c.id).label("first"),
            func.sum(rows.c.done).label("done"),
            func.sum(rows.c.did_not_learn).label("did_not_learn"),
            func.min(rows.c.iso_id).label("iso_first"),
            *(func.count(rows.c[name]).label(f"{name}_n") for name in METRICS),
            *(func.max(rows.c[f"{name}_mean"]).label(f"{name}_mean") for name in METRICS),
            *(func.sum(spread[name] * spread[name]).label(f"{name}_ss") for name in METRICS),
        )
        .group_by(rows.c.key)
        .order_by(func.min(rows.c.id))
    ).mappings()
    out = []
    for summary in summaries:
        row = dict(summary)
        for name in METRICS:
            n, ss = int(row[f"{name}_n"]), row.pop(f"{name}_ss")
            row[f"{name}_sd"] = math.sqrt(max(float(ss), 0.0) / (n - 1)) if n > 1 else None
        out.append(row)
    return out


def _estimate(summary: Any, name: str) -> EstimateOut | None:
    n = int(summary[f"{name}_n"])
    sd = summary[f"{name}_sd"]
    sd = float(sd) if n > 1 and sd is not None else None
    mean = summary[f"{name}_mean"]
    found = estimate_from(n, float(mean) if mean is not None else None, sd)
    return EstimateOut(**asdict(found)) if found is not None else None


def _group(
    summary: Any, first: Any, runs: list[tuple[int, int]], iso_area: dict[str, Any] | None
) -> RunGroup:
    return RunGroup(
        key=summary["key"],
        technique=first["technique"],
        model=first["model"],
        dataset=first["dataset"],
        accelerator_name=first["accelerator_name"],
        is_baseline=first["is_baseline"],
        baseline_hardware=first["baseline_hardware"],
        params={k: v for k, v in first["params"].items() if k != "seed"},
        run_ids=[run_id for run_id, _ in runs],
        seeds=[seed for _, seed in runs],
        done=int(summary["done"]),
        did_not_learn=int(summary["did_not_learn"]),
        iso_area=iso_area,
        **{name: _estimate(summary, name) for name in METRICS},
    )
