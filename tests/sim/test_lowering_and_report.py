"""Lowering layers to training-pass GEMMs, and the terminal table."""

from __future__ import annotations

from rich.console import Console

from backend.sim import TrainingPass, Workload, simulate
from backend.sim.lowering import lower_attention, lower_conv2d, lower_linear
from backend.sim.report import layer_table
from backend.specs.accelerator import PRESETS


def _shapes(ops):
    return {op.pass_: (op.m, op.k, op.n, op.groups) for op in ops}


def test_conv_passes_share_the_dense_mac_count() -> None:
    ops = lower_conv2d("c", batch=4, in_channels=8, out_channels=16, height=10, width=12,
                       kernel=3, stride=2, padding=1)  # fmt: skip
    positions = 4 * 5 * 6  # (10 + 2 - 3) // 2 + 1 = 5, (12 + 2 - 3) // 2 + 1 = 6
    assert _shapes(ops) == {
        TrainingPass.FWD: (positions, 72, 16, 1),
        TrainingPass.BWD_DATA: (positions, 16, 72, 1),
        TrainingPass.BWD_WEIGHT: (16, positions, 72, 1),
    }
    assert all(op.executions == 1 and op.density_a == 1.0 for op in ops)


def test_grouped_and_depthwise_conv() -> None:
    grouped = _shapes(lower_conv2d("g", 2, 8, 12, 5, 5, (3, 1), groups=4))
    assert grouped[TrainingPass.FWD] == (2 * 3 * 5, 2 * 3, 3, 4)
    depthwise = _shapes(lower_conv2d("d", 1, 6, 6, 4, 4, 3, padding=1, groups=6))
    assert depthwise[TrainingPass.BWD_WEIGHT] == (1, 16, 9, 6)


def test_linear_and_attention() -> None:
    assert _shapes(lower_linear("fc", 32, 100, 10)) == {
        TrainingPass.FWD: (32, 100, 10, 1),
        TrainingPass.BWD_DATA: (32, 10, 100, 1),
        TrainingPass.BWD_WEIGHT: (10, 32, 100, 1),
    }
    ops = lower_attention("attn", batch=2, heads=3, query_len=5, head_dim=4, key_len=7)
    assert [op.layer for op in ops] == ["attn.scores"] * 3 + ["attn.context"] * 3
    assert [(op.m, op.k, op.n) for op in ops] == [
        (5, 4, 7), (5, 7, 4), (7, 5, 4),
        (5, 7, 4), (5, 4, 7), (7, 5, 4),
    ]  # fmt: skip
    assert {op.groups for op in ops} == {6}


def test_layer_table_lists_every_layer_pass_and_the_totals() -> None:
    ops = lower_conv2d("conv1", 2, 3, 8, 8, 8, 3, padding=1) + lower_linear("fc", 2, 512, 10)
    result = simulate(Workload("net", "toy", 2, 1, ops), PRESETS["eyeriss-like"])
    table = layer_table(result)
    assert table.row_count == len(ops) + 1
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "conv1" in text and "bwd_weight" in text and "total" in text


def test_the_simulator_core_needs_no_torch() -> None:
    import subprocess
    import sys

    code = "import sys, backend.sim, backend.sim.report; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
