"""Our memory model next to SCALE-Sim v3.0.0's, layer by layer, with DRAM bandwidth limited.

SCALE-Sim runs in its USER bandwidth mode (DRAM delivers `bandwidth` words per cycle), on its own
conv and GEMM topologies; we simulate the same layers (a conv as lower_conv2d's FWD GEMM at batch
1) with the im2col convention, one-byte words (SCALE-Sim's SRAM sizes count one-byte words) and
the same SRAM sizes and bandwidth. For convolutions the last column adds our real-tensor traffic
(conv_operand_traffic = "tensor"). Dense compute cycles are equal by construction (see
tests/sim/test_scalesim_equality.py); the systematic differences in traffic and stalls are
explained in backend/sim/memory.py's docstring.

Columns: SCALE-Sim's "Total Cycles (incl. prefetch)", "Total Cycles", "Stall Cycles" and DRAM
reads of ifmap and filter and writes of ofmap; ours: total cycles (compute + stalls, the initial
fill included), stall cycles, DRAM reads of ifmap, filter and spilled partial sums, ofmap writes.

Run: python benchmarks/sim_vs_scalesim.py  (a few minutes: SCALE-Sim steps through every cycle)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests.sim

from backend.sim import GemmOp, TrainingPass, Workload, simulate
from backend.sim.lowering import lower_conv2d
from backend.specs.accelerator import AcceleratorConfig
from tests.sim.scalesim_harness import run_scalesim_memory

# (ifmap h, w, filter h, w, channels, filters, stride): SCALE-Sim's conv topology, no padding.
CONVS = ((28, 28, 3, 3, 16, 16, 1), (14, 14, 3, 3, 32, 32, 1), (16, 16, 5, 5, 8, 16, 2))
GEMMS = ((256, 64, 64), (128, 288, 32), (64, 256, 64))  # (m, k, n)
# (rows, cols, dataflow, DRAM words per cycle, (ifmap, filter, ofmap) SRAM KB)
CONFIGS = (
    (16, 16, "os", 4, (32, 32, 16)),
    (16, 16, "ws", 8, (64, 64, 64)),
    (8, 8, "is", 2, (16, 16, 16)),
    (32, 32, "os", 16, (8, 8, 8)),
)


def _ours(op: GemmOp, rows: int, cols: int, dataflow: str, bandwidth: int, sram_kb, traffic):
    accel = AcceleratorConfig(
        rows=rows, cols=cols, dataflow=dataflow, dram_bandwidth=float(bandwidth), word_bytes=1,
        ifmap_sram_kib=sram_kb[0], filter_sram_kib=sram_kb[1], ofmap_sram_kib=sram_kb[2],
        conv_operand_traffic=traffic,
    )  # fmt: skip
    return simulate(Workload("layer", "-", 1, 1, [op]), accel).layers[0]


def _conv_op(conv: tuple[int, ...]) -> GemmOp:
    height, width, fh, fw, channels, filters, stride = conv
    return lower_conv2d("conv", 1, channels, filters, height, width, (fh, fw), stride=stride)[0]


def main() -> None:
    header = (
        f"{'layer':<22}{'array':>7}{'df':>4}{'bw':>4}{'SRAM KB':>10} | "
        f"{'SS total+fill':>13}{'SS total':>10}{'SS stall':>10}{'SS ifmap':>10}{'SS filter':>10}"
        f"{'SS ofmap':>10} | {'ours total':>10}{'ours stall':>11}{'ifmap':>10}{'filter':>9}"
        f"{'psum rd':>9}{'ofmap':>9} | {'tensor ifmap':>12}"
    )
    print(header)
    print("-" * len(header))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for c, (rows, cols, dataflow, bandwidth, sram_kb) in enumerate(CONFIGS):
            for kind, layers in (("conv", CONVS), ("gemm", GEMMS)):
                workdir = Path(tmp) / f"{kind}{c}"
                arguments = {"convs": layers} if kind == "conv" else {"gemms": layers}
                theirs = run_scalesim_memory(
                    workdir, rows, cols, dataflow, bandwidth, sram_kb, **arguments
                )
                for layer, ss in zip(layers, theirs, strict=True):
                    if kind == "conv":
                        op = _conv_op(layer)
                        h, w, fh, fw, channels, filters, stride = layer
                        name = f"conv {h}x{w}x{channels} {fh}x{fw}->{filters} s{stride}"
                    else:
                        m, k, n = layer
                        op = GemmOp("gemm", TrainingPass.FWD, m, k, n, executions=1)
                        name = f"gemm {m}x{k}x{n}"
                    ours = _ours(op, rows, cols, dataflow, bandwidth, sram_kb, "im2col")
                    tensor = ""
                    if kind == "conv":
                        real = _ours(op, rows, cols, dataflow, bandwidth, sram_kb, "tensor")
                        tensor = f"{real.dram_reads_by_operand['ifmap']:>12,.0f}"
                    print(
                        f"{name:<22}{f'{rows}x{cols}':>7}{dataflow:>4}{bandwidth:>4}"
                        f"{'/'.join(map(str, sram_kb)):>10} | "
                        f"{ss.overall_cycles:>13,}{ss.total_cycles:>10,}{ss.stall_cycles:>10,}"
                        f"{ss.ifmap_dram_reads:>10,}{ss.filter_dram_reads:>10,}"
                        f"{ss.ofmap_dram_writes:>10,} | "
                        f"{ours.total_cycles:>10,.0f}{ours.stall_cycles:>11,.0f}"
                        f"{ours.dram_reads_by_operand['ifmap']:>10,.0f}"
                        f"{ours.dram_reads_by_operand['filter']:>9,.0f}"
                        f"{ours.dram_reads_by_operand['ofmap']:>9,.0f}"
                        f"{ours.dram_writes_by_operand['ofmap']:>9,.0f} | {tensor}"
                    )
    print(f"\n{len(CONFIGS) * (len(CONVS) + len(GEMMS))} layers, "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
