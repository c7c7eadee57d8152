"""How fast a hardware design search evaluates designs (backend/sim/design_search.py).

Prints, from one run:
- ms per design for --designs random designs (default 10^5) of the stored 10-layer workload of
  benchmarks/sim_speed.py (sparse, per-lane and per-row counts, JSON round trip) on one core,
  evaluated chunk by chunk (chunks of the search's chunk_size) and merged, as the search job's
  workers do; nearly every design has an array shape and SRAM sizes no other design has;
- on a few hundred of the same designs: simulate() called per design (each a new config), and
  the per-fold traffic reference (FoldRows: what the tensor-traffic step cost per design before
  it counted every config at once), with their ratios to the search's time per design;
- --parallel-designs (default 10^6) designs split into chunks over --processes processes
  (default 2), their time per design against the one-core figure.

Run it niced on a quiet machine: `nice python benchmarks/design_search.py`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time

import numpy as np
from sim_speed import BATCH, measured_workload

from backend.sim import Workload, simulate
from backend.sim.area import McacheSize, area
from backend.sim.conv_traffic import fold_rows, input_reads, output_traffic, supports_tensor_traffic
from backend.sim.design_search import (
    SearchResult,
    design_at,
    evaluate_chunk,
    hardware_for,
    merge,
)
from backend.sim.systolic import DATAFLOW_CODES, OS, ROW
from backend.sim.workload import TrainingPass
from backend.specs.design_search import DesignSearch

PARAMETERS = {
    "rows": {"low": 4, "high": 256, "log": True},
    "cols": {"low": 4, "high": 256, "log": True},
    "dataflow": {"values": ["os", "ws", "is", "row"]},
    "ifmap_sram_kib": {"low": 8, "high": 2048, "log": True},
    "filter_sram_kib": {"low": 8, "high": 2048, "log": True},
    "ofmap_sram_kib": {"low": 8, "high": 2048, "log": True},
    "dram_bandwidth": {"low": 1, "high": 64, "log": True},
    "clock_mhz": {"low": 200, "high": 1000},
}


def stored_workload() -> Workload:
    workload = measured_workload(BATCH, 1000, np.random.default_rng(2))
    return Workload.from_dict(json.loads(json.dumps(workload.to_dict())))


def search(designs: int, seed: int = 0) -> DesignSearch:
    return DesignSearch(
        base="edge", mode="random", samples=designs, seed=seed, parameters=PARAMETERS
    )


def run_chunks(spec: DesignSearch, chunks: list[tuple[int, int]]) -> tuple[list[dict], float]:
    """The chunks' results (JSON, as a worker sends them) and the CPU seconds they took."""
    workload = stored_workload()
    cpu = time.process_time()
    results = [
        evaluate_chunk({workload.technique: workload}, spec, start, stop).to_json()
        for start, stop in chunks
    ]
    return results, time.process_time() - cpu


def chunk_ranges(spec: DesignSearch) -> list[tuple[int, int]]:
    count, size = spec.design_count, spec.chunk_size
    return [(start, min(start + size, count)) for start in range(0, count, size)]


def per_fold_traffic(workload: Workload, designs: list) -> None:
    """The tensor-traffic counts of each design the per-fold way (FoldRows, one config and one
    GEMM at a time), uncached: each design's array shape is new."""
    for accel in designs:
        fold_rows.cache_clear()
        flow = DATAFLOW_CODES[accel.dataflow]
        flow = OS if flow == ROW else flow
        for op in workload.ops:
            if not supports_tensor_traffic(op.conv):
                continue
            folds = fold_rows(op.conv, op.pass_, flow, accel.rows, accel.cols)
            kib = {
                TrainingPass.FWD: accel.ifmap_sram_kib,
                TrainingPass.BWD_WEIGHT: accel.filter_sram_kib,
                TrainingPass.BWD_DATA: accel.ofmap_sram_kib,
            }[op.pass_]
            half = float(kib * 1024 // accel.word_bytes // 2)
            if op.pass_ is TrainingPass.BWD_DATA:
                output_traffic(folds, half)
            else:
                input_reads(folds, half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=int, default=100_000)
    parser.add_argument("--per-design", type=int, default=300)
    parser.add_argument("--parallel-designs", type=int, default=1_000_000)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()

    workload = stored_workload()
    spec = search(args.designs)
    start = time.perf_counter()
    chunks, cpu = run_chunks(spec, chunk_ranges(spec))
    one_core = merge([SearchResult.from_json(c) for c in chunks])
    seconds = time.perf_counter() - start
    per_design = cpu / args.designs
    result = one_core.workloads[workload.technique]
    print(
        f"stored 10-layer workload ({len(workload.ops)} GEMMs, {workload.technique}), "
        f"{args.designs:,} random designs on one core in chunks of {spec.chunk_size:,}: "
        f"{cpu:.1f} s CPU ({seconds:.1f} s wall), {1e3 * per_design:.3f} ms CPU per design "
        f"(front {len(result.front.index)} designs, sample {len(result.sample.index):,})"
    )

    probe = search(args.per_design, seed=1)
    designs = [
        hardware_for(design_at(probe, i), workload.technique) for i in range(args.per_design)
    ]
    mcache = McacheSize()
    start = time.process_time()
    for design in designs:
        assert simulate(workload, design).totals.seconds > 0
        area(design, mcache)
    simulate_each = (time.process_time() - start) / len(designs)
    start = time.process_time()
    per_fold_traffic(workload, designs)
    per_fold = (time.process_time() - start) / len(designs)
    print(
        f"simulate() per design ({args.per_design} of the same kind of designs): "
        f"{1e3 * simulate_each:.2f} ms CPU, {simulate_each / per_design:.1f}x the search's time"
    )
    print(
        f"per-fold tensor-traffic reference (FoldRows, the counting before it took every config "
        f"at once): {1e3 * per_fold:.2f} ms CPU per design, {per_fold / per_design:.1f}x the "
        "search's whole time per design"
    )

    big = search(args.parallel_designs, seed=2)
    ranges = chunk_ranges(big)
    start = time.perf_counter()
    with multiprocessing.Pool(args.processes) as pool:
        parts = pool.starmap(run_chunks, [(big, [r]) for r in ranges])
    merged = merge([SearchResult.from_json(c) for part, _ in parts for c in part])
    wall = (time.perf_counter() - start) / args.parallel_designs
    cpu_each = sum(cpu for _, cpu in parts) / args.parallel_designs
    print(
        f"{args.parallel_designs:,} designs over {args.processes} processes ({len(ranges)} "
        f"chunks): {wall * args.parallel_designs:.1f} s wall, {1e3 * wall:.3f} ms wall per "
        f"design, {per_design / wall:.2f}x the one-core CPU rate; {1e3 * cpu_each:.3f} ms CPU "
        f"per design in the workers (front {len(merged.workloads[workload.technique].front.index)} "
        "designs)"
    )


if __name__ == "__main__":
    main()
