"""How fast the simulator core evaluates layer-passes, next to SCALE-Sim on the same layers.

Prints, from one run:
- layer-pass evaluations per second of simulate_many (one core), sweeping accelerator configs
  (os, ws, is and the 1-D row dataflow, zero-skipping on) over a CIFAR-scale network's training
  GEMMs as the training stores them (sparse, with per-lane and per-row counts), with and without
  materialising the per-row LayerPassResult objects, and for the same GEMMs dense;
- the time to re-simulate a stored (JSON) workload of a 10-layer network, with measured per-lane
  non-zero counts on every backward pass, on a new accelerator config (im2col traffic, and on
  configs that move real tensors, each seen for the first time);
- SCALE-Sim v3.0.0's seconds per layer on a sample of the same GEMMs and our seconds per
  evaluation of those same GEMMs, and the ratio.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from backend.sim import Workload, simulate, simulate_many
from backend.sim.lowering import lower_conv2d, lower_linear
from backend.sim.row_dataflow import gradient_taps, input_taps
from backend.sim.workload import GemmOp, TrainingPass
from backend.specs.accelerator import PRESETS, AcceleratorConfig

BATCH = 2
SCALESIM_SAMPLE = 6  # GEMMs of the network given to SCALE-Sim, which takes ~seconds per layer


def network_ops(batch: int) -> list[GemmOp]:
    """A 10-layer CIFAR-style CNN (9 convs and a classifier) lowered for training."""
    ops: list[GemmOp] = []
    size, channels = 32, 3
    for i, (out, stride) in enumerate([(16, 1), (16, 1), (32, 2), (32, 1), (64, 2), (64, 1),
                                       (128, 2), (128, 1), (128, 1)]):  # fmt: skip
        ops += lower_conv2d(f"conv{i}", batch, channels, out, size, size, 3, stride, padding=1)
        size = (size + 2 - 3) // stride + 1
        channels = out
    return ops + lower_linear("fc", batch, channels, 10)


def measured_workload(batch: int, iterations: int, rng: np.random.Generator) -> Workload:
    """The network as the training engine would store it: sparse inputs (FWD) and gradients
    (backward), with per-lane non-zero counts for the systolic dataflows and per-row work for
    the 1-D row dataflow on every pass, and GP steps that skip half the backward passes."""
    ops = network_ops(batch)
    for op in ops:
        op.executions = iterations
        backward = op.pass_ is not TrainingPass.FWD
        density = 0.3 if backward else 0.55
        op.executions = iterations // 2 if backward else iterations
        op.density_a = density
        op.a_row_nnz = rng.binomial(op.k, density, size=op.m).astype(np.int64)
        g = op.conv
        if g is None:
            continue
        if backward:  # dY rows (n, k, oh)
            mask = rng.random((g.batch * g.out_channels * g.out_h, g.out_w)) < density
            op.a_line_macs = (mask @ gradient_taps(g)).astype(np.int64)
        else:  # x rows (n, c, h)
            mask = rng.random((g.batch * g.in_channels * g.height, g.width)) < density
            op.a_line_macs = (mask @ input_taps(g)).astype(np.int64)
    return Workload("cnn10", "cifar10", batch, iterations, ops, technique="sparsetrain+adagp")


def configs(count: int, rng: np.random.Generator) -> list[AcceleratorConfig]:
    return [
        AcceleratorConfig(
            name=f"cfg{i}",
            rows=int(rng.choice([8, 12, 16, 32, 64, 128])),
            cols=int(rng.choice([8, 14, 16, 32, 64, 128])),
            dataflow=str(rng.choice(["os", "ws", "is", "row"])),
            ifmap_sram_kib=int(rng.choice([16, 64, 256])),
            filter_sram_kib=int(rng.choice([16, 64, 256])),
            ofmap_sram_kib=int(rng.choice([16, 64, 256])),
            dram_bandwidth=float(rng.choice([2.0, 8.0, 32.0])),
        )
        for i in range(count)
    ]


def best_seconds(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(0)
    dense = Workload("cnn10", "cifar10", BATCH, 1000, network_ops(BATCH))
    for op in dense.ops:
        op.executions = 1000
    sweep = configs(400, rng)
    measured = measured_workload(BATCH, 1000, np.random.default_rng(2))
    evaluations = len(dense.ops) * len(sweep)
    core = best_seconds(lambda: simulate_many(measured, sweep), 5)
    rows = best_seconds(lambda: [r.layers for r in simulate_many(measured, sweep)], 3)
    dense_core = best_seconds(lambda: simulate_many(dense, sweep), 5)
    dataflows = {df: sum(a.dataflow == df for a in sweep) for df in ("os", "ws", "is", "row")}
    print(
        f"layer-pass GEMMs: {len(dense.ops)}, accelerator configs: {len(sweep)} "
        f"(dataflows {dataflows}), zero-skipping on, measured per-lane and per-row counts"
    )
    print(f"core (columns):          {evaluations / core:12,.0f} layer-pass evaluations/s")
    print(f"with LayerPassResult:    {evaluations / rows:12,.0f} layer-pass evaluations/s")
    print(f"core, dense workload:    {evaluations / dense_core:12,.0f} layer-pass evaluations/s")

    stored = json.dumps(measured_workload(BATCH, 1000, rng).to_dict())
    workload = Workload.from_dict(json.loads(stored))
    for dataflow in ("os", "row"):
        new_accel = configs(1, np.random.default_rng(1))[0].model_copy(
            update={"dataflow": dataflow}
        )
        samples = [
            best_seconds(lambda a=new_accel: simulate(workload, a).totals, 1) for _ in range(50)
        ]
        reload = best_seconds(
            lambda a=new_accel: simulate(Workload.from_dict(json.loads(stored)), a).totals, 20
        )
        print(
            f"re-simulate stored 10-layer workload ({len(workload.ops)} GEMMs, sparse counts, "
            f"{new_accel.rows}x{new_accel.cols} {dataflow}): "
            f"median {1e3 * statistics.median(samples):.2f} ms, best {1e3 * min(samples):.2f} ms, "
            f"with JSON load (best) {1e3 * reload:.2f} ms"
        )

    # Convolutions moving their real tensors (every preset does): the traffic model of a new
    # config is computed once, then memoised; each of these configs is seen for the first time.
    # Beside each, the same config moving im2col matrices, in the same run: a ratio that holds
    # on a busy machine.
    first_seen, im2col = [], []
    for rows in range(8, 28):
        accel = PRESETS["edge"].model_copy(update={"rows": rows})
        first_seen.append(best_seconds(lambda a=accel: simulate(workload, a), 1))
        windows = accel.model_copy(update={"conv_operand_traffic": "im2col"})
        im2col.append(best_seconds(lambda a=windows: simulate(workload, a), 1))
    ratio = statistics.median(np.divide(first_seen, im2col))
    print(
        f"re-simulate it on a new tensor-traffic config (edge preset, 20 array heights, each seen "
        f"for the first time): median {1e3 * statistics.median(first_seen):.2f} ms, "
        f"worst {1e3 * max(first_seen):.2f} ms; {ratio:.1f}x the same config with im2col traffic"
    )

    if importlib.util.find_spec("scalesim") is None:
        print("scalesim not installed: no comparison")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests.sim
    from tests.sim.scalesim_harness import run_scalesim

    accel = AcceleratorConfig(rows=16, cols=16, dataflow="os")
    # SCALE-Sim steps through every cycle in Python: keep to GEMMs of at most ~10k cycles.
    small = [op for op in dense.ops if -(-op.m // 16) * -(-op.n // 16) * (op.k + 30) <= 10_000]
    picks = np.linspace(0, len(small) - 1, SCALESIM_SAMPLE).round().astype(int)
    sample = [small[i] for i in sorted(set(picks))]
    gemms = tuple((op.m, op.k, op.n) for op in sample)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run_scalesim(Path(tmp), accel.rows, accel.cols, accel.dataflow, gemms=gemms)
        scalesim_per_layer = (time.perf_counter() - start) / len(gemms)
    sample_workload = Workload("sample", "cifar10", BATCH, 1, sample)
    per_call = best_seconds(lambda: simulate(sample_workload, accel).totals, 20) / len(sample)
    shapes = ", ".join(f"{m}x{k}x{n}" for m, k, n in gemms)
    print(f"SCALE-Sim 3.0.0 on {len(gemms)} of the same GEMMs (m x k x n: {shapes}), 16x16 os:")
    print(f"  scalesim {scalesim_per_layer:.3f} s/layer")
    print(f"  ours, one simulate() call: {1e6 * per_call:.1f} µs/layer, "
          f"ratio {scalesim_per_layer / per_call:,.0f}x")  # fmt: skip
    print(f"  ours, in a config sweep:   {1e6 * core / evaluations:.2f} µs/layer, "
          f"ratio {scalesim_per_layer * evaluations / core:,.0f}x")  # fmt: skip


if __name__ == "__main__":
    main()
