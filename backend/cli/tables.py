"""The tables the client commands print: runs (`orrery runs`, `submit --wait`, `wait`), one run
in full (`orrery show`), runs against their baselines (`orrery compare`) and an experiment's
design points over seeds (`orrery summary`, in as many tables as the terminal's width needs).

Model: each takes the server's JSON answer (dicts, as the API returns them) and builds rich
tables, every number written by backend/numbers.py (the dashboard's rules); a missing figure
shows as "–". `show` prints sections of fields and values (settings as stored, dotted paths for
nested ones), never JSON, and no cell is cut (long text folds). Open choice: a run that did not
learn is flagged in the accuracy cell rather than in a column of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from backend.cli.output import console
from backend.numbers import format_estimate, format_value
from backend.specs.figures import LAYER_MEASURES, RUN_MEASURES, SUMMARISED, Measure
from backend.specs.techniques import EPOCH_FIGURES

LEFT_COLUMNS = ("technique", "model", "dataset", "accelerator", "status", "reason")
# A summary table's width for naming its design points, and for each figure ("1.222 ± 0.095 M
# cycles" and its borders), in characters.
DESCRIBING_WIDTH = 70
FIGURE_WIDTH = 25


def print_runs(runs: list[dict[str, Any]]) -> None:
    """The runs as one table, a row each, the reason a run ended in its last column."""
    table = Table(show_lines=False)
    for column in ("id", "technique", "model", "dataset", "accelerator", "status", "accuracy",
                   "speedup", "energy ratio", "cycles", "time", "area", "reason"):  # fmt: skip
        table.add_column(
            column,
            justify="left" if column in LEFT_COLUMNS else "right",
            overflow="fold",
        )
    for run in runs:
        table.add_row(
            str(run["id"]),
            run["technique"],
            run["model"],
            run["dataset"],
            run["accelerator_name"],
            run["status"],
            _accuracy_cell(run),
            format_value(run["speedup"], "×"),
            format_value(run["energy_ratio"], "×"),
            format_value(run["total_cycles"], "cycles"),
            format_value(run.get("seconds"), "s"),
            format_value(run.get("area_mm2"), "mm²"),
            run["error"] or "",
        )
    console.print(table)


def _accuracy_cell(run: dict[str, Any]) -> str:
    """The accuracy, flagged when the run did not learn (below chance + the margin)."""
    text = format_value(run["accuracy"], "%")
    return f"[red]{text} did not learn[/]" if run.get("did_not_learn") else text


def _lower_first(label: str) -> str:
    """A declared figure's label as the tables write headers: 'Energy ratio' -> 'energy ratio';
    'DRAM', 'MACs actual' and 'Δ accuracy' as they are."""
    if label[1:2].isupper() or not label[:1].isascii():
        return label
    return label[:1].lower() + label[1:]


def _leaves(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted path, value) of every leaf of a stored setting, lists written whole."""
    if isinstance(data, dict):
        return [pair for key, value in data.items() for pair in _leaves(value, f"{prefix}{key}.")]
    text = ", ".join(map(str, data)) if isinstance(data, list) else str(data)
    return [(prefix.rstrip("."), text or "–")]


def _fields(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for field, value in rows:
        table.add_row(field, value)
    return table


def run_tables(run: dict[str, Any]) -> list[Table]:
    """The run as sections: summary, training, techniques, accelerator, what it trained with,
    per-layer-per-pass figures, per-epoch training figures."""
    baseline = (
        "itself (a baseline)"
        if run["is_baseline"]
        else f"run {run['baseline_run_id']} ({run['baseline_hardware']} hardware)"
    )
    rows = [
        ("experiment", str(run["experiment_id"])),
        ("status", run["status"] + (f": {run['error']}" if run["error"] else "")),
        ("attempt", str(run.get("attempt", 1)) + "".join(
            f"; attempt {a['attempt']} {a['status']}" + (f": {a['error']}" if a["error"] else "")
            for a in run.get("attempts", [])
        )),
        ("model / data", f"{run['model']} on {run['dataset']}, seed {run['seed']}"),
        ("accelerator", run["accelerator_name"]),
        ("compared with", baseline),
    ]  # fmt: skip
    # The run's figures: these rows (each with the measures it writes, some best read together
    # on one row), then every other declared run measure on a row of its own.
    written = [
        (("accuracy",), "accuracy", _accuracy_cell(run)),
        (("speedup",), "speedup", format_value(run.get("speedup"), "×")),
        (("energy_ratio",), "energy ratio", format_value(run.get("energy_ratio"), "×")),
        (("total_cycles", "stall_cycles"), "cycles",
         f"{format_value(run.get('total_cycles'), 'cycles')} "
         f"({format_value(run.get('stall_cycles'), 'cycles')} stall)"),
        (("seconds", "seconds_per_step"), "time",
         f"{format_value(run.get('seconds'), 's')} for the training, "
         f"{format_value(run.get('seconds_per_step'), 's')} a step"),
        (("energy_pj",), "energy", format_value(run.get("energy_pj"), "pJ")),
        (("dram_bytes",), "DRAM traffic", format_value(run.get("dram_bytes"), "bytes")),
        (("area_mm2",), "area", f"{format_value(run.get('area_mm2'), 'mm²')} (45 nm)"),
        (("macs_actual", "macs_algorithmic", "macs_overhead"), "MACs actual / algorithmic",
         f"{format_value(run.get('macs_actual'), 'MACs')} / "
         f"{format_value(run.get('macs_algorithmic'), 'MACs')} "
         f"(overhead {format_value(run.get('macs_overhead'), 'MACs')})"),
    ]  # fmt: skip
    shown = {key for keys, _, _ in written for key in keys}
    rows += [(label, text) for _, label, text in written]
    rows += [
        (_lower_first(m.label), format_value(run.get(m.key), m.display_unit))
        for m in RUN_MEASURES
        if m.key not in shown
    ]
    tables = [_fields(f"run {run['id']}: {run['technique']}", rows)]
    tables.append(_fields("training", _leaves(run["training_config"])))
    for params in run["technique_params"]:
        knobs = {k: v for k, v in params.items() if k != "name"}
        tables.append(_fields(f"technique {params['name']}", _leaves(knobs) if knobs else []))
    tables.append(_fields(f"accelerator {run['accelerator_name']}", _leaves(
        {k: v for k, v in run["accelerator_config"].items() if k != "name"}
    )))  # fmt: skip
    if run.get("training_environment"):
        tables.append(_fields("trained with", _leaves(run["training_environment"])))
    if run["layers"]:
        layers = Table(title="per layer and pass (whole training)", title_justify="left")
        for header in ("layer", "pass", "role"):
            layers.add_column(header)
        for measure in LAYER_MEASURES:
            layers.add_column(_lower_first(measure.label), justify="right")
        for layer in run["layers"]:
            layers.add_row(
                layer["layer"],
                layer["training_pass"],
                layer["role"],
                *(format_value(layer.get(m.key), m.display_unit) for m in LAYER_MEASURES),
            )
        tables.append(layers)
    if run["epochs"]:
        epochs = Table(title="per epoch", title_justify="left")
        columns = {
            "epoch": ("epoch", ""), "train_loss": ("train loss", ""),
            "train_accuracy": ("train accuracy", "%"), "test_loss": ("test loss", ""),
            "test_accuracy": ("test accuracy", "%"),
            **{f.key: (f.label, "%" if f.percent else "") for f in EPOCH_FIGURES},
            "seconds": ("wall time", "s"),
        }  # fmt: skip
        shown = [k for k in columns if any(e.get(k) is not None for e in run["epochs"])]
        for key in shown:
            epochs.add_column(columns[key][0], justify="right")
        for epoch in run["epochs"]:
            epochs.add_row(*(format_value(epoch.get(k), columns[k][1]) for k in shown))
        tables.append(epochs)
    return tables


def _estimate_cell(estimate: dict[str, Any] | None, unit: str) -> str:
    if not estimate:
        return "–"
    if estimate["ci_low"] is None:
        return f"{format_value(estimate['mean'], unit)} (n = 1)"
    half = (estimate["ci_high"] - estimate["ci_low"]) / 2
    return format_estimate(estimate["mean"], half, unit)


def summary_tables(groups: list[dict[str, Any]], width: int) -> list[Table]:
    """One row per design point (runs equal but for the seed): each summarised figure as its
    mean ± the half-width of its 95% Student-t interval over seeds. The figures are spread over
    as many tables as a terminal `width` characters wide needs, each naming the design points."""
    fit = max(1, (width - DESCRIBING_WIDTH) // FIGURE_WIDTH)
    per_table = math.ceil(len(SUMMARISED) / math.ceil(len(SUMMARISED) / fit))  # tables alike
    parts = [SUMMARISED[i : i + per_table] for i in range(0, len(SUMMARISED), per_table)]
    tables = [_summary_table(groups, part) for part in parts]
    tables[-1].caption = (
        "mean ± half-width of the 95% Student-t interval over seeds; Δ accuracy paired with "
        "each seed's own baseline"
    )
    return tables


def _summary_table(groups: list[dict[str, Any]], figures: Sequence[Measure]) -> Table:
    table = Table(caption_justify="left")
    for header in ("technique", "accelerator", "swept values", "compared with", "seeds"):
        table.add_column(header, no_wrap=header != "swept values", overflow="fold")
    # Narrow terminals wrap a figure at its spaces ("171.0 ±" over "5.5 µJ"), never cut it.
    for measure in figures:
        table.add_column(_lower_first(measure.label), justify="right", overflow="fold")
    for group in groups:
        swept = ", ".join(
            f"{k}={v}" for k, v in group["params"].items() if k not in ("technique", "accelerator")
        )
        table.add_row(
            group["technique"],
            group["accelerator_name"],
            swept or "–",
            "itself" if group["is_baseline"] else f"{group['baseline_hardware']} baseline",
            f"{group['done']} of {len(group['run_ids'])}",
            *(_estimate_cell(group.get(m.key), m.display_unit) for m in figures),
        )
    return table


def comparison_table(rows: list[dict[str, Any]]) -> Table:
    """Each run against its baseline, as `orrery compare` prints it."""
    table = Table()
    for header in ("run", "technique", "accelerator", "baseline run", "speedup", "energy ratio",
                   "accuracy", "Δ accuracy"):  # fmt: skip
        table.add_column(
            header, justify="left" if header in ("technique", "accelerator") else "right"
        )
    for row in rows:
        table.add_row(
            str(row["run_id"]),
            row["technique"],
            row["accelerator_name"],
            "–" if row["baseline_run_id"] is None else str(row["baseline_run_id"]),
            format_value(row["speedup"], "×"),
            format_value(row["energy_ratio"], "×"),
            format_value(row["accuracy"], "%"),
            format_value(row["accuracy_delta"], "pt"),
        )
    return table
