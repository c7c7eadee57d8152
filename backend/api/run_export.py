"""The rows of a run export: every stored fact about a run, flat, one column per leaf.

A CSV needs its header before the first row, so the columns come from the spec models, not from
the runs: `training.<field>` for the training config, `accelerator.<path>` for every leaf of the
accelerator config (e.g. `accelerator.energy.dram`), and `<technique>.<field>` for every knob of
every technique (empty where the run does not use that technique). Lists and values stored by
older versions under names the models no longer have are kept as JSON in `params` and the
nested JSON export; the flat columns are what spreadsheets and data frames read.

An export reads only SOURCE_COLUMNS, the configs as their stored JSON text, and flattens each
distinct text once (`_config_cells`, memoised): the runs of a sweep share their accelerator
config across seeds and techniques and their training config across accelerators, and decoding
and flattening the same JSON for each run was most of an export's time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from sqlalchemy import Text, cast

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
CONFIGS = {"training_config": "training", "accelerator_config": "accelerator",
           "technique_params": "techniques"}  # fmt: skip
SOURCE_COLUMNS = [
    *(Run.__table__.c[name] for name in RUN_COLUMNS if name in Run.__table__.c),
    Run.attempt, Run.group_key,
    *(cast(Run.__table__.c[name], Text).label(name) for name in CONFIGS),
]  # fmt: skip
TRAINING_COLUMNS = list(_leaves(TrainingConfig().model_dump(), "training."))
ACCELERATOR_COLUMNS = list(_leaves(AcceleratorConfig().model_dump(), "accelerator."))
TECHNIQUE_COLUMNS = _technique_columns()
EXPORT_COLUMNS = [*RUN_COLUMNS, *TRAINING_COLUMNS, *ACCELERATOR_COLUMNS, *TECHNIQUE_COLUMNS]
# Each config's columns, in the order CONFIGS and EXPORT_COLUMNS have them.
SEGMENTS = {
    "training": TRAINING_COLUMNS,
    "accelerator": ACCELERATOR_COLUMNS,
    "techniques": TECHNIQUE_COLUMNS,
}


def _flat_config(value: Any, kind: str) -> dict[str, Any]:
    """A config's export columns: `training.*`, `accelerator.*`, or `<technique>.*` for each
    technique of the run's `technique_params`."""
    if kind != "techniques":
        return _leaves(value or {}, f"{kind}.")
    out: dict[str, Any] = {}
    for params in value or []:
        values = dict(params)
        name = values.pop("name", "")
        out.update(_leaves(values, f"{name}."))
    return out


@lru_cache(maxsize=1024)
def _decoded(text: str) -> Any:
    """A stored config's JSON text decoded; shared between the rows that store the same text,
    so read-only."""
    return json.loads(text)


@lru_cache(maxsize=1024)
def _config_values(text: str, kind: str) -> tuple[tuple[str, Any], ...]:
    return tuple(_flat_config(_decoded(text), kind).items())


@lru_cache(maxsize=1024)
def _config_cells(text: str, kind: str) -> tuple[tuple[str, Any], ...]:
    return tuple((name, csv_cell(value)) for name, value in _config_values(text, kind))


def _getter(run: Any) -> Callable[[str], Any]:
    mapping = getattr(run, "_mapping", None)  # a row of SOURCE_COLUMNS
    return mapping.get if mapping is not None else lambda name: getattr(run, name, None)


def _run_values(run: Any) -> dict[str, Any]:
    """The RUN_COLUMNS of one run (a Run, or a row of SOURCE_COLUMNS)."""
    get = _getter(run)
    row = {name: get(name) for name in RUN_COLUMNS}
    row["group"] = get("group_key") or run_group_key(run)
    row["attempts"] = get("attempt")  # 1, or more after retries
    started, finished = get("started_at"), get("finished_at")
    row["duration_seconds"] = (finished - started).total_seconds() if finished and started else None
    for name in ("created_at", "started_at", "finished_at"):
        row[name] = row[name].isoformat() if row[name] else None
    return row


def _configs(run: Any) -> dict[str, Any]:
    """The run's three configs, as stored (a row of SOURCE_COLUMNS has them as JSON text)."""
    get = _getter(run)
    return {
        name: _decoded(value) if isinstance(value, str) else value
        for name in CONFIGS
        for value in (get(name),)
    }


def export_row(run: Any) -> dict[str, Any]:
    """One run (a Run, or a row of SOURCE_COLUMNS) as {column: value}, nested configs flattened
    into the export's columns."""
    row = _run_values(run)
    get = _getter(run)
    for name, kind in CONFIGS.items():
        value = get(name)
        row.update(
            _config_values(value, kind) if isinstance(value, str) else _flat_config(value, kind)
        )
    return row


@lru_cache(maxsize=1024)
def _config_segment(text: str, kind: str) -> tuple[Any, ...]:
    """A stored config's CSV cells, in the order of its kind's columns (None where it has no
    value; a leaf no column names is left out, as from the header)."""
    cells = dict(_config_cells(text, kind))
    return tuple(cells.get(name) for name in SEGMENTS[kind])


def csv_row(run: Any) -> list[Any]:
    """One run's CSV cells in the order of EXPORT_COLUMNS (see `csv_cell`)."""
    values = _run_values(run)
    row = [csv_cell(values[name]) for name in RUN_COLUMNS]
    get = _getter(run)
    for name, kind in CONFIGS.items():
        value = get(name)
        if isinstance(value, str):
            row.extend(_config_segment(value, kind))
        else:
            cells = {k: csv_cell(v) for k, v in _flat_config(value, kind).items()}
            row.extend(cells.get(column) for column in SEGMENTS[kind])
    return row


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
PLAIN = frozenset({int, float, bool, type(None)})  # written as they are


def csv_cell(value: Any) -> Any:
    """Lists and mappings as JSON; text that a spreadsheet would run as a formula (a custom
    accelerator's name, notes, tags) behind a leading apostrophe, so it shows as text; numbers
    and everything else as the csv module writes them. The JSON export keeps every value."""
    if value.__class__ in PLAIN:
        return value
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def nested_row(run: Any) -> dict[str, Any]:
    """One run for the JSON export: the run's columns, and its configs as stored."""
    return {**_run_values(run), **_configs(run)}
