"""DRAM traffic of GEMMs with MERCURY's reuse against an element-by-element reference.

The reference walks the folds of the GEMM the array computes (SCALE-Sim's order, column folds
outer, row folds inner) over the elements of the real tensors:

- A: a fold reads each A element its tile needs unless the SRAM half still holds it; an element
  read while the half has room stays there (the part that fits stays resident).
- C: a fold adds its partial sums into the C elements of its tile; an element stays on chip while
  the OFMAP half has room among the unfinished ones, otherwise it is written out after the fold
  and read back by the next; the fold that covers the last of k writes it.
- Reuse, hit rows copied, not computed: the array computes only the missed rows of a FWD GEMM,
  but every hit row's window is read once (its signature needs it) and its copied output is
  written once (the next layer reads the whole output). BWD-WEIGHT with folded hit groups: the
  array reduces over one position per group, and the first read of a group's dY element reads
  every dY of the group (summed on chip); the group sums form a packed tensor: one a later fold
  needs again and the half cannot hold is written out once, and a re-read reads it (one word).

backend.sim.memory's closed forms, with backend.sim.simulate's reuse accounting, must agree exactly.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from backend.sim import TrainingPass, Workload, simulate
from backend.sim.workload import GemmOp
from backend.specs.accelerator import AcceleratorConfig
from tests.sim.test_conv_traffic import _fold_tiles

WORD_BYTES = 8


def reference(
    case: dict, hits: set[int], groups: list[list[int]] | None
) -> tuple[int, int, int, int]:
    """(A reads, A writes, C writes, C reads) in words for one execution of the case's GEMM."""
    m, k, n = case["m"], case["k"], case["n"]
    missed = [row for row in range(m) if row not in hits]
    reduced_k = len(groups) if groups is not None else k
    folded = reduced_k < k
    cap_a, cap_c = case["half_a"], case["half_c"]
    a_reads = a_writes = c_writes = c_reads = 0
    a_held: set[tuple[int, int]] = set()
    a_read_before: set[tuple[int, int]] = set()
    c_held: set[tuple[int, int]] = set()  # unfinished partial sums kept on chip
    c_out: set[tuple[int, int]] = set()  # unfinished partial sums written out
    folds = list(
        _fold_tiles(len(missed), reduced_k, n, case["dataflow"], case["rows"], case["cols"])
    )
    uses = Counter((missed[i], j) for tile in folds for i in tile["m"] for j in tile["k"])
    for tile in folds:
        for i in tile["m"]:
            for j in tile["k"]:
                element = (missed[i], j)
                if element in a_held:
                    continue
                first = element not in a_read_before
                a_reads += len(groups[j]) if groups is not None and first else 1
                a_read_before.add(element)
                if len(a_held) < cap_a:
                    a_held.add(element)
                elif folded and first and uses[element] > 1:
                    a_writes += 1  # the group sums, packed, kept in DRAM for later folds
        finishes = tile["k"].stop == reduced_k
        for i in tile["m"]:
            for col in tile["n"]:
                element = (missed[i], col)
                if element in c_out:
                    c_reads += 1
                    c_out.discard(element)
                if finishes:
                    c_writes += 1
                    c_held.discard(element)
                elif element not in c_held:
                    if len(c_held) < cap_c:
                        c_held.add(element)
                    else:
                        c_writes += 1
                        c_out.add(element)
    for row in sorted(hits):  # copied, not computed
        a_reads += len({(row, j) for j in range(k)})  # its window, read for its signature
        c_writes += len({(row, col) for col in range(n)})  # its copy, written to the output
    return a_reads, a_writes, c_writes, c_reads


def _random_case(rng: np.random.Generator, pass_: TrainingPass) -> dict:
    dataflow = str(rng.choice(["os", "ws", "is"]))
    rows, cols = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    m, k, n = (int(v) for v in rng.integers(2, 33, size=3))
    # The closed form gives a partly filled last column fold a full-width partial-sum tile;
    # the reference counts its real elements, so the column dimension is a multiple of cols.
    if dataflow == "ws":
        n = cols * int(rng.integers(1, 7))
    hit_count = int(rng.integers(0, m)) if pass_ is TrainingPass.FWD else 0
    if dataflow == "is" and pass_ is TrainingPass.FWD:
        m = cols * int(rng.integers(1, 7)) + hit_count
    elif dataflow == "is":
        m = cols * int(rng.integers(1, 7))
    return {
        "pass": pass_,
        "dataflow": dataflow,
        "rows": rows,
        "cols": cols,
        "m": m,
        "k": k,
        "n": n,
        "hits": hit_count,
        # SRAMs come in whole KiB: a half holds 64 words of 8 bytes per KiB.
        "half_a": 64 * int(rng.choice([1, 1, 2])),
        "half_c": 64 * int(rng.choice([1, 1, 2])),
    }


def _accelerator(case: dict, mcache: bool = True) -> AcceleratorConfig:
    config = AcceleratorConfig(
        rows=case["rows"],
        cols=case["cols"],
        dataflow=case["dataflow"],
        ifmap_sram_kib=case["half_a"] * 2 * WORD_BYTES // 1024,
        filter_sram_kib=64,
        ofmap_sram_kib=case["half_c"] * 2 * WORD_BYTES // 1024,
        word_bytes=WORD_BYTES,
    )
    return config if mcache else config.with_extensions(frozenset())


def _simulated(op: GemmOp, accel: AcceleratorConfig):
    return simulate(Workload("m", "d", 1, 1, [op]), accel).layers[0]


@pytest.mark.parametrize("pass_", [TrainingPass.FWD, TrainingPass.BWD_WEIGHT])
def test_reuse_traffic_equals_the_element_reference(pass_: TrainingPass) -> None:
    rng = np.random.default_rng(20261204 + (pass_ is TrainingPass.FWD))
    reduced = 0
    for _ in range(150):
        case = _random_case(rng, pass_)
        m, k, n = case["m"], case["k"], case["n"]
        hits: set[int] = set()
        groups: list[list[int]] | None = None
        op = GemmOp(layer="l", pass_=pass_, m=m, k=k, n=n, executions=1)
        if pass_ is TrainingPass.FWD:
            hits = {int(r) for r in rng.choice(m, size=case["hits"], replace=False)}
            op.reused_row_fraction = len(hits) / m
            kept_m, kept_k = m - len(hits), k
        else:
            count = int(rng.integers(1, k + 1))
            label = np.concatenate([np.arange(count), rng.integers(0, count, k - count)])
            rng.shuffle(label)
            groups = [np.flatnonzero(label == g).tolist() for g in range(count)]
            op.folded_k_fraction = count / k
            kept_m, kept_k = m, count
        reduced += kept_m < m or kept_k < k
        a_reads, a_writes, c_writes, c_reads = reference(case, hits, groups)
        row = _simulated(op, _accelerator(case))
        assert row.dram_reads_by_operand["ifmap"] == a_reads, case
        assert row.dram_writes_by_operand["ifmap"] == a_writes, case
        assert row.dram_writes_by_operand["ofmap"] == c_writes, case
        assert row.dram_reads_by_operand["ofmap"] == c_reads, case
        # The weights and every cycle are those of the GEMM the array really computes.
        computed = GemmOp(layer="l", pass_=pass_, m=kept_m, k=kept_k, n=n, executions=1)
        dense = _simulated(computed, _accelerator(case, mcache=False))
        assert row.dram_reads_by_operand["filter"] == dense.dram_reads_by_operand["filter"]
        assert row.array_cycles == dense.array_cycles
        assert row.macs_actual == dense.macs_actual
    assert reduced > 100


def test_a_hit_row_still_writes_its_output_and_a_folded_dy_is_still_read() -> None:
    """Everything fits one SRAM half: each tensor element moves once, reuse or not."""
    case = {"rows": 4, "cols": 4, "dataflow": "os", "half_a": 4096, "half_c": 4096}
    fwd = GemmOp(layer="l", pass_=TrainingPass.FWD, m=40, k=9, n=8, executions=1)
    fwd.reused_row_fraction = 0.75
    row = _simulated(fwd, _accelerator(case))
    assert row.dram_reads_by_operand["ifmap"] == 40 * 9  # every window, for its signature
    assert row.dram_writes_by_operand["ofmap"] == 40 * 8  # hit rows' copies written too
    assert row.macs_actual == 10 * 9 * 8
    weight = GemmOp(layer="l", pass_=TrainingPass.BWD_WEIGHT, m=8, k=40, n=9, executions=1)
    weight.folded_k_fraction = 0.25
    row = _simulated(weight, _accelerator(case))
    assert row.dram_reads_by_operand["ifmap"] == 8 * 40  # every dY
    assert row.dram_writes_by_operand["ifmap"] == 0  # the group sums stay on chip
    assert row.dram_reads_by_operand["filter"] == 10 * 9  # the groups' representative windows
    assert row.dram_writes_by_operand["ofmap"] == 8 * 9
    assert row.macs_actual == 8 * 10 * 9


def test_under_tensor_traffic_a_reusing_conv_moves_its_whole_input_and_output() -> None:
    """A convolution on an accelerator that forms windows on chip: with half its FWD rows hit,
    it still reads the whole input (every window is signed) and writes the whole output."""
    from dataclasses import replace

    from backend.sim.lowering import lower_conv2d

    fwd, _, weight = lower_conv2d("conv", 2, 3, 4, 8, 8, 3, padding=1)
    accel = AcceleratorConfig(rows=8, cols=8, conv_operand_traffic="tensor")
    dense = {op.pass_: _simulated(op, accel) for op in (fwd, weight)}
    reused = _simulated(replace(fwd, reused_row_fraction=0.5), accel)
    assert (
        reused.dram_reads_by_operand["ifmap"]
        == dense[TrainingPass.FWD].dram_reads_by_operand["ifmap"]
        == 2 * 3 * 8 * 8
    )
    assert reused.dram_writes_by_operand["ofmap"] == 2 * 4 * 8 * 8
    assert reused.macs_actual == dense[TrainingPass.FWD].macs_actual / 2
    folded = _simulated(replace(weight, folded_k_fraction=0.5), accel)
    assert folded.dram_reads_by_operand["ifmap"] == 2 * 4 * 8 * 8  # every dY
    assert folded.macs_actual == dense[TrainingPass.BWD_WEIGHT].macs_actual / 2
