"""The 1-D convolution dataflow against a reference that walks every PE at every time step.

The reference places the 1-D tasks on the PEs as backend.sim.row_dataflow's table says, folds them
over time, and for each step of each fold takes the busiest PE, whose work it counts by
enumerating the products of its row pair on random sparse tensors. The closed form sees only the
per-row work the training would measure (backend.training.sparsity.line_macs).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from backend.sim import GemmOp, TrainingPass, Workload, simulate
from backend.sim.lowering import lower_conv2d, lower_linear
from backend.sim.row_dataflow import gradient_taps, input_taps, kernel_taps
from backend.sim.workload import ConvGeometry
from backend.specs.accelerator import AcceleratorConfig, ZeroSkipping
from backend.training.sparsity import line_macs

BIG_SRAM_KIB = 1 << 16


def _random_conv(rng: np.random.Generator) -> ConvGeometry:
    groups = int(rng.choice([1, 1, 2]))
    kernel_h, kernel_w = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    dilation_h, dilation_w = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    height = int(rng.integers(dilation_h * (kernel_h - 1) + 1, 8))
    width = int(rng.integers(dilation_w * (kernel_w - 1) + 1, 8))
    return ConvGeometry(
        batch=int(rng.integers(1, 3)),
        in_channels=groups * int(rng.integers(1, 4)),
        out_channels=groups * int(rng.integers(1, 4)),
        height=height,
        width=width,
        kernel_h=kernel_h,
        kernel_w=kernel_w,
        stride_h=int(rng.integers(1, 3)),
        stride_w=int(rng.integers(1, 3)),
        pad_h=int(rng.integers(0, 2)),
        pad_w=int(rng.integers(0, 2)),
        dilation_h=dilation_h,
        dilation_w=dilation_w,
        groups=groups,
    )


def _mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.random(shape) < rng.choice([0.0, 0.2, 0.5, 0.9, 1.0])).astype(np.float32)


def _density(mask: np.ndarray) -> float:
    return float(mask.mean()) if mask.size else 1.0


def _measured_ops(g: ConvGeometry, x: np.ndarray, dy: np.ndarray, w: np.ndarray) -> list[GemmOp]:
    """The conv's three GEMMs as the training would record them."""
    x_lines = line_macs(torch.from_numpy(x), input_taps(g))
    dy_lines = line_macs(torch.from_numpy(dy), gradient_taps(g))
    w_lines = line_macs(torch.from_numpy(w), kernel_taps(g))
    tensors = {
        TrainingPass.FWD: ((x, x_lines), (w, w_lines)),
        TrainingPass.BWD_DATA: ((dy, dy_lines), (w, w_lines)),
        TrainingPass.BWD_WEIGHT: ((dy, dy_lines), (x, x_lines)),
    }
    ops = lower_conv2d(
        "conv", g.batch, g.in_channels, g.out_channels, g.height, g.width,
        (g.kernel_h, g.kernel_w), (g.stride_h, g.stride_w), (g.pad_h, g.pad_w), g.groups,
        (g.dilation_h, g.dilation_w),
    )  # fmt: skip
    for op in ops:
        (a, a_lines), (b, b_lines) = tensors[op.pass_]
        op.density_a, op.density_b = _density(a), _density(b)
        op.a_line_macs, op.b_line_macs = a_lines, b_lines
    return ops


def _reference_cycles(
    g: ConvGeometry,
    pass_: TrainingPass,
    skipped: str | None,
    masks: dict[str, np.ndarray],
    rows: int,
    cols: int,
) -> int:
    """Walk every fold, step and PE; `skipped` is the tensor whose zeros are skipped (None:
    dense)."""
    cg, kg = g.in_channels // g.groups, g.out_channels // g.groups
    kernel_rows, S, OW = g.kernel_h, g.kernel_w, g.out_w
    out_rows = [(n, oh) for n in range(g.batch) for oh in range(g.out_h)]
    lanes, columns, steps = {
        TrainingPass.FWD: (range(kg), out_rows, range(cg)),
        TrainingPass.BWD_DATA: (range(cg), out_rows, range(kg)),
        TrainingPass.BWD_WEIGHT: (range(cg), range(kg), out_rows),
    }[pass_]
    lanes, columns, steps = list(lanes), list(columns), list(steps)

    def work(group: int, u: int, r: int, j, t) -> int:
        if pass_ is TrainingPass.FWD:
            k, c, (n, oh) = u, t, j
        elif pass_ is TrainingPass.BWD_DATA:
            c, k, (n, oh) = u, t, j
        else:
            c, k, (n, oh) = u, j, t
        c += group * cg
        k += group * kg
        if skipped is None:
            return S * OW
        h = oh * g.stride_h - g.pad_h + r * g.dilation_h
        if not 0 <= h < g.height:
            return 0
        done = 0
        for ow, s in itertools.product(range(OW), range(S)):
            col = ow * g.stride_w - g.pad_w + s * g.dilation_w
            if not 0 <= col < g.width:
                continue
            element = {
                "x": lambda: masks["x"][n, c, h, col],  # noqa: B023
                "dy": lambda: masks["dy"][n, k, oh, ow],  # noqa: B023
                "w": lambda: masks["w"][k, c - group * cg, r, s],  # noqa: B023
            }[skipped]()
            done += int(element != 0)
        return done

    if kernel_rows <= rows:
        per_fold = rows // kernel_rows
        row_folds = [
            [(u, r) for u in lanes[i : i + per_fold] for r in range(kernel_rows)]
            for i in range(0, len(lanes), per_fold)
        ]
    else:
        row_folds = [
            [(u, r) for r in range(p, min(p + rows, kernel_rows))]
            for u in lanes
            for p in range(0, kernel_rows, rows)
        ]
    col_folds = [columns[i : i + cols] for i in range(0, len(columns), cols)]
    total = 0
    for group in range(g.groups):
        cycles = 0
        for row_fold, col_fold in itertools.product(row_folds, col_folds):
            for t in steps:
                cycles += max(work(group, u, r, j, t) for (u, r) in row_fold for j in col_fold)
            cycles += rows + cols - 2
        total += cycles - 1
    return total


def _skipped_tensor(op: GemmOp) -> str:
    a, b = {
        TrainingPass.FWD: ("x", "w"),
        TrainingPass.BWD_DATA: ("dy", "w"),
        TrainingPass.BWD_WEIGHT: ("dy", "x"),
    }[op.pass_]
    return a if op.density_a <= op.density_b else b


@pytest.mark.parametrize("seed", range(60))
def test_row_dataflow_equals_the_per_pe_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = _random_conv(rng)
    masks = {
        "x": _mask(rng, (g.batch, g.in_channels, g.height, g.width)),
        "dy": _mask(rng, (g.batch, g.out_channels, g.out_h, g.out_w)),
        "w": _mask(rng, (g.out_channels, g.in_channels // g.groups, g.kernel_h, g.kernel_w)),
    }
    ops = _measured_ops(g, masks["x"], masks["dy"], masks["w"])
    for rows, cols in [(int(rng.integers(1, 9)), int(rng.integers(1, 9))), (2, 3), (8, 1)]:
        cycles = {}
        for skips in (True, False):
            accel = AcceleratorConfig(
                rows=rows,
                cols=cols,
                dataflow="row",
                ifmap_sram_kib=BIG_SRAM_KIB,
                filter_sram_kib=BIG_SRAM_KIB,
                ofmap_sram_kib=BIG_SRAM_KIB,
                zero_skipping=ZeroSkipping(enabled=skips),
            )
            result = simulate(Workload("m", "d", g.batch, 1, ops), accel)
            for op, row in zip(ops, result.layers, strict=True):
                skipped = _skipped_tensor(op) if skips else None
                expected = _reference_cycles(g, op.pass_, skipped, masks, rows, cols)
                assert row.array_cycles == pytest.approx(expected, rel=1e-12, abs=1e-9), (
                    g, op.pass_, skipped, rows, cols,
                )  # fmt: skip
            cycles[skips] = [row.array_cycles for row in result.layers]
        # skipping zeros never costs cycles
        assert all(a <= b for a, b in zip(cycles[True], cycles[False], strict=True))


def test_dense_row_dataflow_does_the_gemms_macs_in_lockstep() -> None:
    """Every task dense: folds x (steps x S*OW + fill and drain) - 1."""
    ops = lower_conv2d("c", 2, 4, 6, 8, 8, 3, padding=1)
    accel = AcceleratorConfig(rows=6, cols=5, dataflow="row")
    rows = simulate(Workload("m", "d", 2, 1, ops), accel).layers
    # FWD: lanes k=6, two per row fold of 3 kernel rows -> 3 row folds; columns 2*8 -> 4 folds.
    assert rows[0].array_cycles == 3 * 4 * (4 * 3 * 8 + 6 + 5 - 2) - 1
    # BWD-WEIGHT: lanes c=4 -> 2 row folds; columns k=6 -> 2 folds; 16 steps.
    assert rows[2].array_cycles == 2 * 2 * (16 * 3 * 8 + 6 + 5 - 2) - 1
    assert all(row.macs_actual == ops[0].m * ops[0].k * ops[0].n for row in rows)


def test_gemms_without_geometry_run_as_output_stationary() -> None:
    ops = lower_linear("fc", 32, 50, 10)
    ops[0].density_a = 0.3
    ops[0].a_row_nnz = np.random.default_rng(0).binomial(50, 0.3, 32)
    row_accel = AcceleratorConfig(rows=8, cols=8, dataflow="row")
    os_accel = row_accel.model_copy(update={"dataflow": "os"})
    workload = Workload("m", "d", 32, 1, ops)
    by_rows = simulate(workload, row_accel).to_dict()["layers"]
    by_os = simulate(workload, os_accel).to_dict()["layers"]
    assert by_rows == by_os


def test_a_sample_of_row_counts_covers_the_tensor_in_order() -> None:
    g = ConvGeometry(batch=2, in_channels=2, out_channels=2, height=4, width=4, kernel_h=3,
                     kernel_w=3, pad_h=1, pad_w=1)  # fmt: skip
    full = lower_conv2d("c", 2, 2, 2, 4, 4, 3, padding=1)[0]
    full.density_a = 0.5
    counts = np.arange(16) % 5
    full.a_line_macs = np.tile(counts, 2 * 2 * 4 // 16)
    sampled = lower_conv2d("c", 2, 2, 2, 4, 4, 3, padding=1)[0]
    sampled.density_a = 0.5
    sampled.a_line_macs = counts
    accel = AcceleratorConfig(rows=3, cols=2, dataflow="row")
    assert g.out_h == 4
    one = simulate(Workload("m", "d", 2, 1, [full]), accel).layers[0]
    two = simulate(Workload("m", "d", 2, 1, [sampled]), accel).layers[0]
    assert one.array_cycles == two.array_cycles
