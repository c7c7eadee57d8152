"""Compressed sparse operands, and what a simulation says about its convolution traffic."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from backend.experiments.expand import baseline_hardware_for
from backend.sim import TrainingPass, Workload, simulate
from backend.sim.lowering import lower_conv2d, lower_linear
from backend.specs.accelerator import PRESETS, AcceleratorConfig, OperandStorage
from backend.specs.techniques import accelerator_for


def _conv_workload(grad_density: float, geometry: bool = True) -> Workload:
    ops = lower_conv2d("conv", 8, 16, 16, 14, 14, 3, 1, padding=1)
    ops = [
        replace(op, density_a=grad_density) if op.pass_ is not TrainingPass.FWD else op
        for op in ops
    ]
    if not geometry:
        ops = [replace(op, conv=None) for op in ops]
    return Workload("m", "d", 8, 1, ops)


def _backward_dram_words(accel: AcceleratorConfig, grad_density: float) -> dict[str, float]:
    rows = simulate(_conv_workload(grad_density), accel).layers
    return {r.pass_: r.dram_reads + r.dram_writes for r in rows if r.pass_ != "fwd"}


def _with_compressed_gradients(accel: AcceleratorConfig) -> AcceleratorConfig:
    storage = accel.storage.model_copy(update={"gradients": "compressed"})
    return accel.model_copy(update={"name": f"{accel.name}+compressed", "storage": storage})


CASES = [*PRESETS.values(), *(_with_compressed_gradients(p) for p in PRESETS.values())]


@pytest.mark.parametrize("accel", CASES, ids=[a.name for a in CASES])
def test_gradient_density_moves_dram_words_only_where_gradients_are_stored_sparse(accel) -> None:
    dense_grads = _backward_dram_words(accel, 1.0)
    sparse_grads = _backward_dram_words(accel, 0.1)
    for pass_ in ("bwd_data", "bwd_weight"):
        if accel.storage.gradients == "dense":
            assert sparse_grads[pass_] == dense_grads[pass_]
        else:
            assert sparse_grads[pass_] < dense_grads[pass_]


def test_words_per_element_follow_the_stated_formulas() -> None:
    """One linear layer, FWD only, everything in one fold: DRAM words = elements x formula."""
    m, k, n = 8, 16, 4
    op = replace(lower_linear("fc", m, k, n)[0], density_a=0.25, density_b=0.5, density_c=0.75)
    big = dict(ifmap_sram_kib=64, filter_sram_kib=64, ofmap_sram_kib=64, rows=32, cols=32)
    word_bits, index_bits = 32, 16
    expected = {
        "dense": (m * k, k * n, m * n),
        "bitmap": (m * k * (0.25 + 1 / word_bits), k * n * (0.5 + 1 / word_bits),
                   m * n * (0.75 + 1 / word_bits)),
        "compressed": (m * k * 0.25 * 1.5, k * n * 0.5 * 1.5, m * n * 0.75 * 1.5),
    }  # fmt: skip
    for fmt, (a, b, c) in expected.items():
        storage = OperandStorage(
            activations=fmt,
            weights=fmt,
            gradients="dense",
            index_bits=index_bits,
            dense_fallback=False,
        )
        row = simulate(Workload("m", "d", 1, 1, [op]), AcceleratorConfig(storage=storage, **big))
        row = row.layers[0]
        assert row.dram_reads_by_operand["ifmap"] == pytest.approx(a)
        assert row.dram_reads_by_operand["filter"] == pytest.approx(b)
        assert row.dram_writes_by_operand["ofmap"] == pytest.approx(c)


def _linear_workload(density: float) -> Workload:
    """Two linear layers, every operand small enough to fit one SRAM half of every preset, so
    each element crosses DRAM once; A (activations in FWD, gradients in BWD) at `density`."""
    ops = lower_linear("fc1", 16, 32, 8) + lower_linear("fc2", 16, 8, 4)
    return Workload("m", "d", 16, 3, [replace(op, density_a=density) for op in ops])


def _dense_words(workload: Workload) -> dict[str, float]:
    """Brute force: build every operand of every GEMM and count its elements (each moves once,
    one word each, when stored dense)."""
    words = {"ifmap": 0.0, "filter": 0.0, "ofmap": 0.0}
    for op in workload.ops:
        a, b = np.ones((op.m, op.k)), np.ones((op.k, op.n))
        c = a @ b
        words["ifmap"] += a.size * op.executions
        words["filter"] += b.size * op.executions
        words["ofmap"] += c.size * op.executions
    return words


@pytest.mark.parametrize("density", [1.0, 0.3])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_dense_baseline_stores_and_moves_dense_words(preset: str, density: float) -> None:
    """The baseline an experiment measures against ('dense') is dense in storage too: at any
    density its DRAM words are the operands' elements, one word each; so is a run whose
    techniques do not use zero-skipping."""
    workload = _linear_workload(density)
    expected = _dense_words(workload)
    baseline = AcceleratorConfig.model_validate(
        baseline_hardware_for(PRESETS[preset].model_dump(), "dense")
    )
    no_zero_skipping = accelerator_for(PRESETS[preset], {"mercury", "adagp"})
    for hardware in (baseline, no_zero_skipping):
        assert hardware.storage == OperandStorage()
        totals = simulate(workload, hardware).totals
        assert totals.dram_reads_by_operand["ifmap"] == expected["ifmap"]
        assert totals.dram_reads_by_operand["filter"] == expected["filter"]
        assert totals.dram_writes_by_operand["ofmap"] == expected["ofmap"]
        assert totals.dram_reads_by_operand["ofmap"] == 0
        assert totals.dram_bytes == sum(expected.values()) * hardware.word_bytes


def test_sparsetrain_hardware_keeps_its_compressed_storage_and_the_same_baseline_too() -> None:
    own = accelerator_for(PRESETS["sparsetrain-like"], {"sparsetrain"})
    same = AcceleratorConfig.model_validate(
        baseline_hardware_for(PRESETS["sparsetrain-like"].model_dump(), "same")
    )
    sparse = _linear_workload(0.3)
    for hardware in (own, same):
        assert hardware.storage == PRESETS["sparsetrain-like"].storage
        assert hardware.storage.activations == "compressed"
        moved = simulate(sparse, hardware).totals.dram_reads_by_operand["ifmap"]
        assert moved == pytest.approx(0.3 * 1.5 * _dense_words(sparse)["ifmap"])


@pytest.mark.parametrize("index_bits", [4, 16, 32])
@pytest.mark.parametrize("fmt", ["bitmap", "compressed"])
def test_a_format_falls_back_to_dense_where_it_would_be_larger(fmt: str, index_bits: int) -> None:
    """At density 1.0 a sparse format with fallback costs exactly the dense words; without it,
    its formula's (compressed 1 + index_bits / w, bitmap 1 + 1 / w per element). Where the
    format is smaller, fallback or not, the format's words."""
    m, k, n = 8, 16, 4
    big = dict(ifmap_sram_kib=64, filter_sram_kib=64, ofmap_sram_kib=64, rows=32, cols=32)
    overhead = {"bitmap": 1 / 32, "compressed": index_bits / 32}[fmt]

    def moved(density: float, fallback: bool) -> tuple[float, float, float]:
        op = replace(
            lower_linear("fc", m, k, n)[0],
            density_a=density, density_b=density, density_c=density,
        )  # fmt: skip
        storage = OperandStorage(
            activations=fmt, weights=fmt, gradients=fmt, index_bits=index_bits,
            dense_fallback=fallback,
        )  # fmt: skip
        row = simulate(Workload("m", "d", 1, 1, [op]), AcceleratorConfig(storage=storage, **big))
        layer = row.layers[0]
        return (
            layer.dram_reads_by_operand["ifmap"],
            layer.dram_reads_by_operand["filter"],
            layer.dram_writes_by_operand["ofmap"],
        )

    elements = (m * k, k * n, m * n)
    assert moved(1.0, True) == elements
    assert moved(1.0, False) == pytest.approx([e * (1 + overhead) for e in elements])
    per_element = {"bitmap": 0.25 + 1 / 32, "compressed": 0.25 * (1 + overhead)}[fmt]
    for fallback in (True, False):
        assert moved(0.25, fallback) == pytest.approx([e * per_element for e in elements])


def test_convolutions_without_geometry_keep_im2col_and_the_run_says_so() -> None:
    accel = PRESETS["edge"]
    assert accel.conv_operand_traffic == "tensor"
    im2col = accel.model_copy(update={"conv_operand_traffic": "im2col"})
    stored_before_geometry = simulate(_conv_workload(1.0, geometry=False), accel)
    with_geometry = simulate(_conv_workload(1.0), accel)
    assert stored_before_geometry.notes and "geometry" in stored_before_geometry.notes[0]
    assert not with_geometry.notes
    assert stored_before_geometry.to_dict()["notes"] == stored_before_geometry.notes
    as_im2col = simulate(_conv_workload(1.0), im2col)
    assert stored_before_geometry.totals.dram_reads == as_im2col.totals.dram_reads
    assert with_geometry.totals.dram_reads < as_im2col.totals.dram_reads


def test_dilated_convolutions_keep_im2col_and_are_named() -> None:
    ops = lower_conv2d("atrous", 2, 4, 4, 12, 12, 3, 1, padding=2, dilation=2)
    ops += lower_conv2d("plain", 2, 4, 4, 12, 12, 3, 1, padding=1)
    result = simulate(Workload("m", "d", 2, 1, ops), PRESETS["edge"])
    assert result.notes == ["dilated convolutions moved im2col matrices: atrous"]
