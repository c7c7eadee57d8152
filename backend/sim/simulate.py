"""Simulate a training workload on accelerators: GEMMs in, cycles, traffic and energy out.

Every figure is computed as a (configs x GEMMs) numpy array, so a sweep over accelerator configs
costs a few array operations; only GEMMs whose zero-skipping needs per-lane non-zero counts take a
Python step each per array shape (see backend.sim.zero_skipping and backend.sim.row_dataflow).

Per execution of one GEMM (all `groups` run back to back):
- MERCURY (needs an MCACHE): reused rows shrink m to ceil(m * (1 - reused_row_fraction)); folded
  reduction shrinks k to ceil(k * folded_k_fraction). The reduced GEMM runs on the array: it
  sets the compute, the tiling and every re-read, but not which tensors move. Each element of A
  the reductions leave out is still read once (a hit row's window, for its signature; a folded
  dY, summed on chip into its group's sum) and each hit row's copied output is still written
  once, into the tensor the next layer reads; folded group sums that later sweeps need and
  SRAM cannot hold are written out once (backend.sim.memory, "Reuse").
- Array cycles are SCALE-Sim's (backend.sim.systolic) for the reduced GEMM on the os/ws/is
  dataflows, with the streamed steps replaced by zero-skipping's when the accelerator skips zeros
  and an operand is sparse; on the 1-D "row" dataflow a convolution's cycles come from
  backend.sim.row_dataflow (other GEMMs fall back to os there).
- Overhead GEMMs run on the array with their own mapping, traffic and energy, but count as
  overhead MACs; predictor GEMMs run on the predictor unit and MERCURY's signature projection on
  the projection unit when the accelerator has them. The projection reads the FWD input stream,
  so its A operand costs no DRAM reads (backend.sim.extensions).
- Extension cycles (MCACHE lookups, column-unit work, predictor and projection units) are partly
  hidden behind the array's time (`extension_overlap`, backend.sim.extensions); stall cycles come
  from the DRAM traffic (backend.sim.memory).
- Cycle columns per layer-pass, over the whole training, add up exactly:
      total_cycles = array_cycles + exposed_extension_cycles + stall_cycles
  with compute_cycles = array_cycles + exposed_extension_cycles (everything but stalls) and
  extension_cycles = the extension units' busy cycles whether hidden or not (the serial cost).
- MACs: algorithmic = dense m*k*n*groups over every iteration of the training for compute GEMMs
  (so ADA-GP's skipped executions are skipped MACs); actual = the MACs done; skipped =
  algorithmic - actual; overhead = the MACs of overhead GEMMs. Extra ops are not MACs.
- SRAM: the array's requests (SCALE-Sim's counts) plus the DRAM fills and drains of each operand.
- Storage (backend.sim.memory.stored_words_per_element): an accelerator that stores a kind of
  tensor as a bitmap or compressed moves, per element, its measured density plus metadata in
  words (with `storage.dense_fallback`, at most one: the tensor falls back to dense), in DRAM
  and in the array's SRAM reads; stalls follow the smaller traffic. The config is taken
  literally: that a baseline stores dense is AcceleratorConfig.with_extensions' doing.
- Energy (backend.sim.energy) = counts x the accelerator's energy table.

The accelerator is taken as given; each result lists the extensions that were on
(`SimulationResult.extensions`).

simulate_many runs in phases that share one _Sweep (the GEMMs, the accelerators' fields, and per
pair the reduced GEMM and the unit it runs on; built by _place): mapping onto the array
(_map_onto_array), sparsity (_skip_zeros), extension units (_extension_units), traffic
(_traffic), energy (_energy), then the training's columns (_training_columns). The phases read
the accelerators only through ConfigColumns ((P, 1) arrays of their fields): simulate_many builds
them from configs, a design search (backend.sim.design_search) from arrays of designs, and both
get their columns from simulate_columns, so a design's figures in a search are simulate()'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from operator import attrgetter
from typing import Any

import numpy as np

from backend.sim.conv_traffic import tensor_traffic_notes, with_tensor_traffic
from backend.sim.energy import EnergyColumns, energy_columns
from backend.sim.extensions import (
    ExtraOpCounts,
    UnitCycles,
    column_unit_cycles,
    count_extra_ops,
    mcache_lookup_cycles,
)
from backend.sim.memory import (
    STORAGE_CODES,
    STORAGE_KINDS,
    DramTraffic,
    dram_traffic,
    stall_cycles,
    stored_words_per_element,
)
from backend.sim.results import COLUMNS, ENERGY_LEVELS, OPERANDS, SimulationResult
from backend.sim.row_dataflow import (
    RowMapping,
    SparseRows,
    dense_row_cycles,
    map_rows,
    task_space,
)
from backend.sim.systolic import (
    DATAFLOW_CODES,
    IS,
    OS,
    ROW,
    ArrayMapping,
    DenseCompute,
    dense_compute,
    map_gemm,
)
from backend.sim.workload import GemmOp, Workload
from backend.sim.zero_skipping import gated_mac_fraction, lane_steps, lane_tile_is_rows, other_folds
from backend.specs.accelerator import ACCELERATOR_FIELDS, EXTENSIONS, AcceleratorConfig


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
    on_projection: np.ndarray
    feeder: np.ndarray  # index of the compute GEMM streaming A into this one, else -1
    is_conv: np.ndarray
    row_space: tuple[np.ndarray, ...]  # row dataflow: lanes, kernel rows, columns, steps, products
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
        on_projection=col([op.runs_on == "projection" for op in ops], bool),
        feeder=col(_feeders(ops), np.int64),
        is_conv=col([op.conv is not None for op in ops], bool),
        row_space=tuple(
            col(values, np.int64) for values in zip(*map(_row_space, ops), strict=True)
        ),
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
        or op.a_line_macs is not None
        or op.b_line_macs is not None
    )


def _row_space(op: GemmOp) -> tuple[int, ...]:
    if op.conv is None:
        return (0, 0, 0, 0, 0)
    space = task_space(op)
    return (space.lanes, space.kernel_rows, space.columns, space.steps, space.products)


def _feeders(ops: list[GemmOp]) -> list[int]:
    """For each GEMM fused into another's input stream, the index of that compute GEMM."""
    index = {
        (op.layer, op.pass_): i for i, op in enumerate(ops) if op.role == "compute"
    }  # fmt: skip
    return [
        index.get((op.fused_with, op.pass_), -1) if op.fused_with is not None else -1 for op in ops
    ]


class ConfigColumns(dict[str, np.ndarray]):
    """The accelerators' fields the simulator reads, by dotted name, each a (P, 1) column:
    CONFIG_FIELDS as they are, and the choice fields of CHOICE_CODES coded. A design search
    fills them from arrays of designs (backend.sim.design_search) without building a config per
    design."""

    @classmethod
    def of(cls, accels: list[AcceleratorConfig]) -> ConfigColumns:
        return cls(
            {
                path: cls.column(path, list(map(attrgetter(path), accels)))
                for path in (*CONFIG_FIELDS, *CHOICE_CODES)
            }
        )

    @staticmethod
    def column(path: str, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """The values of the field at `path` as a (P, 1) column, a choice field's coded."""
        codes = CHOICE_CODES.get(path)
        if codes is not None:
            values = [codes[value] for value in values]
        return np.asarray(values).reshape(-1, 1)

    @property
    def count(self) -> int:
        return len(self["rows"])


def simulate(workload: Workload, accel: AcceleratorConfig) -> SimulationResult:
    return simulate_many(workload, [accel])[0]


def simulate_many(workload: Workload, accels: list[AcceleratorConfig]) -> list[SimulationResult]:
    """Simulate one workload on many accelerators at once (vectorised over configs and GEMMs)."""
    if not accels:
        return []
    if not workload.ops:
        return [_result(workload, accel, {}) for accel in accels]
    cfg = ConfigColumns.of(accels)
    return _results(workload, accels, cfg, simulate_columns(workload, cfg))


def simulate_columns(
    workload: Workload, cfg: ConfigColumns, memo: dict | None = None
) -> dict[str, np.ndarray]:
    """Every result column of the workload on the accelerators `cfg` holds, as (accelerators,
    GEMMs) arrays over the whole training (a SimulationResult's columns, row by row). `memo`
    keeps per-GEMM sparse work between calls on the same workload (a search's blocks)."""
    sweep = _place(workload, cfg)
    array = _skip_zeros(sweep, _map_onto_array(sweep), {} if memo is None else memo)
    units = _extension_units(sweep, array)
    traffic = _traffic(sweep, array)
    energy = _energy(sweep, array, units, traffic)
    return _training_columns(sweep, array, units, traffic, energy)


@dataclass(frozen=True)
class _Sweep:
    """One workload on many accelerators, as every phase of simulate_many reads it: the GEMMs as
    (1, L) rows, the accelerators' fields as (P, 1) columns, and per (accelerator, GEMM), as
    (P, L) arrays, the GEMM left after MERCURY's reductions and where it runs."""

    workload: Workload
    ops: _Ops
    cfg: ConfigColumns
    rows: np.ndarray
    cols: np.ndarray
    gemm_df: np.ndarray  # the systolic dataflow GEMMs map with ("row" maps them as os)
    has_mcache: np.ndarray
    skips_zeros: np.ndarray
    has_predictor: np.ndarray
    projection_rate: np.ndarray
    overlapped: np.ndarray
    m: np.ndarray
    k: np.ndarray
    n: np.ndarray
    runs: np.ndarray  # some work is left after the reductions
    on_predictor: np.ndarray
    on_projector: np.ndarray
    on_unit: np.ndarray  # on the predictor or the projection unit
    on_array: np.ndarray
    by_rows: np.ndarray  # a convolution on the 1-D row dataflow

    @property
    def shape(self) -> tuple[int, ...]:
        """(accelerators, GEMMs)"""
        return self.m.shape


def _place(workload: Workload, cfg: ConfigColumns) -> _Sweep:
    """The GEMM each accelerator runs after MERCURY's reductions, and on which unit."""
    ops = _op_arrays(workload)
    df = cfg["dataflow"]
    has_mcache = cfg["mcache.enabled"].astype(bool)
    has_predictor = cfg["gradient_predictor.enabled"].astype(bool)
    projection_rate = cfg["mcache.projection_macs_per_cycle"]
    has_projector = has_mcache & (projection_rate > 0)
    m = np.where(has_mcache, np.ceil(ops.m * (1.0 - ops.reused) - 1e-9), ops.m).astype(np.int64)
    k = np.where(has_mcache, np.ceil(ops.k * ops.folded - 1e-9), ops.k).astype(np.int64)
    n = np.broadcast_to(ops.n, m.shape)
    runs = (m > 0) & (k > 0) & (n > 0)
    on_predictor = ops.on_predictor & has_predictor
    on_projector = ops.on_projection & has_projector
    on_unit = on_predictor | on_projector
    return _Sweep(
        workload=workload,
        ops=ops,
        cfg=cfg,
        rows=cfg["rows"].astype(np.int64),
        cols=cfg["cols"].astype(np.int64),
        gemm_df=np.where(df == ROW, OS, df),
        has_mcache=has_mcache,
        skips_zeros=cfg["zero_skipping.enabled"].astype(bool),
        has_predictor=has_predictor,
        projection_rate=projection_rate,
        overlapped=cfg["extension_overlap"],
        m=m,
        k=k,
        n=n,
        runs=runs,
        on_predictor=on_predictor,
        on_projector=on_projector,
        on_unit=on_unit,
        on_array=runs & ~on_unit,
        # The row dataflow runs convolutions as 1-D rows; everything else maps as output
        # stationary.
        by_rows=(df == ROW) & ops.is_conv,
    )


@dataclass(frozen=True)
class _ArrayWork:
    """The GEMMs on the PE array: how they map, their cycles and the share of MACs done."""

    mapping: ArrayMapping
    dense: DenseCompute
    row_map: RowMapping
    kept: np.ndarray  # the share of the GEMM's m * k left after MERCURY's reductions
    cycles: np.ndarray  # of one group; 0 where the GEMM is not on the array
    efficiency: np.ndarray
    mac_fraction: np.ndarray  # of the effective MACs, the ones zero-skipping does not gate
    effective_macs: np.ndarray  # of the reduced GEMM, all groups, wherever it runs
    groups: np.ndarray

    @cached_property
    def time(self) -> np.ndarray:
        """Array cycles per execution, all groups."""
        return self.cycles * self.groups

    @cached_property
    def macs_done(self) -> np.ndarray:
        return self.effective_macs * self.mac_fraction


def _map_onto_array(s: _Sweep) -> _ArrayWork:
    """Dense array cycles: SCALE-Sim's on the systolic dataflows, the row dataflow's for
    convolutions on it."""
    ops = s.ops
    m, k, n = s.m, s.k, s.n
    mapping = map_gemm(m, k, n, s.rows, s.cols, s.gemm_df)
    dense = dense_compute(m, k, n, s.rows, s.cols, s.gemm_df)
    lanes, kernel_rows, columns, steps, products = ops.row_space
    row_map = map_rows(lanes, kernel_rows, columns, s.rows, s.cols)
    kept = np.divide(m * k, ops.m * ops.k, out=np.ones(m.shape), where=ops.m * ops.k > 0)
    cycles = np.where(s.by_rows, dense_row_cycles(steps, products, row_map, kept), dense.cycles)
    return _ArrayWork(
        mapping=mapping,
        dense=dense,
        row_map=row_map,
        kept=kept,
        cycles=np.where(s.on_array, cycles, 0).astype(np.float64),
        efficiency=np.where(s.by_rows, row_map.mapping_efficiency, dense.mapping_efficiency),
        mac_fraction=np.ones(m.shape),
        effective_macs=np.where(s.runs, m * k * n, 0) * ops.groups,
        groups=ops.groups,
    )


def _skip_zeros(s: _Sweep, array: _ArrayWork, memo: dict) -> _ArrayWork:
    """The array work with zero-skipping's cycles and gated MACs where the accelerator skips
    zeros and an operand is sparse."""
    sparse = s.on_array & s.ops.sparse & s.skips_zeros
    if not sparse.any():
        return array
    cycles = array.cycles.copy()
    _sparse_rows(s, array, sparse & s.by_rows, cycles, memo)
    _sparse_gemms(s, array, sparse & ~s.by_rows, cycles, memo)
    mac_fraction = np.where(sparse, gated_mac_fraction(s.ops.density_a, s.ops.density_b), 1.0)
    return replace(array, cycles=cycles, mac_fraction=mac_fraction)


def _group(columns: list[np.ndarray]) -> tuple[list[list[int]], np.ndarray]:
    """The distinct rows of these equally long integer columns, and each row's group."""
    codes, sizes, firsts = [], [], []
    for column in columns:
        values, code = np.unique(column, return_inverse=True)
        codes.append(code.reshape(-1))
        sizes.append(len(values))
    flat = np.ravel_multi_index(codes, sizes) if len(codes) > 1 else codes[0]
    _, firsts, inverse = np.unique(flat, return_index=True, return_inverse=True)
    keys = np.stack([column[firsts] for column in columns], axis=1).tolist()
    return keys, inverse.reshape(-1)


def _sparse_rows(
    s: _Sweep, array: _ArrayWork, pairs: np.ndarray, cycles: np.ndarray, memo: dict
) -> None:
    """Into `cycles`: the array cycles of sparse convolutions on the row dataflow, one closed
    form per (GEMM, array shape)."""
    p, i = np.nonzero(pairs)
    if not len(p):
        return
    # The step cycles depend on the array's rows only through the lanes a fold holds (rows //
    # kernel rows) or, for kernels taller than the array, the pieces they are cut into (rows).
    kernel_rows, rows = s.ops.row_space[1][0, i], s.rows[p, 0]
    shape = np.where(rows >= kernel_rows, rows // np.maximum(kernel_rows, 1), -rows)
    keys, inverse = _group([i, shape, s.cols[p, 0]])
    first = np.zeros(len(keys), dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(inverse))[::-1]  # a config of each key
    steps = np.empty(len(keys))
    for index, ((op_index, r_shape, c), r) in enumerate(
        zip(keys, rows[first].tolist(), strict=True)
    ):
        key = ("rows", op_index, r_shape, c)
        if key not in memo:
            if ("rows", op_index) not in memo:
                memo["rows", op_index] = SparseRows(s.workload.ops[op_index])
            memo[key] = memo["rows", op_index].step_cycles(r, c)
        steps[index] = memo[key]
    row_map = array.row_map
    fill = row_map.row_folds * row_map.col_folds * row_map.fill_drain
    cycles[p, i] = steps[inverse] * array.kept[p, i] + fill[p, i] - 1


def _sparse_gemms(
    s: _Sweep, array: _ArrayWork, pairs: np.ndarray, cycles: np.ndarray, memo: dict
) -> None:
    """Into `cycles`: the array cycles of sparse GEMMs on the systolic dataflows, the lane steps
    once per (GEMM, effective shape, lane tile, dataflow), times the folds of the other
    dimension."""
    p, i = np.nonzero(pairs)
    if not len(p):
        return
    m, k, n = s.m[p, i], s.k[p, i], s.n[p, i]
    rows, cols = s.rows[p, 0], s.cols[p, 0]
    skip_a = (s.ops.density_a <= s.ops.density_b)[0, i]
    flow = s.gemm_df[p, 0]
    tile = np.where(lane_tile_is_rows(flow, skip_a), rows, cols)
    keys, inverse = _group([i, m, k, n, tile, flow])
    steps = np.empty(len(keys))
    for index, (o, mm, kk, nn, t, f) in enumerate(keys):
        key = ("lanes", o, mm, kk, nn, t, f)
        if key not in memo:
            memo[key] = lane_steps(s.workload.ops[o], mm, kk, nn, t, f, memo)
        steps[index] = memo[key]
    repeats = other_folds(m, n, rows, cols, flow, skip_a)
    mapping = array.mapping
    fill = mapping.row_folds * mapping.col_folds * mapping.fill_drain
    cycles[p, i] = steps[inverse] * repeats + fill[p, i] - 1


@dataclass(frozen=True)
class _UnitWork:
    """The extension units' work per execution: busy cycles, and those the array does not hide."""

    extra: ExtraOpCounts
    busy: np.ndarray
    exposed: np.ndarray


def _extension_units(s: _Sweep, array: _ArrayWork) -> _UnitWork:
    cfg, ops = s.cfg, s.ops
    extra = count_extra_ops([op.extra_ops for op in s.workload.ops])
    lookups = extra.mcache_lookups.reshape(1, -1)
    updates = extra.weight_updates.reshape(1, -1)
    effective_macs = array.effective_macs
    own_unit = np.where(
        s.on_predictor & s.runs,
        np.ceil(effective_macs / cfg["gradient_predictor.macs_per_cycle"]),
        np.where(
            s.on_projector & s.runs,
            np.ceil(effective_macs / np.maximum(s.projection_rate, 1)),
            0,
        ),
    )
    units = UnitCycles(
        lookups=mcache_lookup_cycles(
            lookups, s.has_mcache, cfg["mcache.lookups_per_cycle"], s.rows
        ),
        lookup_latency=np.where(s.has_mcache & (lookups > 0), cfg["mcache.lookup_latency"], 0.0),
        column_units=column_unit_cycles(extra.alu_ops.reshape(1, -1) - updates, s.cols),
        weight_updates=column_unit_cycles(updates, s.cols),
        own_unit=own_unit,
        own_unit_overlaps=s.on_projector,
    )
    feeder_time = np.where(ops.feeder >= 0, array.time[:, np.maximum(ops.feeder[0], 0)], 0.0)
    return _UnitWork(
        extra=extra,
        busy=np.broadcast_to(units.busy, s.shape),
        exposed=units.exposed(array.time, feeder_time, s.overlapped),
    )


@dataclass(frozen=True)
class _Traffic:
    """Words moved per execution, all groups, by operand; stall cycles of one group."""

    dram_reads: dict[str, np.ndarray]
    dram_writes: dict[str, np.ndarray]
    sram_reads: dict[str, np.ndarray]
    sram_writes: dict[str, np.ndarray]
    stalls: np.ndarray


def _traffic(s: _Sweep, array: _ArrayWork) -> _Traffic:
    cfg, g, on_array = s.cfg, s.ops.groups, s.on_array
    m, k, n = s.m, s.k, s.n
    word_capacity = {name: cfg[f"{name}_sram_kib"] * 1024 // cfg["word_bytes"] for name in OPERANDS}
    traffic = dram_traffic(
        m, k, n, array.mapping, s.rows, s.cols, s.gemm_df,
        word_capacity["ifmap"], word_capacity["filter"], word_capacity["ofmap"],
    )  # fmt: skip
    traffic, moves = _reduced_away(s, traffic, array.mapping, word_capacity["ifmap"] // 2)
    tensor = cfg["conv_operand_traffic"]
    if tensor.any():
        halves = {name: words // 2 for name, words in word_capacity.items()}
        traffic = with_tensor_traffic(
            traffic, s.workload.ops, tensor, on_array, s.gemm_df, s.rows, s.cols, halves
        )
    # A GEMM fed by another's input stream (MERCURY's projection) reads no A from DRAM.
    fused = s.ops.feeder >= 0
    traffic = replace(traffic, ifmap_reads=np.where(fused, 0.0, traffic.ifmap_reads))
    per_element = stored_words_per_element(cfg, s.workload.ops)
    if per_element is not None:
        traffic = traffic.stored(per_element)
    stalls = np.where(moves, stall_cycles(traffic, array.cycles, cfg["dram_bandwidth"]), 0)

    dram_reads = {
        "ifmap": np.where(moves, traffic.ifmap_reads, 0) * g,
        "filter": np.where(moves, traffic.filter_reads, 0) * g,
        "ofmap": np.where(moves, traffic.ofmap_reads, 0) * g,
    }
    dram_writes = {
        "ifmap": np.where(moves, traffic.ifmap_writes, 0) * g,
        "filter": np.zeros(s.shape),
        "ofmap": np.where(moves, traffic.ofmap_writes, 0) * g,
    }
    a_words, b_words, c_words = m * k * g, k * n * g, m * n * g
    unit_a_words = np.where(s.on_projector, 0, a_words)  # the projection shares the FWD stream
    dense, on_unit = array.dense, s.on_unit
    sram_reads = {
        "ifmap": np.where(on_array, dense.ifmap_reads * g, np.where(on_unit, unit_a_words, 0)),
        "filter": np.where(on_array, dense.filter_reads * g, np.where(on_unit, b_words, 0)),
        "ofmap": dram_writes["ofmap"],
    }
    sram_writes = {
        "ifmap": dram_reads["ifmap"],
        "filter": dram_reads["filter"],
        "ofmap": np.where(on_array, dense.ofmap_writes * g, np.where(on_unit, c_words, 0))
        + dram_reads["ofmap"],
    }
    if per_element is not None:  # the array reads A and B in their stored format
        sram_reads["ifmap"] = sram_reads["ifmap"] * per_element["ifmap"]
        sram_reads["filter"] = sram_reads["filter"] * per_element["filter"]
    sram_reads["ifmap"] = sram_reads["ifmap"] + dram_writes["ifmap"]  # group sums drained
    active = s.runs | moves
    for name in OPERANDS:
        sram_reads[name] = np.where(active, sram_reads[name], 0)
        sram_writes[name] = np.where(active, sram_writes[name], 0)
    return _Traffic(dram_reads, dram_writes, sram_reads, sram_writes, stalls)


def _reduced_away(
    s: _Sweep, traffic: DramTraffic, mapping: ArrayMapping, a_half: np.ndarray
) -> tuple[DramTraffic, np.ndarray]:
    """The traffic of the reduced GEMMs (im2col convention, one group) with the words MERCURY's
    reductions cannot avoid put back, and where each GEMM moves words. Every element of A left
    out of the reduced GEMM is read once: a hit row's window (its signature needs it; the
    projection reads the FWD stream) and a folded dY (BWD-WEIGHT sums each hit group's dY on
    chip). Every hit row's output is written once: its copy lands in the output tensor the next
    layer reads. B is the reduced GEMM's: FWD's weights, BWD-WEIGHT's representative windows.
    Folded group sums that later sweeps of A need and that do not stay in `a_half` are written
    out once (A's writes)."""
    ops, m, k, n = s.ops, s.m, s.k, s.n
    reduced = s.has_mcache & ~s.on_unit & ((m < ops.m) | (k < ops.k))
    if not reduced.any():
        return traffic, s.on_array
    read_once = np.where(reduced, ops.m * ops.k - m * k, 0)
    written_once = np.where(reduced, (ops.m - m) * n, 0)
    swept_again = (k < ops.k) & (s.gemm_df != IS) & (mapping.col_folds > 1)
    sums_out = np.where(reduced & swept_again & s.on_array, np.maximum(0, m * k - a_half), 0)

    def computed(words: np.ndarray) -> np.ndarray:
        return np.where(s.on_array, words, 0)

    return DramTraffic(
        ifmap_reads=computed(traffic.ifmap_reads) + read_once,
        filter_reads=computed(traffic.filter_reads),
        ofmap_reads=computed(traffic.ofmap_reads),
        ofmap_writes=computed(traffic.ofmap_writes) + written_once,
        first_fold_words=traffic.first_fold_words,
        ifmap_writes=sums_out.astype(np.float64),
    ), s.on_array | reduced


def _energy(s: _Sweep, array: _ArrayWork, units: _UnitWork, traffic: _Traffic) -> EnergyColumns:
    return energy_columns(
        s.cfg,
        array.macs_done,
        traffic.sram_reads,
        traffic.sram_writes,
        traffic.dram_reads,
        traffic.dram_writes,
        units.extra,
        s.has_mcache,
    )


def _training_columns(
    s: _Sweep, array: _ArrayWork, units: _UnitWork, traffic: _Traffic, energy: EnergyColumns
) -> dict[str, np.ndarray]:
    """Every result column, per (accelerator, GEMM), over the whole training."""
    ops, g, macs_done = s.ops, s.ops.groups, array.macs_done
    compute_cycles = array.time + units.exposed
    total_cycles = compute_cycles + traffic.stalls * g
    array_macs = np.where(s.on_array, macs_done, 0)
    dram_reads, dram_writes = traffic.dram_reads, traffic.dram_writes
    per_execution = {
        "macs_done_compute": np.where(ops.is_compute, macs_done, 0),
        "macs_overhead": np.where(ops.is_compute, 0, macs_done),
        "compute_cycles": compute_cycles,
        "extension_cycles": units.busy,
        "exposed_extension_cycles": units.exposed,
        "stall_cycles": traffic.stalls * g,
        "total_cycles": total_cycles,
        "array_cycles": array.time,
        "array_macs": array_macs,
        "mapped_pe_cycles": np.where(s.on_array, array.efficiency, 0) * array.time,
        "dram_bytes": sum(dram_reads.values()) + sum(dram_writes.values()),
        **{f"sram_reads_{o}": traffic.sram_reads[o] for o in OPERANDS},
        **{f"sram_writes_{o}": traffic.sram_writes[o] for o in OPERANDS},
        **{f"dram_reads_{o}": dram_reads[o] for o in OPERANDS},
        **{f"dram_writes_{o}": dram_writes[o] for o in OPERANDS},
        **energy.as_columns(),
    }
    training = {name: values * ops.executions for name, values in per_execution.items()}
    training["dram_bytes"] = training["dram_bytes"] * s.cfg["word_bytes"]
    algorithmic = ops.m * ops.k * ops.n * ops.groups * ops.baseline_executions
    training["macs_algorithmic"] = np.broadcast_to(algorithmic, s.shape)
    training["macs_actual"] = training.pop("macs_done_compute")
    training["macs_skipped"] = training["macs_algorithmic"] - training["macs_actual"]
    training["energy_pj"] = sum(training[f"energy_{level}_pj"] for level in ENERGY_LEVELS)
    pes = (s.rows * s.cols).astype(np.float64)
    cycles = training["total_cycles"]
    training["utilization"] = np.divide(
        training["array_macs"], pes * cycles, out=np.zeros(s.shape), where=cycles > 0
    )
    array_total = training["array_cycles"]
    training["mapping_efficiency"] = np.divide(
        training["mapped_pe_cycles"], array_total, out=np.zeros(s.shape), where=array_total > 0
    )
    return training


def _results(
    workload: Workload,
    accels: list[AcceleratorConfig],
    cfg: ConfigColumns,
    training: dict[str, np.ndarray],
) -> list[SimulationResult]:
    labels = _labels(workload)
    switched_on = np.concatenate([cfg[f"{name}.enabled"] for name in EXTENSIONS], axis=1)
    return [
        _result(
            workload,
            accel,
            {name: values[p] for name, values in training.items()},
            labels,
            tuple(name for name, on in zip(EXTENSIONS, switched_on[p].tolist(), strict=True) if on),
        )
        for p, accel in enumerate(accels)
    ]


# Every number and flag of an accelerator (AcceleratorConfig's int, float and bool fields, by
# dotted path) but its area table's, which only the area model reads (backend.sim.area).
CONFIG_FIELDS = tuple(
    path
    for path, info in ACCELERATOR_FIELDS.items()
    if info.annotation in (int, float, bool) and not path.startswith("area.")
)
# The choice (Literal) fields the simulator reads, each value coded as a number or a flag.
CHOICE_CODES: dict[str, Mapping[str, int | bool]] = {
    "dataflow": DATAFLOW_CODES,
    "extension_overlap": {"overlapped": True, "serial": False},
    "conv_operand_traffic": {"tensor": True, "im2col": False},
    **{f"storage.{kind}": STORAGE_CODES for kind in STORAGE_KINDS},
}


def _labels(workload: Workload) -> list[tuple[str, str, str, int]]:
    return [(op.layer, str(op.pass_.value), op.role, op.executions) for op in workload.ops]


def _notes(workload: Workload, accel: AcceleratorConfig) -> list[str]:
    if accel.conv_operand_traffic != "tensor":
        return []
    return tensor_traffic_notes(workload.ops)


def _result(
    workload: Workload,
    accel: AcceleratorConfig,
    columns: dict[str, np.ndarray],
    labels: list[tuple[str, str, str, int]] | None = None,
    extensions: tuple[str, ...] | None = None,
) -> SimulationResult:
    if not columns:
        columns = {name: np.zeros(0) for name in COLUMNS}
    return SimulationResult(
        conv_operand_traffic=accel.conv_operand_traffic,
        notes=_notes(workload, accel),
        accelerator=accel.name,
        model=workload.model,
        technique=workload.technique,
        iterations=workload.iterations,
        clock_mhz=accel.clock_mhz,
        pes=accel.rows * accel.cols,
        extensions=accel.extensions_on if extensions is None else extensions,
        labels=_labels(workload) if labels is None else labels,
        columns=columns,
    )
