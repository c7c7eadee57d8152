"""`orrery runs` flags runs that did not learn."""

from __future__ import annotations

import pytest
from rich.console import Console

from backend.cli import tables as cli


def run_row(run_id: int, accuracy: float, did_not_learn: bool | None) -> dict[str, object]:
    return {
        "id": run_id, "technique": "baseline", "model": "lenet5", "dataset": "mnist",
        "accelerator_name": "edge", "status": "done", "error": None, "accuracy": accuracy,
        "did_not_learn": did_not_learn, "speedup": 1.0, "energy_ratio": 1.0,
        "total_cycles": 1000,
    }  # fmt: skip


def test_runs_table_flags_did_not_learn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "console", Console(width=200))
    with cli.console.capture() as captured:
        cli.print_runs([run_row(1, 0.97, False), run_row(2, 0.11, True), run_row(3, 0.5, None)])
    lines = {
        line.split("│")[1].strip(): line for line in captured.get().splitlines() if "│" in line
    }
    assert "did not learn" in lines["2"] and "11.0%" in lines["2"]
    assert "did not learn" not in lines["1"] + lines["3"]


def test_runs_and_show_give_time_and_area(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "console", Console(width=240))
    run = run_row(7, 0.97, False) | {
        "seconds": 0.0123,
        "seconds_per_step": 2.46e-4,
        "area_mm2": 8.36,
    }
    with cli.console.capture() as captured:
        cli.print_runs([run, run_row(8, 0.9, False)])
    text = captured.get()
    assert "time" in text and "area" in text
    lines = {
        line.split("│")[1].strip(): line.split("│") for line in text.splitlines() if "│" in line
    }
    assert [cell.strip() for cell in lines["7"][-4:-2]] == ["12.3 ms", "8.36 mm²"]
    assert [cell.strip() for cell in lines["8"][-4:-2]] == ["–", "–"]  # time and area unknown

    detail = run | {
        "experiment_id": 1, "seed": 0, "is_baseline": True, "baseline_run_id": None,
        "baseline_hardware": "dense", "training_config": {}, "technique_params": [],
        "accelerator_config": {}, "energy_pj": 5e6, "macs_actual": 1, "macs_algorithmic": 1,
        "macs_overhead": 0, "layers": [], "epochs": [], "accelerator_name": "edge",
    }  # fmt: skip
    with cli.console.capture() as captured:
        for table in cli.run_tables(detail):
            cli.console.print(table)
    shown = captured.get()
    assert "12.3 ms for the training, 246 µs a step" in shown
    assert "8.36 mm² (45 nm)" in shown
