"""Simulation results: one row per GEMM of the workload, and totals over the whole training.

The simulator computes every figure as a column (one numpy array over the workload's GEMMs);
`SimulationResult.layers` turns the columns into LayerPassResult rows on first use, so sweeps over
many accelerators pay for objects only when somebody reads them. All figures of a row are over the
whole training: the GEMM's per-execution cost times its executions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

OPERANDS = ("ifmap", "filter", "ofmap")
ENERGY_LEVELS = ("mac", "register", "sram", "dram")

# MAC counts and cycles: per GEMM, and summed into the totals. Cycles add up per row:
# total = array + exposed extension + stall; compute = array + exposed extension.
MAC_AND_CYCLE_COLUMNS = (
    "macs_algorithmic",
    "macs_actual",
    "macs_skipped",
    "macs_overhead",
    "array_cycles",
    "exposed_extension_cycles",
    "compute_cycles",
    "extension_cycles",
    "stall_cycles",
    "total_cycles",
)
# Per-GEMM columns summed into the totals.
SUMMED_COLUMNS = (
    *MAC_AND_CYCLE_COLUMNS,
    *(f"sram_reads_{o}" for o in OPERANDS),
    *(f"sram_writes_{o}" for o in OPERANDS),
    *(f"dram_reads_{o}" for o in OPERANDS),
    *(f"dram_writes_{o}" for o in OPERANDS),
    "dram_bytes",
    *(f"energy_{lv}_pj" for lv in ENERGY_LEVELS),
    *(f"energy_{o}_pj" for o in OPERANDS),
    "array_macs",
    "mapped_pe_cycles",
)


@dataclass
class Figures:
    macs_algorithmic: float
    macs_actual: float
    macs_skipped: float
    macs_overhead: float
    array_cycles: float  # the PE array busy with this GEMM (0 on the predictor/projection unit)
    exposed_extension_cycles: float  # extension cycles the array's time does not hide
    compute_cycles: float  # array_cycles + exposed_extension_cycles: everything but stalls
    extension_cycles: float  # extension units' busy cycles, hidden or not (the serial cost)
    stall_cycles: float  # waiting for DRAM
    total_cycles: float  # array_cycles + exposed_extension_cycles + stall_cycles
    utilization: float  # MACs done on the array / (PEs x total cycles)
    mapping_efficiency: float  # SCALE-Sim's mean fraction of PEs holding work per fold
    sram_reads: float
    sram_writes: float
    sram_reads_by_operand: dict[str, float]
    sram_writes_by_operand: dict[str, float]
    dram_reads: float
    dram_writes: float
    dram_reads_by_operand: dict[str, float]
    dram_writes_by_operand: dict[str, float]
    dram_bytes: float
    energy_pj: float
    energy_by_level: dict[str, float]  # mac, register, sram, dram
    energy_by_operand: dict[str, float]  # data movement only: register, SRAM and DRAM per operand


@dataclass
class LayerPassResult(Figures):
    layer: str
    pass_: str
    role: str
    executions: int


@dataclass
class TrainingTotals(Figures):
    seconds: float  # total_cycles / clock: the whole training on the accelerator
    seconds_per_step: float  # seconds / iterations: one training step (mini-batch)

    @property
    def stall_share(self) -> float:
        """The share of the training's cycles the array waits for DRAM (0 with no cycles)."""
        return self.stall_cycles / self.total_cycles if self.total_cycles else 0.0


@dataclass
class SimulationResult:
    accelerator: str
    model: str
    technique: str
    iterations: int
    clock_mhz: float
    pes: int
    labels: list[tuple[str, str, str, int]]  # (layer, pass, role, executions) per GEMM
    columns: dict[str, np.ndarray] = field(repr=False)
    extensions: tuple[str, ...] = ()  # the accelerator's extensions that were switched on
    # How convolution operands crossed the DRAM interface ("im2col" or "tensor"), and what the
    # run needs to say about it (e.g. layers that kept the im2col convention under "tensor").
    conv_operand_traffic: str = "im2col"
    notes: list[str] = field(default_factory=list)

    @cached_property
    def layers(self) -> list[LayerPassResult]:
        names = list(self.columns)
        columns = [values.tolist() for values in self.columns.values()]
        return [
            LayerPassResult(
                layer=layer,
                pass_=pass_,
                role=role,
                executions=executions,
                **_figures(dict(zip(names, values, strict=True))),
            )
            for (layer, pass_, role, executions), values in zip(
                self.labels, zip(*columns, strict=True), strict=True
            )
        ]

    @cached_property
    def totals(self) -> TrainingTotals:
        summed = {name: float(self.columns[name].sum()) for name in SUMMED_COLUMNS}
        cycles = summed["total_cycles"]
        summed["utilization"] = summed["array_macs"] / (self.pes * cycles) if cycles else 0.0
        summed["mapping_efficiency"] = (
            summed["mapped_pe_cycles"] / summed["array_cycles"] if summed["array_cycles"] else 0.0
        )
        seconds = cycles / (self.clock_mhz * 1e6)
        return TrainingTotals(
            seconds=seconds,
            seconds_per_step=seconds / self.iterations if self.iterations else 0.0,
            **_figures(summed),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator,
            "model": self.model,
            "technique": self.technique,
            "iterations": self.iterations,
            "extensions": list(self.extensions),
            "conv_operand_traffic": self.conv_operand_traffic,
            "notes": list(self.notes),
            "layers": [asdict(row) for row in self.layers],
            "totals": asdict(self.totals),
        }


def _figures(c: dict[str, float]) -> dict[str, Any]:
    """Row figures from column values (Python floats), grouping the per-operand columns."""
    sram_reads = {o: c[f"sram_reads_{o}"] for o in OPERANDS}
    sram_writes = {o: c[f"sram_writes_{o}"] for o in OPERANDS}
    dram_reads = {o: c[f"dram_reads_{o}"] for o in OPERANDS}
    dram_writes = {o: c[f"dram_writes_{o}"] for o in OPERANDS}
    by_level = {lv: c[f"energy_{lv}_pj"] for lv in ENERGY_LEVELS}
    return {
        **{name: c[name] for name in _SCALAR_FIGURES},
        "sram_reads": sum(sram_reads.values()),
        "sram_writes": sum(sram_writes.values()),
        "sram_reads_by_operand": sram_reads,
        "sram_writes_by_operand": sram_writes,
        "dram_reads": sum(dram_reads.values()),
        "dram_writes": sum(dram_writes.values()),
        "dram_reads_by_operand": dram_reads,
        "dram_writes_by_operand": dram_writes,
        "energy_pj": sum(by_level.values()),
        "energy_by_level": by_level,
        "energy_by_operand": {o: c[f"energy_{o}_pj"] for o in OPERANDS},
    }


_SCALAR_FIGURES = (
    *MAC_AND_CYCLE_COLUMNS,
    "utilization",
    "mapping_efficiency",
    "dram_bytes",
)
