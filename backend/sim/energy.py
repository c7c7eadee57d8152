"""Energy = access and operation counts x the accelerator's energy table (pJ).

Levels: mac (the PEs' multiply and add, plus the extra ops' integer and update arithmetic),
register (REGISTER_ACCESSES_PER_MAC per MAC done, one per operand), sram (every SRAM access,
MCACHE accesses and result copies included) and dram. Memory energies in the table are per 32-bit
word and scale with the accelerator's word size. The per-operand breakdown covers data movement
(register, SRAM and DRAM of ifmap, filter and ofmap); MAC arithmetic and extra ops belong to no
operand, so it sums to the total minus those.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from backend.sim.extensions import ExtraOpCounts
from backend.sim.results import OPERANDS

REGISTER_ACCESSES_PER_MAC = 3


@dataclass(frozen=True)
class EnergyColumns:
    by_level: dict[str, np.ndarray]
    by_operand: dict[str, np.ndarray]

    def as_columns(self) -> dict[str, np.ndarray]:
        parts = {**self.by_level, **self.by_operand}
        return {f"energy_{name}_pj": values for name, values in parts.items()}


def energy_columns(
    cfg: Mapping[str, np.ndarray],
    macs_done: np.ndarray,
    sram_reads: dict[str, np.ndarray],
    sram_writes: dict[str, np.ndarray],
    dram_reads: dict[str, np.ndarray],
    dram_writes: dict[str, np.ndarray],
    extra: ExtraOpCounts,
    has_mcache: np.ndarray,
) -> EnergyColumns:
    """`cfg`: the accelerators' fields as (P, 1) columns (backend.sim.simulate.ConfigColumns)."""

    def table(attr: str) -> np.ndarray:
        return cfg[f"energy.{attr}"]

    word_scale = cfg["word_bytes"] / 4
    mac = table("mac_mult") + table("mac_add")
    register, sram, dram = table("register_file"), table("sram") * word_scale, table("dram")
    dram = dram * word_scale

    mcache = np.where(has_mcache, extra.mcache_accesses.reshape(1, -1), 0.0)
    copies = extra.sram_copy_words.reshape(1, -1)
    by_operand = {
        o: macs_done * register
        + (sram_reads[o] + sram_writes[o]) * sram
        + (dram_reads[o] + dram_writes[o]) * dram
        for o in OPERANDS
    }
    by_level = {
        "mac": macs_done * mac
        + extra.weight_updates.reshape(1, -1) * mac
        + extra.int_ops.reshape(1, -1) * table("int_add"),
        "register": REGISTER_ACCESSES_PER_MAC * macs_done * register,
        "sram": sum(sram_reads[o] + sram_writes[o] for o in OPERANDS) * sram
        + (mcache + 2 * copies) * sram,
        "dram": sum(dram_reads[o] + dram_writes[o] for o in OPERANDS) * dram,
    }
    shape = macs_done.shape
    return EnergyColumns(
        by_level={k: np.broadcast_to(v, shape) for k, v in by_level.items()},
        by_operand={k: np.broadcast_to(v, shape) for k, v in by_operand.items()},
    )
