"""What the technique hardware extensions and the work outside the GEMMs cost.

The workload says what the techniques did; the accelerator says whether it has the hardware:

- MERCURY needs an MCACHE. Without one (`mercury.enabled` false) nothing is reused: reused rows
  and folded k are computed densely and no lookups happen. With one, each execution performs
  `extra_ops["mcache_lookups"]` lookups, serialised with the layer's GEMM (a vector must be looked
  up before the array knows whether to compute it): ceil(lookups / lookups_per_cycle) cycles plus
  `lookup_latency` to fill the lookup pipeline.
- ADA-GP's predictor GEMMs (`runs_on == "predictor"`) run on the gradient predictor unit at
  `macs_per_cycle` when the accelerator has one (ceil(MACs / macs_per_cycle) cycles, operands and
  results in on-chip SRAM, no DRAM traffic); otherwise they run on the array like any GEMM.
- Zero-skipping needs `zero_skipping.enabled`; without it sparse GEMMs run (and cost) dense.
- Every other extra op (signature bits, pruning reductions, comparators, random numbers, result
  copies, weight updates) runs on one ALU per array column: ceil(ops / cols) cycles, serialised.

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


def mcache_cycles(
    lookups: np.ndarray, has_mcache: np.ndarray, lookups_per_cycle: np.ndarray, latency: np.ndarray
) -> np.ndarray:
    return np.where(has_mcache & (lookups > 0), np.ceil(lookups / lookups_per_cycle) + latency, 0.0)


def alu_cycles(alu_ops: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return np.ceil(alu_ops / cols)
