"""Extension overlap, the cycle columns' sum, the presets and which extensions a result says
were on."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from backend.sim import GemmOp, TrainingPass, Workload, simulate
from backend.sim.lowering import lower_conv2d
from backend.sim.row_dataflow import gradient_taps
from backend.specs.accelerator import (
    EXTENSIONS,
    PRESETS,
    AcceleratorConfig,
    McacheHardware,
)
from backend.specs.techniques import accelerator_for
from backend.training.sparsity import line_macs
from tests.sim.strategies import accelerators, dims

CYCLE_SUM_TOLERANCE = 1e-9


def _workload(*ops: GemmOp, iterations: int = 1) -> Workload:
    return Workload(model="m", dataset="d", batch_size=1, iterations=iterations, ops=list(ops))


@st.composite
def extension_workloads(draw: st.DrawFn) -> Workload:
    """A layer's FWD GEMM with MCACHE lookups and column-unit work, its signature projection
    fed by the FWD stream, a pruned BWD GEMM and a predictor GEMM."""
    m, k, n = draw(dims), draw(dims), draw(dims)
    lookups = float(draw(st.integers(0, 4 * m)))
    column_ops = float(draw(st.integers(0, 40 * m)))
    fwd = GemmOp(
        layer="l", pass_=TrainingPass.FWD, m=m, k=k, n=n, executions=draw(st.integers(1, 4)),
        reused_row_fraction=draw(st.floats(0, 1)),
        extra_ops={"mcache_lookups": lookups, "compares": column_ops},
    )  # fmt: skip
    signature = GemmOp(
        layer="l.signature", pass_=TrainingPass.FWD, m=m, k=k, n=draw(st.integers(1, 32)),
        executions=draw(st.integers(1, 4)), role="overhead", runs_on="projection",
        fused_with="l", extra_ops={"compares": float(m * 8)},
    )  # fmt: skip
    bwd = GemmOp(
        layer="l", pass_=TrainingPass.BWD_WEIGHT, m=n, k=m, n=k, executions=1,
        density_a=draw(st.floats(0, 1)),
        extra_ops={"fp_adds": column_ops, "random_numbers": column_ops / 2,
                   "weight_updates": float(k * n)},
    )  # fmt: skip
    predictor = GemmOp(
        layer="l", pass_=TrainingPass.FWD, m=draw(dims), k=k, n=8, executions=1,
        role="overhead", runs_on="predictor",
    )  # fmt: skip
    return _workload(fwd, signature, bwd, predictor, iterations=4)


@st.composite
def extension_accelerators(draw: st.DrawFn) -> AcceleratorConfig:
    base = draw(accelerators())
    return base.model_copy(
        update={
            "dataflow": draw(st.sampled_from(["os", "ws", "is", "row"])),
            "mcache": McacheHardware(
                enabled=draw(st.booleans()),
                lookups_per_cycle=draw(st.integers(0, 8)),
                lookup_latency=draw(st.integers(0, 8)),
                projection_macs_per_cycle=draw(st.sampled_from([0, 1, 64, 4096])),
            ),
            "extension_overlap": draw(st.sampled_from(["overlapped", "serial"])),
        }
    )


@settings(max_examples=150, deadline=None)
@given(workload=extension_workloads(), accel=extension_accelerators())
def test_cycle_columns_add_up_per_layer_pass_and_in_the_totals(workload, accel) -> None:
    result = simulate(workload, accel)
    for row in [*result.layers, result.totals]:
        parts = row.array_cycles + row.exposed_extension_cycles + row.stall_cycles
        assert row.total_cycles == pytest.approx(parts, rel=CYCLE_SUM_TOLERANCE)
        assert row.compute_cycles == pytest.approx(
            row.array_cycles + row.exposed_extension_cycles, rel=CYCLE_SUM_TOLERANCE
        )
        assert 0 <= row.exposed_extension_cycles <= row.extension_cycles


@settings(max_examples=150, deadline=None)
@given(workload=extension_workloads(), accel=extension_accelerators())
def test_overlap_never_makes_an_extension_cost_more_than_serial(workload, accel) -> None:
    overlapped = simulate(workload, accel.model_copy(update={"extension_overlap": "overlapped"}))
    serial = simulate(workload, accel.model_copy(update={"extension_overlap": "serial"}))
    for a, b in zip(overlapped.layers, serial.layers, strict=True):
        assert a.exposed_extension_cycles <= b.exposed_extension_cycles
        assert a.extension_cycles == b.extension_cycles == b.exposed_extension_cycles
        assert a.array_cycles == b.array_cycles and a.stall_cycles == b.stall_cycles
        assert a.total_cycles <= b.total_cycles


def test_lookups_and_pruning_hide_behind_the_array_up_to_their_fill() -> None:
    accel = AcceleratorConfig(rows=16, cols=16, mcache=McacheHardware(lookup_latency=3))
    op = GemmOp(
        layer="l", pass_=TrainingPass.FWD, m=128, k=64, n=32, executions=1,
        extra_ops={"mcache_lookups": 128.0, "compares": 64.0, "weight_updates": 33.0},
    )  # fmt: skip
    row = simulate(_workload(op), accel).layers[0]
    assert row.array_cycles == 16 * (64 + 30) - 1  # 8 x 2 folds, os
    # One lookup port per PE row: 8 busy cycles; 4 cycles of column-unit work; 3 of updates.
    assert row.extension_cycles == 8 + 3 + 4 + 3
    assert row.exposed_extension_cycles == 3 + 1 + 3  # latency, the last output's unit, updates
    # Lookups that outlast the array are exposed beyond it.
    slow = accel.model_copy(update={"mcache": McacheHardware(lookups_per_cycle=1)})
    many = GemmOp(
        layer="l", pass_=TrainingPass.FWD, m=128, k=64, n=32, executions=1,
        extra_ops={"mcache_lookups": 5000.0},
    )  # fmt: skip
    row = simulate(_workload(many), slow).layers[0]
    assert row.exposed_extension_cycles == 1 + (5000 - row.array_cycles)


def test_the_projection_reads_the_fwd_stream_and_overlaps_on_its_own_unit() -> None:
    fwd = GemmOp(layer="l", pass_=TrainingPass.FWD, m=256, k=75, n=64, executions=2)
    signature = GemmOp(
        layer="l.signature", pass_=TrainingPass.FWD, m=256, k=75, n=16, executions=2,
        role="overhead", runs_on="projection", fused_with="l",
    )  # fmt: skip
    unfused = GemmOp(
        layer="l.signature", pass_=TrainingPass.FWD, m=256, k=75, n=16, executions=2,
        role="overhead",
    )  # fmt: skip
    on_array = AcceleratorConfig(rows=16, cols=16, ifmap_sram_kib=1)
    fused_row = simulate(_workload(fwd, signature), on_array).layers[1]
    own_sweep = simulate(_workload(fwd, unfused), on_array).layers[1]
    assert fused_row.dram_reads_by_operand["ifmap"] == 0
    assert own_sweep.dram_reads_by_operand["ifmap"] > 0
    assert fused_row.array_cycles == own_sweep.array_cycles > 0
    assert fused_row.macs_overhead == 2 * 256 * 75 * 16

    rate = 64
    unit = on_array.model_copy(update={"mcache": McacheHardware(projection_macs_per_cycle=rate)})
    rows = simulate(_workload(fwd, signature), unit).layers
    busy = -(-(256 * 75 * 16) // rate)
    assert rows[1].array_cycles == 0 and rows[1].dram_reads == 0
    assert rows[1].extension_cycles == 2 * busy
    fwd_time = rows[0].array_cycles / 2
    assert rows[1].exposed_extension_cycles == 2 * (1 + max(0, busy - fwd_time))
    serial = unit.model_copy(update={"extension_overlap": "serial"})
    assert simulate(_workload(fwd, signature), serial).layers[1].exposed_extension_cycles == (
        2 * busy
    )


def _conv_with_gradient_density(density: float, seed: int = 0) -> list[GemmOp]:
    """One 3x3, 16->16 conv at 28x28, batch 64, whose output gradient has this density, with
    the per-lane and per-row counts the training measures."""
    rng = np.random.default_rng(seed)
    ops = lower_conv2d("conv", 64, 16, 16, 28, 28, 3, padding=1)
    geometry = ops[0].conv
    assert geometry is not None
    dy = (rng.random((64, 16, 28, 28)) < density).astype(np.float32)
    lines = line_macs(torch.from_numpy(dy), gradient_taps(geometry))
    for op in ops[1:]:
        op.density_a = float(dy.mean())
        op.a_line_macs = lines
    ops[1].a_row_nnz = dy.sum(1).reshape(-1).astype(np.int64)
    ops[2].a_row_nnz = dy.sum((0, 2, 3)).astype(np.int64)
    return ops


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_sparser_gradient_costs_fewer_cycles_where_the_hardware_skips_zeros(preset) -> None:
    hardware = accelerator_for(PRESETS[preset], {"sparsetrain"})
    dense = simulate(_workload(*_conv_with_gradient_density(1.0)), hardware).layers
    sparse = simulate(_workload(*_conv_with_gradient_density(0.1)), hardware).layers
    for before, after in zip(dense[1:], sparse[1:], strict=True):  # BWD-DATA, BWD-WEIGHT
        if hardware.zero_skipping.enabled:
            assert after.array_cycles < before.array_cycles
            assert after.compute_cycles < before.compute_cycles
        else:
            assert after.array_cycles == before.array_cycles
        assert after.total_cycles <= before.total_cycles
        if hardware.storage.gradients != "dense":
            # Sparse gradients also move fewer words, so the memory-bound total falls too.
            assert after.dram_reads + after.dram_writes < before.dram_reads + before.dram_writes
            assert after.total_cycles < before.total_cycles


def test_presets_offer_their_papers_extensions_and_the_generic_ones_offer_all() -> None:
    assert {"edge", "tpu-like", "eyeriss-like"} <= PRESETS.keys()
    for name in ("edge", "tpu-like", "eyeriss-like"):
        assert PRESETS[name].extensions_on == EXTENSIONS
    assert PRESETS["sparsetrain-like"].extensions_on == ("zero_skipping",)
    assert PRESETS["sparsetrain-like"].dataflow == "row"
    assert PRESETS["mercury-like"].extensions_on == ("mcache",)
    assert PRESETS["mercury-like"].mcache.lookups_per_cycle == 0  # one port per PE row
    assert PRESETS["adagp-like"].extensions_on == ("gradient_predictor",)


def test_results_say_which_extensions_were_on() -> None:
    op = GemmOp(layer="l", pass_=TrainingPass.FWD, m=8, k=8, n=8, executions=1)
    plain = PRESETS["edge"].with_extensions(frozenset())
    assert simulate(_workload(op), plain).extensions == ()
    result = simulate(_workload(op), PRESETS["mercury-like"])
    assert result.extensions == ("mcache",)
    assert result.to_dict()["extensions"] == ["mcache"]


def test_orrery_simulate_runs_the_plain_preset_and_says_so() -> None:
    from backend.cli import app

    out = CliRunner().invoke(
        app, ["simulate", "lenet5", "--accel", "sparsetrain-like", "--batch-size", "4"],
        env={"COLUMNS": "250"},
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "extensions on: none" in out.output
    assert "sparsetrain-like offers: zero_skipping" in out.output


def test_accelerators_stored_with_the_retired_mcache_geometry_still_load() -> None:
    stored = PRESETS["edge"].model_dump()
    stored["mcache"] |= {"mcache_entries": 2048, "mcache_ways": 8}
    loaded = AcceleratorConfig.model_validate(stored)
    assert loaded == PRESETS["edge"]
    assert "mcache_entries" not in loaded.model_dump()["mcache"]
    stored["mcache"]["mcache_colour"] = "blue"
    with pytest.raises(ValueError, match="mcache_colour"):
        AcceleratorConfig.model_validate(stored)
