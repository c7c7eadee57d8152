"""The rows of a run export: every stored fact about a run, flat, one column per leaf.

A CSV needs its header before the first row, so the columns come from the spec models, not from
the runs: `training.<field>` for the training config, `accelerator.<path>` for every leaf of the
accelerator config (e.g. `accelerator.energy.dram`), and `<technique>.<field>` for every knob of
every technique (empty where the run does not use that technique). Lists and values stored by
older versions under names the models no longer have are kept as JSON in `params` and the
nested JSON export; the flat columns are what spreadsheets and data frames read.
"""

from __future__ import annotations

import json
from typing import Any

from backend.analysis.groups import run_group_key
from backend.db.models import Run
from backend.specs.accelerator import AcceleratorConfig
from backend.specs.figures import RUN_MEASURES
from backend.specs.techniques import TECHNIQUES
from backend.specs.training import TrainingConfig

RUN_COLUMNS = [
    "id", "experiment_id", "technique", "model", "dataset", "accelerator_name", "seed",
    "is_baseline", "baseline_hardware", "baseline_run_id", "status", "error", "attempts",
    "created_at", "started_at", "finished_at", "duration_seconds",
    *(measure.key for measure in RUN_MEASURES), "did_not_learn",
    "group", "params", "tags", "notes",
]  # fmt: skip


def _leaves(data: dict[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _technique_columns() -> list[str]:
    columns = []
    for entry in TECHNIQUES:
        defaults = entry.params_model().model_dump()
        name = defaults.pop("name")
        columns += list(_leaves(defaults, f"{name}."))
    return columns


# What an export reads of each run: the stored columns among RUN_COLUMNS, and what the computed
# ones (group, attempts, duration_seconds) and the flat config columns come from; not the
# simulator's summary or anything else no column shows.
SOURCE_COLUMNS = [
    *(Run.__table__.c[name] for name in RUN_COLUMNS if name in Run.__table__.c),
    *(Run.__table__.c[name] for name in ("attempt", "group_key", "training_config",
                                         "accelerator_config", "technique_params")),
]  # fmt: skip
TRAINING_COLUMNS = list(_leaves(TrainingConfig().model_dump(), "training."))
ACCELERATOR_COLUMNS = list(_leaves(AcceleratorConfig().model_dump(), "accelerator."))
TECHNIQUE_COLUMNS = _technique_columns()
EXPORT_COLUMNS = [*RUN_COLUMNS, *TRAINING_COLUMNS, *ACCELERATOR_COLUMNS, *TECHNIQUE_COLUMNS]


def export_row(run: Any) -> dict[str, Any]:
    """One run (a Run, or a row of SOURCE_COLUMNS) as {column: value}, nested configs flattened
    into the export's columns."""
    row = {name: getattr(run, name, None) for name in RUN_COLUMNS}
    row["group"] = getattr(run, "group_key", None) or run_group_key(run)
    row["attempts"] = run.attempt  # 1, or more after retries
    row["duration_seconds"] = (
        (run.finished_at - run.started_at).total_seconds()
        if run.finished_at and run.started_at
        else None
    )
    for name in ("created_at", "started_at", "finished_at"):
        row[name] = row[name].isoformat() if row[name] else None
    row.update(_leaves(run.training_config or {}, "training."))
    row.update(_leaves(run.accelerator_config or {}, "accelerator."))
    for params in run.technique_params or []:
        values = dict(params)
        name = values.pop("name", "")
        row.update(_leaves(values, f"{name}."))
    return row


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """Lists and mappings as JSON; text that a spreadsheet would run as a formula (a custom
    accelerator's name, notes, tags) behind a leading apostrophe, so it shows as text; numbers
    and everything else as the csv module writes them. The JSON export keeps every value."""
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def nested_row(run: Any) -> dict[str, Any]:
    """One run for the JSON export: the run's columns, and its configs as stored."""
    row = {name: value for name, value in export_row(run).items() if name in RUN_COLUMNS}
    row["training_config"] = run.training_config
    row["accelerator_config"] = run.accelerator_config
    row["technique_params"] = run.technique_params
    return row
