"""The design search: batched evaluation against simulate() design by design, fronts against a
brute-force non-dominance filter, chunked against whole, the design numbering, and the spec's
errors."""

from __future__ import annotations

import itertools
import json
from typing import get_args

import numpy as np
import pytest
from pydantic import ValidationError

from backend.sim import GemmOp, TrainingPass, Workload, simulate
from backend.sim.area import McacheSize, area
from backend.sim.conv_traffic import fold_rows, moved_rows
from backend.sim.design_search import (
    SearchResult,
    design_at,
    design_count,
    design_table,
    evaluate_chunk,
    hardware_for,
    merge,
)
from backend.sim.lowering import lower_conv2d, lower_linear
from backend.sim.row_dataflow import gradient_taps, input_taps
from backend.sim.systolic import DATAFLOW_CODES
from backend.sim.workload import ConvGeometry
from backend.specs.accelerator import ACCELERATOR_FIELDS, PRESETS, OperandStorage
from backend.specs.design_search import CHOICE_FIELDS, SEARCH_FIELDS, DesignSearch

MERCURY_MCACHE = McacheSize(entries=2048, ways=8, signature_bits=40)


def _network(rng: np.random.Generator, sparse: bool) -> list[GemmOp]:
    """Three convolutions (one strided, one 1x1) and a classifier, lowered for training, with
    measured-like per-lane and per-row counts when `sparse`."""
    ops: list[GemmOp] = []
    size, channels = 12, 3
    for i, (out, kernel, stride) in enumerate([(8, 3, 1), (12, 3, 2), (16, 1, 1)]):
        ops += lower_conv2d(f"conv{i}", 2, channels, out, size, size, kernel, stride, kernel // 2)
        size = (size + 2 * (kernel // 2) - kernel) // stride + 1
        channels = out
    ops += lower_linear("fc", 2, channels * size * size, 10)
    for op in ops:
        op.executions = 6
        if not sparse:
            continue
        backward = op.pass_ is not TrainingPass.FWD
        density = 0.3 if backward else 0.55
        op.density_a = density
        op.a_row_nnz = rng.binomial(op.k, density, size=op.m).astype(np.int64)
        g = op.conv
        if g is None:
            continue
        if backward:
            mask = rng.random((g.batch * g.out_channels * g.out_h, g.out_w)) < density
            op.a_line_macs = (mask @ gradient_taps(g)).astype(np.int64)
        else:
            mask = rng.random((g.batch * g.in_channels * g.height, g.width)) < density
            op.a_line_macs = (mask @ input_taps(g)).astype(np.int64)
    return ops


def _workloads() -> dict[str, Workload]:
    """A workload per technique, each doing what its technique records: natural sparsity for the
    baseline, pruned gradients (SparseTrain), reused rows, folded reductions, MCACHE lookups and
    projections (MERCURY), predictor GEMMs and skipped backward passes (ADA-GP)."""
    rng = np.random.default_rng(4)

    def workload(technique: str, ops: list[GemmOp]) -> Workload:
        stored = Workload("net", "cifar10", 2, 6, ops, technique=technique).to_dict()
        return Workload.from_dict(json.loads(json.dumps(stored)))

    mercury = _network(rng, sparse=False)
    for op in list(mercury):
        if op.pass_ is TrainingPass.FWD and op.conv is not None:
            op.reused_row_fraction = 0.3
            op.extra_ops = {"mcache_lookups": float(op.m), "compares": float(8 * op.m)}
            mercury.append(
                GemmOp(
                    layer=f"{op.layer}.signature",
                    pass_=TrainingPass.FWD,
                    m=op.m,
                    k=op.k,
                    n=16,
                    executions=6,
                    role="overhead",
                    runs_on="projection",
                    fused_with=op.layer,
                )
            )
        if op.pass_ is TrainingPass.BWD_WEIGHT and op.conv is not None:
            op.folded_k_fraction = 0.6
    adagp = _network(rng, sparse=False)
    for op in list(adagp):
        if op.pass_ is not TrainingPass.FWD:
            op.executions = 2
        elif op.conv is not None:
            adagp.append(
                GemmOp(
                    layer=op.layer,
                    pass_=TrainingPass.FWD,
                    m=op.m // 4,
                    k=op.n,
                    n=op.n,
                    executions=4,
                    role="overhead",
                    runs_on="predictor",
                )
            )
    sparse = _network(rng, sparse=True)
    for op in sparse:
        if op.pass_ is not TrainingPass.FWD:
            op.extra_ops = {"compares": float(op.m * op.n), "random_numbers": float(op.m)}
    return {
        "baseline": workload("baseline", _network(rng, sparse=True)),
        "sparsetrain": workload("sparsetrain", sparse),
        "mercury": workload("mercury", mercury),
        "adagp": workload("adagp", adagp),
    }


WORKLOADS = _workloads()
BASE = PRESETS["edge"].model_copy(
    update={"storage": OperandStorage(activations="compressed", gradients="bitmap")}
)


def _bounds_axis(path: str) -> dict:
    """An axis over a search field's declared bounds (every choice of a choice field)."""
    info = ACCELERATOR_FIELDS[path]
    if path in CHOICE_FIELDS:
        return {"values": list(get_args(info.annotation))}
    low = next(m.ge for m in info.metadata if hasattr(m, "ge"))
    high = next(m.le for m in info.metadata if hasattr(m, "le"))
    return {"values": [low, high]}


def _search(**fields: object) -> DesignSearch:
    """A search over every search field: the ones named below over chosen axes, any other (a
    field declared searchable later) over its bounds, so each field's batched figures are
    checked against simulate() and area()."""
    spec: dict = {
        "base": BASE,
        "mode": "both",
        "samples": 90,
        "seed": 7,
        "parameters": {
            "dataflow": {"values": ["os", "ws", "is", "row"]},
            "rows": {"low": 1, "high": 40, "log": True},
            "cols": {"values": [3, 8, 17]},
            "ifmap_sram_kib": {"low": 1, "high": 96},
            "filter_sram_kib": {"low": 1, "high": 96, "log": True},
            "ofmap_sram_kib": {"low": 1, "high": 96},
            "dram_bandwidth": {"low": 0.5, "high": 32, "log": True},
            "clock_mhz": {"low": 100, "high": 900},
            "mcache.lookups_per_cycle": {"values": [0, 3]},
            "mcache.projection_macs_per_cycle": {"values": [0, 64]},
            "gradient_predictor.macs_per_cycle": {"low": 16, "high": 512},
        },
    }
    for path in SEARCH_FIELDS:
        spec["parameters"].setdefault(path, _bounds_axis(path))
    return DesignSearch.model_validate(spec | fields)


@pytest.mark.parametrize("baseline_hardware", ["dense", "same"])
def test_batched_figures_equal_simulate_design_by_design(baseline_hardware: str) -> None:
    search = _search(samples=50)
    sizes = {"mercury": MERCURY_MCACHE}
    result = evaluate_chunk(
        WORKLOADS, search, 0, design_count(search),
        baseline_hardware=baseline_hardware, mcache=sizes,
    )  # fmt: skip
    dataflows = set()
    for label, workload in WORKLOADS.items():
        got = result.workloads[label].sample
        assert sorted(got.index) == list(range(design_count(search)))
        mcache = sizes.get(label, McacheSize())
        for index, figures in zip(got.index, got.figures, strict=True):
            design = design_at(search, index)
            dataflows.add(design.dataflow)
            hardware = hardware_for(design, label, baseline_hardware)  # type: ignore[arg-type]
            totals = simulate(workload, hardware).totals
            expected = [totals.seconds, totals.energy_pj * 1e-12, area(hardware, mcache).area_mm2]
            assert figures == expected, (label, index)
    assert dataflows == {"os", "ws", "is", "row"}


def test_hardware_follows_the_technique_and_the_baseline_kind() -> None:
    design = design_at(_search(), 5)
    assert hardware_for(design, "mercury").extensions_on == ("mcache",)
    assert hardware_for(design, "baseline").extensions_on == ()
    assert hardware_for(design, "baseline").storage.activations == "dense"
    same = hardware_for(design, "baseline", "same")
    assert same.extensions_on == ("zero_skipping",) and same.storage.activations == "compressed"
    assert hardware_for(design, "mercury+sparsetrain").extensions_on == (
        "mcache",
        "zero_skipping",
    )


def _brute_front(points: list[list[float]]) -> set[int]:
    def dominates(a: list[float], b: list[float]) -> bool:
        return all(x <= y for x, y in zip(a, b, strict=True)) and a != b

    return {i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)}


@pytest.mark.parametrize("objectives", [["time", "energy", "area"], ["time", "area"]])
def test_the_front_is_the_brute_force_non_dominated_set(objectives: list[str]) -> None:
    search = _search(objectives=objectives, samples=200)
    result = evaluate_chunk(WORKLOADS, search, 0, design_count(search))
    columns = [["time", "energy", "area"].index(o) for o in objectives]
    for label in WORKLOADS:
        every = result.workloads[label].sample
        points = [[row[c] for c in columns] for row in every.figures]
        expected = {every.index[i] for i in _brute_front(points)}
        front = result.workloads[label].front
        assert set(front.index) == expected and len(front.index) == len(expected)
        by_index = dict(zip(every.index, every.figures, strict=True))
        assert all(by_index[i] == row for i, row in zip(front.index, front.figures, strict=True))


def test_constraints_drop_designs_from_front_and_sample_but_count_them() -> None:
    free = evaluate_chunk(WORKLOADS, _search(samples=200), 0, 150).workloads["mercury"].sample
    areas = sorted(row[2] for row in free.figures)
    energies = sorted(row[1] for row in free.figures)
    limits = {"area_mm2_max": areas[100], "energy_j_max": energies[110], "sram_kib_max": 150}
    search = _search(samples=200, constraints=limits)
    result = evaluate_chunk(WORKLOADS, search, 0, 150).workloads["mercury"]
    allowed = {
        i
        for i, row in zip(free.index, free.figures, strict=True)
        if row[2] <= limits["area_mm2_max"]
        and row[1] <= limits["energy_j_max"]
        and _sram(design_at(search, i)) <= 150
    }
    assert result.evaluated == 150 and result.feasible == len(allowed) < 100
    assert set(result.sample.index) == allowed
    assert set(result.front.index) <= allowed and result.front.index


def _sram(design) -> int:  # type: ignore[no-untyped-def]
    return design.ifmap_sram_kib + design.filter_sram_kib + design.ofmap_sram_kib


def test_merged_chunks_equal_one_chunk_and_survive_json() -> None:
    search = _search(sample_size=25)
    whole = evaluate_chunk(WORKLOADS, search, 0, design_count(search))
    cuts = [0, 13, 14, 61, 100, design_count(search)]
    chunks = [evaluate_chunk(WORKLOADS, search, a, b) for a, b in itertools.pairwise(cuts)]
    through_json = [SearchResult.from_json(json.loads(json.dumps(c.to_json()))) for c in chunks]
    merged = merge(through_json[3:] + through_json[:3])
    assert merged == whole
    assert merge([merge(chunks[:2]), merge(chunks[2:])]) == whole
    assert (
        merge([whole, chunks[1]]).workloads["baseline"].front == whole.workloads["baseline"].front
    )
    for part in whole.workloads.values():
        assert len(part.sample.index) == 25 and part.evaluated == design_count(search)


def test_designs_are_numbered_grid_first_then_samples_and_rebuilt_exactly() -> None:
    search = DesignSearch(
        base="tpu-like",
        mode="both",
        samples=20,
        seed=3,
        parameters={
            "rows": {"values": [8, 16]},
            "dataflow": {"values": ["os", "row"]},
            "clock_mhz": {"start": 100, "stop": 300, "step": 100},
            "cols": {"low": 2, "high": 64},
        },
    )
    assert design_count(search) == 2 * 2 * 3 + 20
    grid = [design_at(search, i) for i in range(12)]
    expected = list(itertools.product([8, 16], ["os", "row"], [100.0, 200.0, 300.0]))
    assert [(d.rows, d.dataflow, d.clock_mhz) for d in grid] == expected
    assert {d.cols for d in grid} == {PRESETS["tpu-like"].cols}  # an interval keeps the base
    table = design_table(search, 0, design_count(search))
    for i in range(design_count(search)):
        design = design_at(search, i)
        assert [design.rows, design.dataflow, design.clock_mhz, design.cols] == [
            table[path][i] for path in ("rows", "dataflow", "clock_mhz", "cols")
        ]
        assert design.model_dump(exclude={"name", "rows", "cols", "dataflow", "clock_mhz"}) == (
            PRESETS["tpu-like"].model_dump(
                exclude={"name", "rows", "cols", "dataflow", "clock_mhz"}
            )
        )
    samples = [design_at(search, i) for i in range(12, 32)]
    assert all(2 <= d.cols <= 64 for d in samples) and len({d.cols for d in samples}) > 5
    again = search.model_copy(update={"seed": 4})
    assert [design_at(again, i).cols for i in range(12, 32)] != [d.cols for d in samples]


def test_moved_rows_equals_the_fold_by_fold_counts_for_many_configs() -> None:
    """with_tensor_traffic counts every config at once; FoldRows (tested against the elements in
    test_conv_traffic.py) counts one config's folds one by one."""
    rng = np.random.default_rng(12)
    for _ in range(120):
        kernel = int(rng.integers(1, 6))
        groups = int(rng.choice([1, 2]))
        conv = ConvGeometry(
            batch=int(rng.integers(1, 4)), in_channels=groups * int(rng.integers(1, 7)),
            out_channels=groups * int(rng.integers(1, 12)), height=int(rng.integers(kernel, 14)),
            width=int(rng.integers(1, 9)) + kernel, kernel_h=kernel, kernel_w=kernel,
            stride_h=int(rng.integers(1, 4)), pad_h=int(rng.integers(0, kernel // 2 + 1)),
            groups=groups,
        )  # fmt: skip
        if conv.out_h < 1 or conv.out_w < 1:
            continue
        pass_ = TrainingPass(rng.choice([p.value for p in TrainingPass]))
        count = 10
        flows = rng.choice([DATAFLOW_CODES[f] for f in ("os", "ws", "is")], size=count)
        rows, cols = rng.integers(1, 30, size=count), rng.integers(1, 30, size=count)
        rows[:6] = rows[0]  # configs sharing a position tiling
        cols[:3], flows[:3] = cols[0], flows[0]  # and the same folds, SRAM apart
        half_rows = rng.integers(0, 120, size=count)
        got = moved_rows(conv, pass_, flows, rows, cols, half_rows)
        for c in range(count):
            folds = fold_rows(conv, pass_, int(flows[c]), int(rows[c]), int(cols[c]))
            words = float(half_rows[c] * folds.row_words)
            assert got[c] == folds.counts.moved(folds.row_words, words), (conv, pass_, c)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"parameters": {"accelerator.rows": {"values": [8]}}}, "write 'rows'"),
        ({"parameters": {"training.epochs": {"values": [2]}}}, "training parameters"),
        ({"parameters": {"word_bytes": {"values": [2]}}}, "'word_bytes': not a search field"),
        ({"parameters": {"rows": {"values": [8, 2000]}}}, "'rows': value 2000"),
        ({"parameters": {"clock_mhz": {"low": 0.5, "high": 9}}}, "'clock_mhz': value 0.5"),
        ({"parameters": {"rows": {"values": [8.5]}}}, "'rows': value 8.5 is not a whole"),
        ({"parameters": {"dataflow": {"values": ["os", "xs"]}}}, "'dataflow': value 'xs'"),
        ({"parameters": {"dataflow": {"low": 1, "high": 2}}}, "'dataflow': a choice field"),
        (
            {"mode": "grid", "parameters": {"rows": {"low": 1, "high": 9}}},
            "'rows': low/high intervals need mode",
        ),
        (
            {
                "mode": "grid",
                "parameters": {
                    "rows": {"start": 1, "stop": 1000, "step": 1},
                    "cols": {"start": 1, "stop": 1000, "step": 1},
                    "clock_mhz": {"values": [100, 200]},
                },
            },
            "2,000,000 designs",
        ),
        ({"samples": 1_000_001}, "samples"),
        ({"objectives": ["time", "time"]}, "distinct"),
        ({"objectives": ["time"]}, "objectives"),
        ({"sample_size": 20_001}, "sample_size"),
        ({"base": "nonesuch"}, "unknown preset 'nonesuch'"),
        ({"constraints": {"area_mm2_max": 0}}, "area_mm2_max"),
    ],
)
def test_bad_searches_name_the_field_and_the_reason(change: dict, message: str) -> None:
    spec = {"base": "edge", "parameters": {"rows": {"values": [8, 16]}}} | change
    with pytest.raises(ValidationError) as error:
        DesignSearch.model_validate(spec)
    assert message in str(error.value)
