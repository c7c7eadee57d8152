"""The tables the client commands print: runs (`orrery runs`, `submit --wait`), one run in full
(`orrery show`) and runs against their baselines (`orrery compare`).

Model: each takes the server's JSON answer (dicts, as the API returns them) and builds rich
tables; a missing figure shows as "-". Open choice: a run that did not learn is flagged in the
accuracy cell rather than in a column of its own.
"""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from backend.cli.output import console
from backend.specs.techniques import EPOCH_FIGURES

LEFT_COLUMNS = ("technique", "model", "dataset", "accelerator", "status", "reason")


def print_runs(runs: list[dict[str, Any]]) -> None:
    """The runs as one table, a row each, the reason a run ended in its last column."""
    table = Table(show_lines=False)
    for column in (
        "id",
        "technique",
        "model",
        "dataset",
        "accelerator",
        "status",
        "accuracy",
        "speedup",
        "energy ratio",
        "cycles",
        "seconds",
        "area mm²",
        "reason",
    ):
        table.add_column(
            column,
            justify="left" if column in LEFT_COLUMNS else "right",
            overflow="fold" if column == "reason" else "ellipsis",
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
            _fmt(run["speedup"], "{:.2f}x"),
            _fmt(run["energy_ratio"], "{:.2f}"),
            _fmt(run["total_cycles"], "{:,}"),
            _fmt(run.get("seconds"), "{:.4g}"),
            _fmt(run.get("area_mm2"), "{:.3g}"),
            run["error"] or "",
        )
    console.print(table)


def _accuracy_cell(run: dict[str, Any]) -> str:
    """The accuracy, flagged when the run did not learn (below chance + the margin)."""
    text = _fmt(run["accuracy"], "{:.2%}")
    return f"[red]{text} did not learn[/]" if run.get("did_not_learn") else text


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def run_tables(run: dict[str, Any]) -> list[Table]:
    """The run as tables: summary, per-layer-per-pass figures, per-epoch training figures."""
    summary = Table(title=f"run {run['id']}: {run['technique']}", show_header=False)
    summary.add_column("field", style="bold")
    summary.add_column("value")
    baseline = (
        "itself (a baseline)"
        if run["is_baseline"]
        else f"run {run['baseline_run_id']} ({run['baseline_hardware']} hardware)"
    )
    rows = {
        "experiment": str(run["experiment_id"]),
        "status": run["status"] + (f": {run['error']}" if run["error"] else ""),
        "attempt": str(run.get("attempt", 1))
        + "".join(
            f"; attempt {a['attempt']} {a['status']}" + (f": {a['error']}" if a["error"] else "")
            for a in run.get("attempts", [])
        ),
        "model / data": f"{run['model']} on {run['dataset']}, seed {run['seed']}",
        "training": json.dumps(run["training_config"], sort_keys=True),
        "techniques": json.dumps(run["technique_params"], sort_keys=True),
        "accelerator": f"{run['accelerator_name']}: "
        + json.dumps(run["accelerator_config"], sort_keys=True),
        "trained with": json.dumps(run["training_environment"], sort_keys=True)
        if run.get("training_environment")
        else "-",
        "compared with": baseline,
        "accuracy": _fmt(run["accuracy"], "{:.2%}"),
        "speedup": _fmt(run["speedup"], "{:.3f}x"),
        "energy ratio": _fmt(run["energy_ratio"], "{:.3f}"),
        "cycles": _fmt(run["total_cycles"], "{:,}"),
        "time": f"{_fmt(run.get('seconds'), '{:.4g} s')} for the training, "
        f"{_fmt(run.get('seconds_per_step'), '{:.4g} s')} a step",
        "energy": _fmt(run["energy_pj"] and run["energy_pj"] / 1e6, "{:,.1f} µJ"),
        "area": _fmt(run.get("area_mm2"), "{:.3f} mm² (45 nm)"),
        "MACs actual / algorithmic": f"{_fmt(run['macs_actual'], '{:,}')} / "
        f"{_fmt(run['macs_algorithmic'], '{:,}')} (overhead {_fmt(run['macs_overhead'], '{:,}')})",
    }
    for field, value in rows.items():
        summary.add_row(field, value)
    tables = [summary]
    if run["layers"]:
        layers = Table(title="per layer and pass (whole training)")
        headers = ("layer", "pass", "role", "MACs actual", "MACs skipped", "compute cyc",
                   "stall cyc", "total cyc", "util %", "DRAM MiB", "energy µJ")  # fmt: skip
        for header in headers:
            layers.add_column(header, justify="left" if header in headers[:3] else "right")
        for layer in run["layers"]:
            layers.add_row(
                layer["layer"],
                layer["training_pass"],
                layer["role"],
                f"{layer['macs_actual']:,}",
                f"{layer['macs_skipped']:,}",
                f"{layer['compute_cycles']:,}",
                f"{layer['stall_cycles']:,}",
                f"{layer['total_cycles']:,}",
                f"{100 * layer['utilization']:.1f}",
                f"{layer['dram_bytes'] / 2**20:.2f}",
                f"{layer['energy_pj'] / 1e6:.2f}",
            )
        tables.append(layers)
    if run["epochs"]:
        epochs = Table(title="per epoch")
        labels = {
            "epoch": "epoch", "train_loss": "train loss", "train_accuracy": "train accuracy",
            "test_loss": "test loss", "test_accuracy": "test accuracy",
            **{figure.key: figure.label for figure in EPOCH_FIGURES}, "seconds": "seconds",
        }  # fmt: skip
        shown = [k for k in labels if any(e.get(k) is not None for e in run["epochs"])]
        for key in shown:
            epochs.add_column(labels[key], justify="right")
        for epoch in run["epochs"]:
            epochs.add_row(*(_fmt(epoch.get(k), "{:.4g}") for k in shown))
        tables.append(epochs)
    return tables


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
            _fmt(row["baseline_run_id"], "{}"),
            _fmt(row["speedup"], "{:.3f}x"),
            _fmt(row["energy_ratio"], "{:.3f}"),
            _fmt(row["accuracy"], "{:.2%}"),
            _fmt(row["accuracy_delta"] and 100 * row["accuracy_delta"], "{:+.2f} pt"),
        )
    return table
