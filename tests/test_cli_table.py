"""`orrery runs` flags runs that did not learn; `show` and `summary` write the declared figures."""

from __future__ import annotations

import pytest
from rich.console import Console

from backend.cli import tables as cli
from backend.numbers import format_estimate
from backend.specs.figures import LAYER_MEASURES, RUN_MEASURES, SUMMARISED

DESCRIBING = ("technique", "accelerator", "swept values", "compared with", "seeds")


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


def test_the_summary_spreads_every_summarised_figure_over_tables_that_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    group = {
        "technique": "mercury", "accelerator_name": "edge", "params": {"seed": 0},
        "is_baseline": False, "baseline_hardware": "dense", "done": 2, "run_ids": [1, 2],
        **{m.key: {"mean": 1.5, "ci_low": 1.0, "ci_high": 2.0, "n": 2} for m in SUMMARISED},
    }  # fmt: skip
    for width in (100, 200, 10_000):
        monkeypatch.setattr(cli, "console", Console(width=width))
        tables = cli.summary_tables([group], width)
        headers = [c.header for t in tables for c in t.columns if c.header not in DESCRIBING]
        assert headers == [cli._lower_first(m.label) for m in SUMMARISED]
        with cli.console.capture() as captured:
            for table in tables:
                cli.console.print(table)
        text = captured.get()
        for measure in SUMMARISED:  # every figure whole on its line, never folded
            assert format_estimate(1.5, 0.5, measure.display_unit) in text, measure.key
        assert text.count("mercury") == len(tables)
    assert len(cli.summary_tables([group], 10_000)) == 1
    assert len(cli.summary_tables([group], 100)) > len(cli.summary_tables([group], 200)) > 1
    assert "Δ accuracy" in [c.header for t in cli.summary_tables([group], 200) for c in t.columns]


def test_show_writes_every_declared_run_and_layer_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "console", Console(width=400))
    layer = {"layer": "fc", "training_pass": "fwd", "role": "compute"}
    layer |= {m.key: 0.25 for m in LAYER_MEASURES}
    detail = run_row(7, 0.97, False) | {m.key: 0.25 for m in RUN_MEASURES} | {
        "experiment_id": 1, "seed": 0, "is_baseline": True, "baseline_run_id": None,
        "baseline_hardware": "dense", "training_config": {}, "technique_params": [],
        "accelerator_config": {}, "layers": [layer], "epochs": [], "accuracy": 0.97,
    }  # fmt: skip
    summary, *_, layers = cli.run_tables(detail)
    with cli.console.capture() as captured:
        cli.console.print(summary)
    text = captured.get()
    # Those not written together with others (cycles, time, MACs) each have a row of their own.
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in text.splitlines()
        if "│" in line
    }
    assert rows["loss"] == "0.250"
    assert rows["stall share"] == "25.0%"
    assert rows["iso-area speedup"] == "0.250×"
    assert rows["cycles"] == "0.250 cycles (0.250 cycles stall)"  # together, not again alone
    assert "total cycles" not in rows and "seconds" not in rows
    headers = [c.header for c in layers.columns][3:]
    assert headers == [cli._lower_first(m.label) for m in LAYER_MEASURES]
