"""Tensor traffic of convolutions against a fold-by-fold reference over the real tensor elements.

The reference walks the folds in SCALE-Sim's order (column folds outer, row folds inner), takes
each fold's tile of the GEMM operand, maps every (GEMM row, GEMM column) of the tile back to the
input element x[n, c, ih, iw] (or dX element) it stands for through the im2col definition, moves
whole rows of those elements (the transfer unit of the model), and tracks which elements each of
the two SRAM halves holds: the half filled for a fold keeps its elements for the next fold when
they fit; everything stays when the whole operand fits one half. It counts DRAM words moved.
backend.sim.conv_traffic must agree: exact, or above and within 10 %.
"""

from __future__ import annotations

import numpy as np

from backend.sim.conv_traffic import count_folds, fold_rows, input_reads, output_traffic
from backend.sim.systolic import DATAFLOW_CODES
from backend.sim.workload import ConvGeometry, TrainingPass

CASES = 300
TOLERANCE = 1.10


def _random_case(rng: np.random.Generator) -> dict:
    kernel, kernel_w = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    height, width = int(rng.integers(kernel, 9)), int(rng.integers(kernel_w, 9))
    groups = int(rng.choice([1, 1, 1, 2]))
    conv = ConvGeometry(
        batch=int(rng.integers(1, 4)),
        in_channels=groups * int(rng.integers(1, 4)),
        out_channels=groups * int(rng.integers(1, 6)),
        height=height,
        width=width,
        kernel_h=kernel,
        kernel_w=kernel_w,
        stride_h=int(rng.integers(1, 4)),
        stride_w=int(rng.integers(1, 3)),
        # at most half the kernel, as PyTorch allows
        pad_h=int(rng.integers(0, kernel // 2 + 1)),
        pad_w=int(rng.integers(0, kernel_w // 2 + 1)),
        groups=groups,
    )
    return {
        "conv": conv,
        "pass": TrainingPass(rng.choice([p.value for p in TrainingPass])),
        "dataflow": str(rng.choice(["os", "ws", "is"])),
        "rows": int(rng.integers(1, 9)),
        "cols": int(rng.integers(1, 9)),
        "half_words": int(rng.choice([8, 16, 24, 48, 96, 400])),
    }


def _gemm(conv: ConvGeometry, pass_: TrainingPass) -> tuple[int, int, int]:
    positions = conv.batch * conv.out_h * conv.out_w
    window = conv.in_channels // conv.groups * conv.kernel_h * conv.kernel_w
    filters = conv.out_channels // conv.groups
    return {
        TrainingPass.FWD: (positions, window, filters),
        TrainingPass.BWD_DATA: (positions, filters, window),
        TrainingPass.BWD_WEIGHT: (filters, positions, window),
    }[pass_]


def _fold_tiles(m: int, k: int, n: int, dataflow: str, rows: int, cols: int):
    """Yield, fold by fold in SCALE-Sim's order, the index ranges (m, k, n) the fold touches."""
    spatial = {"os": ("m", "n"), "ws": ("k", "n"), "is": ("k", "m")}[dataflow]
    sizes = {"m": m, "k": k, "n": n}
    sr, sc = spatial
    for c0 in range(0, sizes[sc], cols):
        for r0 in range(0, sizes[sr], rows):
            ranges = {d: range(sizes[d]) for d in "mkn"}
            ranges[sr] = range(r0, min(r0 + rows, sizes[sr]))
            ranges[sc] = range(c0, min(c0 + cols, sizes[sc]))
            yield ranges


def _elements(conv: ConvGeometry, pos: range, off: range) -> set[int]:
    """Elements (one group's tensor, flat n, c, h, w) of the whole rows touched by the windows
    of output positions `pos` at window offsets `off`. A row moves whole, so a window element
    that falls in the row's left or right padding still brings its row (the model's address
    generator works in rows); one in the top or bottom padding touches no row."""
    channels = conv.in_channels // conv.groups
    p = np.repeat(np.array(pos), len(off))
    q = np.tile(np.array(off), len(pos))
    n, rest = np.divmod(p, conv.out_h * conv.out_w)
    oh = rest // conv.out_w
    c, rest = np.divmod(q, conv.kernel_h * conv.kernel_w)
    r = rest // conv.kernel_w
    ih = oh * conv.stride_h - conv.pad_h + r
    real = (ih >= 0) & (ih < conv.height)
    rows = np.unique(((n * channels + c) * conv.height + ih)[real])
    return {int(row) * conv.width + w for row in rows for w in range(conv.width)}


def _fold_elements(case: dict) -> list[set[int]]:
    conv, pass_ = case["conv"], case["pass"]
    m, k, n = _gemm(conv, pass_)
    folds = []
    for t in _fold_tiles(m, k, n, case["dataflow"], case["rows"], case["cols"]):
        if pass_ is TrainingPass.FWD:  # A = im2col(x): m positions x k offsets
            folds.append(_elements(conv, t["m"], t["k"]))
        elif pass_ is TrainingPass.BWD_WEIGHT:  # B = im2col(x): k positions x n offsets
            folds.append(_elements(conv, t["k"], t["n"]))
        else:  # C = dX in im2col space: m positions x n offsets
            folds.append(_elements(conv, t["m"], t["n"]))
    return folds


def reference_reads(folds: list[set[int]], half: int) -> int:
    everything = set().union(*folds)
    if len(everything) <= half:
        return len(everything)
    halves: list[set[int]] = [set(), set()]
    moved = 0
    for f, needed in enumerate(folds):
        other = halves[(f + 1) % 2]  # the previous fold's half
        moved += len(needed - other)
        halves[f % 2] = needed if len(needed) <= half else set()
    return moved


def reference_writes_reads(folds: list[set[int]], half: int, tensor: int) -> tuple[int, int]:
    if tensor <= half:
        return tensor, 0
    touched = set().union(*folds)
    writes = reads = 0
    in_dram: set[int] = set()
    on_chip: set[int] = set()
    for needed in folds:
        kept = on_chip & needed
        leaving = on_chip - kept
        writes += len(leaving)
        in_dram |= leaving
        reads += len((needed - kept) & in_dram)
        on_chip = needed if len(needed) <= half else set()
        if len(needed) > half:  # the fold's partial sums leave as soon as it is done
            writes += len(needed)
            in_dram |= needed
    writes += len(on_chip)
    return writes + (tensor - len(touched)), reads


def _ours(case: dict) -> int | tuple[int, int]:
    folds = fold_rows(
        case["conv"], case["pass"], DATAFLOW_CODES[case["dataflow"]], case["rows"], case["cols"]
    )
    if case["pass"] is TrainingPass.BWD_DATA:
        writes, reads = output_traffic(folds, case["half_words"])
        return int(writes), int(reads)
    return int(input_reads(folds, case["half_words"]))


def test_closed_form_matches_the_fold_by_fold_reference() -> None:
    rng = np.random.default_rng(20261203)
    exact, worst, checked = 0, 1.0, 0
    while checked < CASES:
        case = _random_case(rng)
        conv = case["conv"]
        if conv.out_h < 1 or conv.out_w < 1:
            continue
        checked += 1
        folds = _fold_elements(case)
        half = case["half_words"]
        ours = _ours(case)
        if case["pass"] is TrainingPass.BWD_DATA:
            tensor = conv.batch * conv.in_channels // conv.groups * conv.height * conv.width
            reference = reference_writes_reads(folds, half, tensor)
            pairs = list(zip(ours, reference, strict=True))
        else:
            reference = reference_reads(folds, half)
            pairs = [(ours, reference)]
        for mine, theirs in pairs:
            assert mine >= theirs, (case, ours, reference)
            assert mine <= TOLERANCE * theirs, (case, ours, reference)
            worst = max(worst, mine / theirs if theirs else 1.0)
        exact += ours == reference
    print(f"\n{checked} cases, {exact} exact, worst ratio {worst:.4f}")
    assert checked >= 200


def test_counting_many_gemms_together_equals_counting_each_alone() -> None:
    """simulate() counts the folds of every GEMM of a config in one pass; the brute-force test
    above checks them one by one."""
    rng = np.random.default_rng(11)
    cases = [c for c in (_random_case(rng) for _ in range(300)) if c["conv"].out_h >= 1]

    def folds_of(case: dict):
        return fold_rows(
            case["conv"], case["pass"], DATAFLOW_CODES[case["dataflow"]], case["rows"],
            case["cols"],
        )  # fmt: skip

    fold_rows.cache_clear()
    together = [folds_of(case) for case in cases]
    count_folds(together)
    fold_rows.cache_clear()
    for case, counted in zip(cases, together, strict=True):
        alone = folds_of(case).counts
        for field in ("rows", "repeats", "before", "shared", "times"):
            assert np.array_equal(getattr(counted.counts, field), getattr(alone, field)), case


def test_tensor_traffic_never_exceeds_im2col_and_equals_it_without_geometry() -> None:
    from dataclasses import replace

    from backend.sim import Workload, simulate
    from backend.sim.lowering import lower_conv2d
    from backend.specs.accelerator import AcceleratorConfig

    rng = np.random.default_rng(7)
    for _ in range(60):
        case = _random_case(rng)
        conv = case["conv"]
        if conv.out_h < 1 or conv.out_w < 1:
            continue
        ops = lower_conv2d(
            "c", conv.batch, conv.in_channels, conv.out_channels, conv.height, conv.width,
            (conv.kernel_h, conv.kernel_w), (conv.stride_h, conv.stride_w),
            (conv.pad_h, conv.pad_w), conv.groups,
        )  # fmt: skip
        accel = AcceleratorConfig(
            rows=case["rows"], cols=case["cols"], dataflow=case["dataflow"],
            ifmap_sram_kib=1, filter_sram_kib=1, ofmap_sram_kib=1, word_bytes=8,
        )  # fmt: skip
        tensor = accel.model_copy(update={"conv_operand_traffic": "tensor"})
        im2col_rows = simulate(Workload("m", "d", 1, 1, ops), accel).layers
        tensor_rows = simulate(Workload("m", "d", 1, 1, ops), tensor).layers
        for a, b in zip(im2col_rows, tensor_rows, strict=True):
            assert b.dram_reads + b.dram_writes <= a.dram_reads + a.dram_writes
            assert b.compute_cycles == a.compute_cycles
        bare = [replace(op, conv=None) for op in ops]
        no_geometry = simulate(Workload("m", "d", 1, 1, bare), tensor)
        assert (
            no_geometry.totals.dram_bytes
            == simulate(Workload("m", "d", 1, 1, ops), accel).totals.dram_bytes
        )
