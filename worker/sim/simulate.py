"""Simulate a training workload on accelerators: GEMMs in, cycles, traffic and energy out.

Every figure is computed as a (configs x GEMMs) numpy array, so a sweep over accelerator configs
costs a few array operations; only GEMMs whose zero-skipping needs per-tile non-zero counts take a
Python step each (see worker.sim.zero_skipping).

Per execution of one GEMM (all `groups` run back to back):
- MERCURY (needs an MCACHE): reused rows shrink m to ceil(m * (1 - reused_row_fraction)); folded
  reduction shrinks k to ceil(k * folded_k_fraction). The reduced GEMM runs on the array.
- Array cycles are SCALE-Sim's (worker.sim.systolic) for the reduced GEMM, with the streamed steps
  replaced by zero-skipping's when the accelerator skips zeros and an operand is sparse.
- Overhead GEMMs (e.g. MERCURY's signature projection) are costed like any GEMM on the array,
  with their own dataflow mapping, traffic and energy, but count as overhead MACs; predictor GEMMs
  run on the predictor unit when there is one (worker.sim.extensions).
- Compute cycles add the extension cycles (MCACHE lookups, column-ALU extra ops, predictor unit;
  worker.sim.extensions); stall cycles come from the DRAM traffic (worker.sim.memory).
- MACs: algorithmic = dense m*k*n*groups over every iteration of the training for compute GEMMs
  (so ADA-GP's skipped executions are skipped MACs); actual = the MACs done; skipped =
  algorithmic - actual; overhead = the MACs of overhead GEMMs. Extra ops are not MACs.
- SRAM: the array's requests (SCALE-Sim's counts) plus the DRAM fills and drains of each operand.
- Storage (worker.sim.memory.stored_words_per_element): an accelerator that stores a kind of
  tensor as a bitmap or compressed moves, per element, its measured density plus metadata in
  words, in DRAM and in the array's SRAM reads; stalls follow the smaller traffic.
- Energy (worker.sim.energy) = counts x the accelerator's energy table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.specs.accelerator import AcceleratorConfig
from worker.sim.conv_traffic import tensor_traffic_notes, with_tensor_traffic
from worker.sim.energy import EnergyColumns, energy_columns
from worker.sim.extensions import alu_cycles, count_extra_ops, mcache_cycles
from worker.sim.memory import dram_traffic, stall_cycles, stored_words_per_element
from worker.sim.results import MAC_AND_CYCLE_COLUMNS, OPERANDS, SimulationResult
from worker.sim.systolic import DATAFLOW_CODES, dense_compute, map_gemm
from worker.sim.workload import GemmOp, Workload
from worker.sim.zero_skipping import SparseStream, sparse_stream


@dataclass(frozen=True)
class _Ops:
    """The workload's GEMMs as (1, L) arrays."""

    m: np.ndarray
    k: np.ndarray
    n: np.ndarray
    groups: np.ndarray
    executions: np.ndarray
    baseline_executions: np.ndarray  # executions of the dense baseline (0 for overhead GEMMs)
    is_compute: np.ndarray
    on_predictor: np.ndarray
    reused: np.ndarray
    folded: np.ndarray
    density_a: np.ndarray
    density_b: np.ndarray
    sparse: np.ndarray  # some operand is sparse or carries per-lane counts


def _op_arrays(workload: Workload) -> _Ops:
    ops = workload.ops

    def col(values: list[float], dtype: type = np.float64) -> np.ndarray:
        return np.asarray(values, dtype=dtype).reshape(1, -1)

    is_compute = col([op.role == "compute" for op in ops], bool)
    executions = col([op.executions for op in ops])
    return _Ops(
        m=col([op.m for op in ops], np.int64),
        k=col([op.k for op in ops], np.int64),
        n=col([op.n for op in ops], np.int64),
        groups=col([op.groups for op in ops]),
        executions=executions,
        baseline_executions=np.where(is_compute, np.maximum(executions, workload.iterations), 0.0),
        is_compute=is_compute,
        on_predictor=col([op.runs_on == "predictor" for op in ops], bool),
        reused=col([op.reused_row_fraction for op in ops]),
        folded=col([op.folded_k_fraction for op in ops]),
        density_a=col([op.density_a for op in ops]),
        density_b=col([op.density_b for op in ops]),
        sparse=col([_is_sparse(op) for op in ops], bool),
    )


def _is_sparse(op: GemmOp) -> bool:
    return (
        op.density_a < 1.0
        or op.density_b < 1.0
        or op.a_row_nnz is not None
        or op.b_col_nnz is not None
    )


def _config_column(accels: list[AcceleratorConfig], attr: str) -> np.ndarray:
    values = [_attr(accel, attr) for accel in accels]
    return np.asarray(values).reshape(-1, 1)


def _attr(obj: object, dotted: str) -> object:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def simulate(workload: Workload, accel: AcceleratorConfig) -> SimulationResult:
    return simulate_many(workload, [accel])[0]


def simulate_many(workload: Workload, accels: list[AcceleratorConfig]) -> list[SimulationResult]:
    """Simulate one workload on many accelerators at once (vectorised over configs and GEMMs)."""
    if not accels:
        return []
    if not workload.ops:
        return [_result(workload, accel, {}) for accel in accels]
    ops = _op_arrays(workload)
    cfg = {name: _config_column(accels, name) for name in _CONFIG_FIELDS}
    rows, cols = cfg["rows"].astype(np.int64), cfg["cols"].astype(np.int64)
    df = np.asarray([DATAFLOW_CODES[a.dataflow] for a in accels]).reshape(-1, 1)
    has_mcache = cfg["mercury.enabled"].astype(bool)
    skips_zeros = cfg["zero_skipping.enabled"].astype(bool)
    has_predictor = cfg["gradient_predictor.enabled"].astype(bool)

    m = np.where(has_mcache, np.ceil(ops.m * (1.0 - ops.reused) - 1e-9), ops.m).astype(np.int64)
    k = np.where(has_mcache, np.ceil(ops.k * ops.folded - 1e-9), ops.k).astype(np.int64)
    n = np.broadcast_to(ops.n, m.shape)
    runs = (m > 0) & (k > 0) & (n > 0)
    on_predictor = ops.on_predictor & has_predictor
    on_array = runs & ~on_predictor

    mapping = map_gemm(m, k, n, rows, cols, df)
    dense = dense_compute(m, k, n, rows, cols, df)
    array_cycles = np.where(on_array, dense.cycles, 0).astype(np.float64)
    mac_fraction = np.ones(m.shape)
    sparse_pairs = np.argwhere(on_array & ops.sparse & skips_zeros)
    streams: dict[tuple[int, ...], SparseStream] = {}  # configs often share an array shape
    for p, i in sparse_pairs:
        key = (i, m[p, i], k[p, i], n[p, i], rows[p, 0], cols[p, 0], df[p, 0])
        if key not in streams:
            streams[key] = sparse_stream(workload.ops[i], *(int(v) for v in key[1:]))
        stream = streams[key]
        array_cycles[p, i] = (
            stream.temporal_cycles + mapping.folds[p, i] * mapping.fill_drain[p, i] - 1
        )
        mac_fraction[p, i] = stream.mac_fraction

    effective_macs = np.where(runs, m * k * n, 0) * ops.groups
    macs_done = effective_macs * mac_fraction
    predictor_cycles = np.where(
        on_predictor & runs, np.ceil(effective_macs / cfg["gradient_predictor.macs_per_cycle"]), 0
    )
    extra = count_extra_ops([op.extra_ops for op in workload.ops])
    extension_cycles = (
        mcache_cycles(
            extra.mcache_lookups.reshape(1, -1),
            has_mcache,
            cfg["mercury.lookups_per_cycle"],
            cfg["mercury.lookup_latency"],
        )
        + alu_cycles(extra.alu_ops.reshape(1, -1), cols)
        + predictor_cycles
    )

    word_capacity = {name: cfg[f"{name}_sram_kib"] * 1024 // cfg["word_bytes"] for name in OPERANDS}
    traffic = dram_traffic(
        m, k, n, mapping, rows, cols, df,
        word_capacity["ifmap"], word_capacity["filter"], word_capacity["ofmap"],
    )  # fmt: skip
    tensor = np.asarray([a.conv_operand_traffic == "tensor" for a in accels]).reshape(-1, 1)
    if tensor.any():
        halves = {name: words // 2 for name, words in word_capacity.items()}
        traffic = with_tensor_traffic(
            traffic, workload.ops, tensor, on_array, df, rows, cols, halves
        )
    per_element = stored_words_per_element(accels, workload.ops)
    if per_element is not None:
        traffic = traffic.stored(per_element)
    stalls = np.where(on_array, stall_cycles(traffic, array_cycles, cfg["dram_bandwidth"]), 0)

    g = ops.groups
    dram_reads = {
        "ifmap": np.where(on_array, traffic.ifmap_reads, 0) * g,
        "filter": np.where(on_array, traffic.filter_reads, 0) * g,
        "ofmap": np.where(on_array, traffic.ofmap_reads, 0) * g,
    }
    dram_writes = {
        "ifmap": np.zeros(m.shape),
        "filter": np.zeros(m.shape),
        "ofmap": np.where(on_array, traffic.ofmap_writes, 0) * g,
    }
    a_words, b_words, c_words = m * k * g, k * n * g, m * n * g
    sram_reads = {
        "ifmap": np.where(on_array, dense.ifmap_reads * g, np.where(on_predictor, a_words, 0)),
        "filter": np.where(on_array, dense.filter_reads * g, np.where(on_predictor, b_words, 0)),
        "ofmap": dram_writes["ofmap"],
    }
    sram_writes = {
        "ifmap": dram_reads["ifmap"],
        "filter": dram_reads["filter"],
        "ofmap": np.where(on_array, dense.ofmap_writes * g, np.where(on_predictor, c_words, 0))
        + dram_reads["ofmap"],
    }
    if per_element is not None:  # the array reads A and B in their stored format
        sram_reads["ifmap"] = sram_reads["ifmap"] * per_element["ifmap"]
        sram_reads["filter"] = sram_reads["filter"] * per_element["filter"]
    for name in OPERANDS:
        sram_reads[name] = np.where(runs, sram_reads[name], 0)
        sram_writes[name] = np.where(runs, sram_writes[name], 0)

    energy = energy_columns(
        accels, macs_done, sram_reads, sram_writes, dram_reads, dram_writes, extra, has_mcache
    )
    compute_cycles = array_cycles * g + extension_cycles
    total_cycles = compute_cycles + stalls * g
    array_macs = np.where(on_array, macs_done, 0)
    per_execution = {
        "macs_done_compute": np.where(ops.is_compute, macs_done, 0),
        "macs_overhead": np.where(ops.is_compute, 0, macs_done),
        "compute_cycles": compute_cycles,
        "extension_cycles": extension_cycles,
        "stall_cycles": stalls * g,
        "total_cycles": total_cycles,
        "array_cycles": array_cycles * g,
        "array_macs": array_macs,
        "mapped_pe_cycles": np.where(on_array, dense.mapping_efficiency, 0) * array_cycles * g,
        "dram_bytes": sum(dram_reads.values()) + sum(dram_writes.values()),
        **{f"sram_reads_{o}": sram_reads[o] for o in OPERANDS},
        **{f"sram_writes_{o}": sram_writes[o] for o in OPERANDS},
        **{f"dram_reads_{o}": dram_reads[o] for o in OPERANDS},
        **{f"dram_writes_{o}": dram_writes[o] for o in OPERANDS},
        **energy.as_columns(),
    }
    training = {name: values * ops.executions for name, values in per_execution.items()}
    training["dram_bytes"] = training["dram_bytes"] * cfg["word_bytes"]
    algorithmic = ops.m * ops.k * ops.n * ops.groups * ops.baseline_executions
    training["macs_algorithmic"] = np.broadcast_to(algorithmic, m.shape)
    training["macs_actual"] = training.pop("macs_done_compute")
    training["macs_skipped"] = training["macs_algorithmic"] - training["macs_actual"]
    pes = (rows * cols).astype(np.float64)
    cycles = training["total_cycles"]
    training["utilization"] = np.divide(
        training["array_macs"], pes * cycles, out=np.zeros(m.shape), where=cycles > 0
    )
    array_time = training["array_cycles"]
    training["mapping_efficiency"] = np.divide(
        training["mapped_pe_cycles"], array_time, out=np.zeros(m.shape), where=array_time > 0
    )
    return [
        _result(workload, accel, {name: values[p] for name, values in training.items()})
        for p, accel in enumerate(accels)
    ]


_CONFIG_FIELDS = (
    "rows",
    "cols",
    "ifmap_sram_kib",
    "filter_sram_kib",
    "ofmap_sram_kib",
    "dram_bandwidth",
    "word_bytes",
    "mercury.enabled",
    "mercury.lookups_per_cycle",
    "mercury.lookup_latency",
    "zero_skipping.enabled",
    "gradient_predictor.enabled",
    "gradient_predictor.macs_per_cycle",
)


def _notes(workload: Workload, accel: AcceleratorConfig) -> list[str]:
    if accel.conv_operand_traffic != "tensor":
        return []
    return tensor_traffic_notes(workload.ops)


def _result(
    workload: Workload, accel: AcceleratorConfig, columns: dict[str, np.ndarray]
) -> SimulationResult:
    if not columns:
        columns = {name: np.zeros(0) for name in EnergyColumns.names() + _EMPTY_COLUMNS}
    return SimulationResult(
        conv_operand_traffic=accel.conv_operand_traffic,
        notes=_notes(workload, accel),
        accelerator=accel.name,
        model=workload.model,
        technique=workload.technique,
        iterations=workload.iterations,
        clock_mhz=accel.clock_mhz,
        pes=accel.rows * accel.cols,
        labels=[(op.layer, str(op.pass_.value), op.role, op.executions) for op in workload.ops],
        columns=columns,
    )


_EMPTY_COLUMNS = (
    *MAC_AND_CYCLE_COLUMNS,
    "array_cycles",
    "array_macs",
    "mapped_pe_cycles",
    "dram_bytes",
    "utilization",
    "mapping_efficiency",
    *(
        f"{kind}_{o}"
        for kind in ("sram_reads", "sram_writes", "dram_reads", "dram_writes")
        for o in OPERANDS
    ),
)
