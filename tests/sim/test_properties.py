"""Properties of the simulator that must hold for any accelerator and any GEMM."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.sim import GemmOp, TrainingPass, Workload, simulate, simulate_many
from backend.specs.accelerator import (
    AcceleratorConfig,
    GradientPredictorUnit,
    McacheHardware,
    ZeroSkipping,
)
from tests.sim.strategies import accelerators, dims


def _workload(*ops: GemmOp, iterations: int = 1) -> Workload:
    return Workload(model="m", dataset="d", batch_size=1, iterations=iterations, ops=list(ops))


def _op(m: int, k: int, n: int, **fields) -> GemmOp:
    return GemmOp(layer="l", pass_=TrainingPass.FWD, m=m, k=k, n=n, executions=1, **fields)


def _row(op: GemmOp, accel: AcceleratorConfig, iterations: int = 1):
    return simulate(_workload(op, iterations=iterations), accel).layers[0]


@settings(max_examples=300, deadline=None)
@given(
    accel=accelerators(),
    m=dims,
    k=dims,
    n=dims,
    axis=st.sampled_from(["m", "k", "n"]),
    grow=st.integers(1, 200),
    density=st.sampled_from([1.0, 0.6, 0.1, 0.0]),
)
def test_cycles_never_fall_when_a_dimension_grows(accel, m, k, n, axis, grow, density) -> None:
    small = {"m": m, "k": k, "n": n}
    large = {**small, axis: small[axis] + grow}
    before = _row(_op(**small, density_a=density), accel)
    after = _row(_op(**large, density_a=density), accel)
    assert after.compute_cycles >= before.compute_cycles
    assert after.total_cycles >= before.total_cycles
    assert after.dram_reads >= before.dram_reads


@settings(max_examples=200, deadline=None)
@given(accel=accelerators(), m=dims, k=dims, n=dims, with_counts=st.booleans())
def test_dense_operands_do_all_the_algorithmic_work(accel, m, k, n, with_counts) -> None:
    counts = {"a_row_nnz": np.full(m, k), "b_col_nnz": np.full(n, k)} if with_counts else {}
    sparse_view = _row(_op(m, k, n, **counts), accel)
    dense_accel = accel.model_copy(update={"zero_skipping": ZeroSkipping(enabled=False)})
    dense = _row(_op(m, k, n), dense_accel)
    assert sparse_view.macs_actual == sparse_view.macs_algorithmic == m * k * n
    assert sparse_view.macs_skipped == 0
    assert sparse_view.compute_cycles == dense.compute_cycles


@settings(max_examples=200, deadline=None)
@given(accel=accelerators(zero_skipping=True), m=dims, k=dims, n=dims, zero_a=st.booleans())
def test_an_all_zero_operand_skips_every_mac(accel, m, k, n, zero_a) -> None:
    density = {"density_a": 0.0} if zero_a else {"density_b": 0.0}
    counts = {"a_row_nnz": np.zeros(m)} if zero_a else {"b_col_nnz": np.zeros(n)}
    row = _row(_op(m, k, n, **density, **counts), accel)
    assert row.macs_actual == 0
    assert row.macs_skipped == row.macs_algorithmic == m * k * n
    assert row.energy_by_level["mac"] == 0


@settings(max_examples=200, deadline=None)
@given(
    accel=accelerators(zero_skipping=True),
    m=dims,
    k=dims,
    n=dims,
    density=st.floats(0.0, 1.0),
)
def test_zero_skipping_never_costs_cycles(accel, m, k, n, density) -> None:
    sparse = _row(_op(m, k, n, density_a=density), accel)
    dense = _row(_op(m, k, n), accel)
    assert sparse.compute_cycles <= dense.compute_cycles
    assert sparse.macs_actual <= dense.macs_actual


def test_busiest_row_of_a_tile_sets_the_pace() -> None:
    """Same non-zeros in total, but concentrated in one row per tile: every tile is slow."""
    accel = AcceleratorConfig(rows=8, cols=8, dataflow="os")
    m, k, n = 64, 100, 8
    balanced = np.full(m, 20)
    skewed = np.tile([76, 12, 12, 12, 12, 12, 12, 12], m // 8)
    assert balanced.sum() == skewed.sum()
    fast = _row(_op(m, k, n, density_a=0.2, a_row_nnz=balanced), accel)
    slow = _row(_op(m, k, n, density_a=0.2, a_row_nnz=skewed), accel)
    assert fast.macs_actual == slow.macs_actual
    folds = 8
    assert fast.compute_cycles == folds * (20 + 8 + 8 - 2) - 1
    assert slow.compute_cycles == folds * (76 + 8 + 8 - 2) - 1


def test_weight_stationary_skips_only_all_zero_input_rows() -> None:
    accel = AcceleratorConfig(rows=4, cols=4, dataflow="ws")
    m, k, n = 10, 4, 4  # one fold, every A row fully inside the k-tile
    counts = np.array([0, 0, 0, 4, 4, 1, 0, 2, 0, 3])
    row = _row(_op(m, k, n, density_a=counts.sum() / (m * k), a_row_nnz=counts), accel)
    streamed = int((counts > 0).sum())
    assert row.compute_cycles == streamed + 2 * 4 + 4 - 2 - 1


@settings(max_examples=100, deadline=None)
@given(accel=accelerators(), m=dims, k=dims, n=dims, reused=st.floats(0.0, 1.0))
def test_mercury_reuse_needs_an_mcache(accel, m, k, n, reused) -> None:
    op = _op(m, k, n, reused_row_fraction=reused)
    with_cache = _row(op, accel)
    no_cache = _row(op, accel.model_copy(update={"mcache": McacheHardware(enabled=False)}))
    dense = _row(_op(m, k, n), accel)
    assert no_cache.compute_cycles == dense.compute_cycles
    assert with_cache.compute_cycles <= dense.compute_cycles
    kept = int(np.ceil(m * (1 - reused) - 1e-9))
    assert with_cache.macs_actual == kept * k * n
    assert with_cache.macs_skipped == (m - kept) * k * n


def test_ada_gp_skipped_executions_count_as_skipped_macs() -> None:
    accel = AcceleratorConfig()
    op = GemmOp(layer="l", pass_=TrainingPass.BWD_WEIGHT, m=64, k=64, n=64, executions=6)
    row = simulate(_workload(op, iterations=10), accel).layers[0]
    one = _row(_op(64, 64, 64), accel)
    assert row.macs_algorithmic == 10 * 64**3
    assert row.macs_actual == 6 * 64**3
    assert row.macs_skipped == 4 * 64**3
    assert row.total_cycles == 6 * one.total_cycles


def test_overhead_gemms_and_extra_ops_add_cost_not_algorithmic_work() -> None:
    """Serial extension model: lookups and column-unit work all follow the array's work."""
    accel = AcceleratorConfig(
        rows=16,
        cols=16,
        mcache=McacheHardware(lookups_per_cycle=2, lookup_latency=3),
        extension_overlap="serial",
    )
    compute = _op(128, 64, 32, extra_ops={"mcache_lookups": 128.0, "compares": 64.0})
    signature = GemmOp(
        layer="l", pass_=TrainingPass.FWD, m=128, k=64, n=16, executions=1, role="overhead"
    )
    predictor = GemmOp(
        layer="l", pass_=TrainingPass.FWD, m=32, k=64, n=8, executions=1, role="overhead",
        runs_on="predictor",
    )  # fmt: skip
    rows = simulate(_workload(compute, signature, predictor), accel).layers
    bare = _row(_op(128, 64, 32), accel)
    lookup_cycles = 128 // accel.mcache.lookups_per_cycle + accel.mcache.lookup_latency
    assert rows[0].compute_cycles == bare.compute_cycles + lookup_cycles + 64 // 16
    assert rows[1].macs_overhead == 128 * 64 * 16 and rows[1].macs_algorithmic == 0
    per_cycle = accel.gradient_predictor.macs_per_cycle
    assert rows[2].compute_cycles == -(-(32 * 64 * 8) // per_cycle)
    assert rows[2].dram_reads == 0
    no_unit = accel.model_copy(update={"gradient_predictor": GradientPredictorUnit(enabled=False)})
    on_array = simulate(_workload(predictor), no_unit).layers[0]
    assert on_array.compute_cycles == _row(_op(32, 64, 8), no_unit).compute_cycles


@settings(max_examples=50, deadline=None)
@given(
    accels=st.lists(accelerators(), min_size=1, max_size=4),
    shapes=st.lists(st.tuples(dims, dims, dims), min_size=1, max_size=5),
    density=st.floats(0.0, 1.0),
)
def test_simulate_many_equals_one_config_at_a_time(accels, shapes, density) -> None:
    workload = _workload(*(_op(m, k, n, density_a=density) for m, k, n in shapes))
    together = simulate_many(workload, accels)
    for accel, result in zip(accels, together, strict=True):
        assert result.to_dict() == simulate(workload, accel).to_dict()


def test_energy_is_counts_times_the_table() -> None:
    base = AcceleratorConfig(rows=8, cols=8, dram_bandwidth=2.0)
    op = _op(100, 50, 30, extra_ops={"result_copies": 10.0})
    row = _row(op, base)
    energy = base.energy
    assert row.energy_by_level["mac"] == row.macs_actual * (energy.mac_mult + energy.mac_add)
    assert row.energy_by_level["register"] == 3 * row.macs_actual * energy.register_file
    sram_accesses = row.sram_reads + row.sram_writes + 2 * 10
    assert row.energy_by_level["sram"] == sram_accesses * energy.sram
    assert row.energy_by_level["dram"] == (row.dram_reads + row.dram_writes) * energy.dram
    assert row.energy_pj == sum(row.energy_by_level.values())
    dearer = base.model_copy(update={"energy": energy.model_copy(update={"dram": 2 * energy.dram})})
    assert _row(op, dearer).energy_by_level["dram"] == 2 * row.energy_by_level["dram"]


def test_totals_sum_the_layers_and_everything_is_json() -> None:
    accel = AcceleratorConfig(clock_mhz=250.0)
    ops = [_op(50, 40, 30), _op(20, 70, 10, density_a=0.3, a_row_nnz=np.arange(20) % 7)]
    result = simulate(_workload(*ops, iterations=2), accel)
    data = json.loads(json.dumps(result.to_dict()))
    totals = data["totals"]
    for name in ("macs_algorithmic", "macs_actual", "total_cycles", "dram_bytes", "energy_pj"):
        assert totals[name] == sum(layer[name] for layer in data["layers"])
    assert totals["seconds"] == totals["total_cycles"] / 250e6
    assert [layer["pass_"] for layer in data["layers"]] == ["fwd", "fwd"]


def test_a_stored_workload_resimulates_identically() -> None:
    accel = AcceleratorConfig(dataflow="ws")
    ops = [
        _op(64, 27, 16, density_a=0.4, a_row_nnz=np.arange(64) % 27, groups=2),
        _op(16, 64, 27, folded_k_fraction=0.5, extra_ops={"int_adds": 5.0}),
    ]
    workload = _workload(*ops, iterations=3)
    restored = Workload.from_dict(json.loads(json.dumps(workload.to_dict())))
    assert simulate(restored, accel).to_dict() == simulate(workload, accel).to_dict()
