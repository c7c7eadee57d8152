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
    assert "did not learn" in lines["2"] and "11.00%" in lines["2"]
    assert "did not learn" not in lines["1"] + lines["3"]
