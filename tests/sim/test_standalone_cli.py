"""`python -m backend.sim WORKLOAD.json ACCELERATOR`: the simulator run on its own, as a program."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from backend.sim import Workload, simulate
from backend.sim.__main__ import PIPED_WIDTH
from backend.sim.area import area
from backend.sim.lowering import lower_conv2d, lower_linear
from backend.sim.report import layer_table
from backend.specs.accelerator import PRESETS, AcceleratorConfig, McacheHardware

ROOT = Path(__file__).resolve().parents[2]


def _workload() -> Workload:
    """A conv and a classifier with MERCURY reuse and MCACHE lookups in FWD and a sparse
    gradient, so extensions and zero-skipping both change the figures."""
    ops = lower_conv2d("conv1", 4, 3, 8, 12, 12, 3, padding=1) + lower_linear("fc", 4, 1152, 10)
    for op in ops:
        op.executions = 5
    ops[0].reused_row_fraction = 0.25
    ops[0].extra_ops = {"mcache_lookups": 100.0, "compares": 40.0}
    ops[1].density_a = 0.3
    return Workload("tiny", "digits", 4, 5, ops, technique="mercury")


def _run(*args: str | Path, module: str = "backend.sim") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, Path, AcceleratorConfig]:
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(_workload().to_dict()))
    accel = AcceleratorConfig(
        name="small", rows=16, cols=16, dataflow="ws", mcache=McacheHardware(lookup_latency=2)
    )
    accelerator = tmp_path / "accelerator.yaml"
    accelerator.write_text(
        "name: small\nrows: 16\ncols: 16\ndataflow: ws\nmcache:\n  lookup_latency: 2\n"
    )
    return workload, accelerator, accel


def test_json_output_is_simulate_of_the_stored_files(stored) -> None:
    workload, accelerator, accel = stored
    out = _run(workload, accelerator, "--json")
    assert out.returncode == 0, out.stderr
    expected = simulate(_workload(), accel).to_dict()
    assert json.loads(out.stdout) == json.loads(json.dumps(expected))
    assert expected["extensions"] == ["mcache", "zero_skipping", "gradient_predictor"]


def test_the_old_module_name_is_an_alias(stored) -> None:
    workload, accelerator, _ = stored
    alias = _run(workload, accelerator, "--json", module="worker.sim")
    assert alias.returncode == 0, alias.stderr
    assert json.loads(alias.stdout) == json.loads(_run(workload, accelerator, "--json").stdout)


def test_the_report_prints_simulate_s_table_and_totals_for_a_preset(stored) -> None:
    workload, _, _ = stored
    out = _run(workload, "mercury-like")
    assert out.returncode == 0, out.stderr
    result = simulate(_workload(), PRESETS["mercury-like"])
    console = Console(file=io.StringIO(), width=PIPED_WIDTH)
    console.print(layer_table(result))
    table = console.file.getvalue()
    assert out.stdout.startswith(table)
    total_row = next(line for line in table.splitlines() if "total" in line)
    assert f"{result.totals.macs_actual / 1e6:.3g}M" in total_row
    assert "extensions on: mcache" in out.stdout
    assert out.stdout.endswith(f"convolution operand traffic: {result.conv_operand_traffic}\n")
    assert f"area: {area(PRESETS['mercury-like']).area_mm2:.4g} mm² at 45 nm" in out.stdout


@pytest.mark.parametrize(
    ("accelerator_text", "messages"),
    [
        (
            "rows: 0\nmcache: {lookup_latency: 99}\n",
            ["rows: Input should be greater than or equal", "mcache.lookup_latency: Input should"],
        ),
        ("mercury: {enabled: true}\n", ["mercury: Extra inputs are not permitted"]),
        ("rows: [16, 32\n", ["not valid YAML or JSON", "(line 2, column 1)"]),
        ("- 16\n", ["expected a mapping of accelerator fields, found list"]),
    ],
)
def test_a_bad_accelerator_file_is_named_with_its_problem(
    stored, tmp_path: Path, accelerator_text: str, messages: list[str]
) -> None:
    workload, _, _ = stored
    bad = tmp_path / "bad.yaml"
    bad.write_text(accelerator_text)
    out = _run(workload, bad)
    assert out.returncode == 2
    assert out.stdout == "" and "Traceback" not in out.stderr
    assert str(bad) in out.stderr
    assert all(message in out.stderr for message in messages)


def test_missing_files_and_unknown_presets_are_named(stored, tmp_path: Path) -> None:
    workload, accelerator, _ = stored
    missing = _run(tmp_path / "none.json", accelerator)
    assert missing.returncode == 2 and f"{tmp_path / 'none.json'}: no such file" in missing.stderr
    unknown = _run(workload, "tpu-lik")
    assert unknown.returncode == 2 and "'tpu-lik' is neither a preset" in unknown.stderr
    not_a_workload = _run(accelerator, "edge")
    assert not_a_workload.returncode == 2 and "not valid JSON" in not_a_workload.stderr
    for out in (missing, unknown, not_a_workload):
        assert "Traceback" not in out.stderr
