"""What the technique hardware extensions and the work outside the GEMMs cost, and how much of it
the array's time hides.

The workload says what the techniques did; the accelerator says whether it has the hardware:

- MERCURY needs an MCACHE. Without one (`mcache.enabled` false) nothing is reused: reused rows
  and folded k are computed densely and no lookups happen. With one, each execution performs
  `extra_ops["mcache_lookups"]` lookups on `lookups_per_cycle` ports (0: one per PE row, each row
  looking up the vector it computes next): ceil(lookups / ports) busy cycles, plus
  `lookup_latency` cycles before the first answer.
- MERCURY's signature projection (a GEMM with `runs_on == "projection"`) reads the FWD input as it
  streams into the array, so it costs no DRAM reads of its input. Without a projection unit
  (`projection_macs_per_cycle` 0) it runs on the array and its cycles add to the array's; with one
  it takes ceil(MACs / projection_macs_per_cycle) cycles beside the array.
- ADA-GP's predictor GEMMs (`runs_on == "predictor"`) run on the gradient predictor unit at
  `macs_per_cycle` when the accelerator has one (ceil(MACs / macs_per_cycle) cycles, operands and
  results in on-chip SRAM, no DRAM traffic); otherwise they run on the array like any GEMM.
- Zero-skipping needs `zero_skipping.enabled`; without it sparse GEMMs run (and cost) dense.
- Every other extra op (signature compares, pruning reductions, comparators, random numbers,
  result copies, MERCURY's folded adds, weight updates) runs on one unit per array column:
  ceil(ops / cols) busy cycles.

How much is exposed (`extension_overlap`):
- "overlapped" (default): the MCACHE looks up the next vectors while the array computes, and the
  column units process outputs (e.g. SparseTrain's pruning of a gradient) as they leave the array,
  so per execution only lookup_latency + max(0, lookup cycles - array cycles) of the MCACHE and
  1 + max(0, column-unit cycles - array cycles) of the column units are exposed (the 1: the last
  output leaves the array before its unit handles it), the two units running side by side. Weight
  updates need the finished gradient and stay exposed. A projection unit overlaps the FWD GEMM it
  is fed by: 1 + max(0, projection cycles - that GEMM's array cycles). The predictor unit's GEMMs
  are their own steps (the prediction is needed before the update) and are exposed in full.
- "serial": everything above runs after the array: all busy cycles and latencies are exposed.
Overlap never exposes more than serial (when the array has nothing to hide it behind, e.g. a GEMM
whose array time is 0, the serial figure is taken).

Energy per extra op, from the accelerator's table: mcache_lookups and mcache_writes one SRAM
access; result_copies (words) an SRAM read and write; weight_updates a multiply and an add;
int_adds, compares, random_numbers and any other key one integer add.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

MCACHE_KEYS = ("mcache_lookups", "mcache_writes")


@dataclass(frozen=True)
class ExtraOpCounts:
    """Per-execution extra-op counts of each GEMM, grouped by how they are costed."""

    mcache_lookups: np.ndarray
    mcache_accesses: np.ndarray  # lookups + writes
    sram_copy_words: np.ndarray  # result copies: one SRAM read and one write each
    weight_updates: np.ndarray
    alu_ops: np.ndarray  # everything but MCACHE accesses, on the column ALUs
    int_ops: np.ndarray  # costed as one integer add each


def count_extra_ops(extra_ops: list[Mapping[str, float]]) -> ExtraOpCounts:
    rows = np.zeros((len(extra_ops), 6))
    for i, ops in enumerate(extra_ops):
        for key, count in ops.items():
            if key == "mcache_lookups":
                rows[i, 0] += count
                rows[i, 1] += count
            elif key == "mcache_writes":
                rows[i, 1] += count
            elif key == "result_copies":
                rows[i, 2] += count
                rows[i, 4] += count
            elif key == "weight_updates":
                rows[i, 3] += count
                rows[i, 4] += count
            else:
                rows[i, 4] += count
                rows[i, 5] += count
    return ExtraOpCounts(*(rows[:, j] for j in range(6)))


@dataclass(frozen=True)
class UnitCycles:
    """Per-execution busy cycles and fill latency of the units beside the array."""

    lookups: np.ndarray
    lookup_latency: np.ndarray
    column_units: np.ndarray  # overlappable column-unit work
    weight_updates: np.ndarray  # column-unit work that waits for the finished GEMM
    own_unit: np.ndarray  # GEMMs on the predictor or projection unit
    own_unit_overlaps: np.ndarray  # bool: on a projection unit, beside the GEMM that feeds it

    @property
    def busy(self) -> np.ndarray:
        """Every cycle of extension work, as if none of it were hidden (the serial cost)."""
        return (
            self.lookups
            + self.lookup_latency
            + self.column_units
            + self.weight_updates
            + self.own_unit
        )

    def exposed(
        self, array_cycles: np.ndarray, feeder_cycles: np.ndarray, overlapped: np.ndarray
    ) -> np.ndarray:
        """Cycles the array's time does not hide. `array_cycles`: this GEMM's own array time per
        execution; `feeder_cycles`: the array time of the GEMM feeding a projection unit."""
        mcache = np.where(self.lookups > 0, self.lookup_latency, 0.0)
        columns = np.where(self.column_units > 0, 1.0, 0.0)
        beside = np.maximum(0.0, np.maximum(self.lookups, self.column_units) - array_cycles)
        unit = np.where(
            self.own_unit_overlaps & (self.own_unit > 0),
            1.0 + np.maximum(0.0, self.own_unit - feeder_cycles),
            self.own_unit,
        )
        hidden = mcache + columns + beside + self.weight_updates + unit
        return np.where(overlapped, np.minimum(hidden, self.busy), self.busy)


def mcache_lookup_cycles(
    lookups: np.ndarray, has_mcache: np.ndarray, lookups_per_cycle: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    ports = np.where(lookups_per_cycle == 0, rows, lookups_per_cycle)
    return np.where(has_mcache & (lookups > 0), np.ceil(lookups / ports), 0.0)


def column_unit_cycles(ops: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return np.ceil(ops / cols)
