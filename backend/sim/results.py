"""Simulation results: one row per GEMM of the workload, and totals over the whole training.

The simulator computes every figure as a column (one numpy array over the workload's GEMMs);
`SimulationResult.layers` turns the columns into LayerPassResult rows on first use, so sweeps over
many accelerators pay for objects only when somebody reads them. All figures of a row are over the
whole training: the GEMM's per-execution cost times its executions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, make_dataclass
from functools import cached_property
from typing import Any

import numpy as np

from backend.specs.figures import LAYER_MEASURES

OPERANDS = ("ifmap", "filter", "ofmap")
ENERGY_LEVELS = ("mac", "register", "sram", "dram")

# Every layer-pass measure (backend/specs/figures.py) is a column of the same name, and a
# field of each row and of the totals; its run total is the sum or the largest of its rows, or
# derived from other totals (`DERIVED_TOTALS`). Beside them, the simulator's own columns: the
# cycle and MAC parts the measures are made of, and the traffic and energy by operand and level,
# each summed into the totals.
OWN_COLUMNS = (
    "array_cycles",
    "exposed_extension_cycles",
    "extension_cycles",
    "array_macs",
    "mapped_pe_cycles",
    *(f"{kind}_{o}" for kind in ("sram_reads", "sram_writes", "dram_reads", "dram_writes")
      for o in OPERANDS),
    *(f"energy_{name}_pj" for name in (*ENERGY_LEVELS, *OPERANDS)),
)  # fmt: skip
COLUMNS = (*(m.key for m in LAYER_MEASURES), *OWN_COLUMNS)
SUMMED_COLUMNS = (*(m.key for m in LAYER_MEASURES if m.total == "sum"), *OWN_COLUMNS)
LARGEST_COLUMNS = tuple(m.key for m in LAYER_MEASURES if m.total == "max")

# The run total of each layer-pass measure declared total="derived", from the other totals and
# the array's PEs.
DERIVED_TOTALS: dict[str, Callable[[dict[str, float], int], float]] = {
    "energy_pj": lambda t, pes: sum(t[f"energy_{level}_pj"] for level in ENERGY_LEVELS),
    "utilization": lambda t, pes: (
        t["array_macs"] / (pes * t["total_cycles"]) if t["total_cycles"] else 0.0
    ),
    "mapping_efficiency": lambda t, pes: (
        t["mapped_pe_cycles"] / t["array_cycles"] if t["array_cycles"] else 0.0
    ),
}
assert set(DERIVED_TOTALS) == {m.key for m in LAYER_MEASURES if m.total == "derived"}

# One float field per layer-pass measure, in their declared order.
_MeasureFields = make_dataclass("_MeasureFields", [(m.key, float) for m in LAYER_MEASURES])


@dataclass
class Figures(_MeasureFields):
    array_cycles: float  # the PE array busy with this GEMM (0 on the predictor/projection unit)
    exposed_extension_cycles: float  # extension cycles the array's time does not hide
    extension_cycles: float  # extension units' busy cycles, hidden or not (the serial cost)
    sram_reads: float
    sram_writes: float
    sram_reads_by_operand: dict[str, float]
    sram_writes_by_operand: dict[str, float]
    dram_reads: float
    dram_writes: float
    dram_reads_by_operand: dict[str, float]
    dram_writes_by_operand: dict[str, float]
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
        columns = self.columns
        totals = {name: float(columns[name].sum()) for name in SUMMED_COLUMNS}
        totals |= {name: float(columns[name].max(initial=0.0)) for name in LARGEST_COLUMNS}
        totals |= {name: total(totals, self.pes) for name, total in DERIVED_TOTALS.items()}
        seconds = totals["total_cycles"] / (self.clock_mhz * 1e6)
        return TrainingTotals(
            seconds=seconds,
            seconds_per_step=seconds / self.iterations if self.iterations else 0.0,
            **_figures(totals),
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
    return {
        **{m.key: c[m.key] for m in LAYER_MEASURES},
        "array_cycles": c["array_cycles"],
        "exposed_extension_cycles": c["exposed_extension_cycles"],
        "extension_cycles": c["extension_cycles"],
        "sram_reads": sum(sram_reads.values()),
        "sram_writes": sum(sram_writes.values()),
        "sram_reads_by_operand": sram_reads,
        "sram_writes_by_operand": sram_writes,
        "dram_reads": sum(dram_reads.values()),
        "dram_writes": sum(dram_writes.values()),
        "dram_reads_by_operand": dram_reads,
        "dram_writes_by_operand": dram_writes,
        "energy_by_level": {lv: c[f"energy_{lv}_pj"] for lv in ENERGY_LEVELS},
        "energy_by_operand": {o: c[f"energy_{o}_pj"] for o in OPERANDS},
    }
