"""Runs grouped by `group_key` (all but the seed equal), each metric as a mean with its
confidence interval; only runs the user may see, filtered like the run list."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sqlalchemy import case
from sqlalchemy.orm import Session, aliased

from backend.analysis.groups import estimate, group_key
from backend.api.run_query import RunFilters, filtered_runs
from backend.api.schemas import EstimateOut, RunGroup
from backend.db.models import Run, User

_COLUMNS = (
    Run.id, Run.seed, Run.technique, Run.model, Run.dataset, Run.accelerator_name,
    Run.is_baseline, Run.status, Run.params, Run.training_config, Run.technique_params,
    Run.accelerator_config, Run.accuracy, Run.speedup, Run.energy_ratio, Run.did_not_learn,
    Run.baseline_hardware, Run.seconds, Run.seconds_per_step, Run.energy_pj, Run.area_mm2,
)  # fmt: skip


def run_groups(db: Session, user: User, filters: RunFilters) -> list[RunGroup]:
    """Groups of the visible runs matching the filters, in the order of their first run."""
    baseline = aliased(Run)
    # A baseline run is its own reference: accuracy delta 0.
    reference_accuracy = case((Run.is_baseline, Run.accuracy), else_=baseline.accuracy)
    columns = [*_COLUMNS, reference_accuracy.label("reference_accuracy")]
    query = (
        filtered_runs(db, user, filters, columns[0])
        .add_columns(*columns[1:])
        .outerjoin(baseline, baseline.id == Run.baseline_run_id)
        .order_by(Run.id)
    )
    members: dict[str, list[Any]] = defaultdict(list)
    for row in db.execute(query).mappings():
        key = group_key(
            row["training_config"],
            row["technique_params"],
            row["accelerator_config"],
            row["baseline_hardware"],
        )
        members[key].append(row)
    return [_summary(key, rows) for key, rows in members.items()]


def _estimate(values: Sequence[float | None]) -> EstimateOut | None:
    found = estimate([v for v in values if v is not None])
    return EstimateOut(**asdict(found)) if found is not None else None


def _summary(key: str, rows: list[Any]) -> RunGroup:
    first = rows[0]
    done = [row for row in rows if row["status"] == "done"]
    deltas = [
        row["accuracy"] - row["reference_accuracy"]
        for row in done
        if row["accuracy"] is not None and row["reference_accuracy"] is not None
    ]
    return RunGroup(
        key=key,
        technique=first["technique"],
        model=first["model"],
        dataset=first["dataset"],
        accelerator_name=first["accelerator_name"],
        is_baseline=first["is_baseline"],
        baseline_hardware=first["baseline_hardware"],
        params={k: v for k, v in first["params"].items() if k != "seed"},
        run_ids=[row["id"] for row in rows],
        seeds=[row["seed"] for row in rows],
        done=len(done),
        did_not_learn=sum(1 for row in rows if row["did_not_learn"]),
        accuracy=_estimate([row["accuracy"] for row in done]),
        accuracy_delta=_estimate(deltas),
        speedup=_estimate([row["speedup"] for row in done]),
        energy_ratio=_estimate([row["energy_ratio"] for row in done]),
        seconds=_estimate([row["seconds"] for row in done]),
        seconds_per_step=_estimate([row["seconds_per_step"] for row in done]),
        energy_pj=_estimate([row["energy_pj"] for row in done]),
        energy_delay=_estimate([_energy_delay(row) for row in done]),
        area_mm2=_estimate([row["area_mm2"] for row in done]),
    )


def _energy_delay(row: Any) -> float | None:
    """Energy-delay product (pJ·s) of one run, None without both."""
    if row["energy_pj"] is None or row["seconds"] is None:
        return None
    return float(row["energy_pj"]) * float(row["seconds"])
