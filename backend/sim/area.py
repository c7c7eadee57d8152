"""Area of an accelerator (mm², 45 nm): a sum over its components, each from its area table.

The process node is 45 nm, the node of the energy table (Horowitz, ISSCC 2014). The per-component
figures are the accelerator's `area` table (backend/specs/accelerator.py: AreaTable), whose
docstring gives each default's source; a user may edit them per accelerator, as the energy table.
The accelerator fields the model reads are those declared with `area` (Hardware), AREA_FIELDS: a
field declared so reaches `area()` and a design search's batched area alike.

Sourced (through the table): the multiplier and adder areas by precision, the register bit, the
comparator and the SRAM area per KiB. Everything below that says how they are combined is
assumed here (no source; the papers' hardware descriptions were not available):

- MAC by precision: a MAC is one multiplier and one adder of the accelerator's word
  (`word_bytes`): FP32 for 4-byte words, FP16 for 2-byte words (Horowitz's figures); other sizes
  scale the FP32 figures, the multiplier by (bits/32)^2 and the adder by bits/32 (Horowitz's FP16
  figures are 0.85x and 0.65x of what this scaling gives: it is a rough guess off 16 and 32 bits).
- PE: one MAC and REGISTERS_PER_PE word registers (two operands and the partial sum: the three
  register accesses per MAC of the energy model).
- Column units: one per array column (the simulator's unit for weight updates, pruning and
  compares, backend.sim.extensions): a MAC and a comparator of the word's width.
- Edge FIFOs: `edge_fifo_words` word registers at each array row's and column's edge.
- SRAM: ifmap + filter + ofmap KiB x the area per KiB.
- Interconnect and control: `interconnect_fraction` x the sum of every other component,
  extensions included.
- Zero-skipping (when on): per PE a sparse index unit (an index register and an index comparator
  of `storage.index_bits`); per array column a compression unit (a zero detector, i.e. a
  comparator of the word's width, an index counter, i.e. an index-wide comparator's area, and an
  index register); per array row a decompression unit of the same size.
- MCACHE (when on): its entries as SRAM bits, each entry a tag of the longest signature the
  training may grow to (MercuryParams.max_bits, the signature kept whole), a valid bit, LRU bits
  (ceil(log2 ways)) and a result field of one word (assumed: the entry holds a result word; the
  simulator copies a hit's output row through the SRAM, `result_copies`); per lookup port
  (`lookups_per_cycle`, 0: one per PE row) one tag comparator per way. The geometry (entries,
  ways, signature bits) is the training's: `McacheSize`, from the run's MERCURY parameters. The
  'unbounded' cache model is a training-side idealisation; its hardware is costed at
  `cache_entries` like the others.
- Signature projection unit (when the MCACHE is on and `projection_macs_per_cycle` > 0): that
  many MACs; the random hyperplanes are assumed generated on the fly (no storage counted).
- Gradient predictor unit (when on): `macs_per_cycle` PEs (a MAC and its registers each); its
  operands live in the accelerator's SRAMs (as the simulator assumes), so no SRAM of its own.

Not counted: DRAM and its PHY, pads, clock tree, leakage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeAlias

import numpy as np

from backend.specs.accelerator import ACCELERATOR_FIELDS, AcceleratorConfig, AreaTable, hardware

REGISTERS_PER_PE = 3
UM2_PER_MM2 = 1e6


@dataclass(frozen=True)
class McacheSize:
    """The MCACHE's geometry: entries, ways and signature width. A run's comes from its MERCURY
    parameters (backend/techniques/mercury/hardware.py); the defaults are a default MERCURY's."""

    entries: int = 1024
    ways: int = 4
    signature_bits: int = 32
    direct: bool = False  # the 'direct' model: one way whatever `ways` says

    @property
    def associativity(self) -> int:
        return 1 if self.direct else self.ways


@dataclass(frozen=True)
class AreaBreakdown:
    """Each component's area in µm² (0 for an extension that is off)."""

    components: dict[str, float]

    @property
    def total_um2(self) -> float:
        return sum(self.components.values())

    @property
    def area_mm2(self) -> float:
        return self.total_um2 / UM2_PER_MM2


def mac_um2(table: AreaTable, word_bytes: int) -> float:
    """One multiplier and one adder of the accelerator's word."""
    bits = 8 * word_bytes
    if bits == 32:
        return table.fp32_mult + table.fp32_add
    if bits == 16:
        return table.fp16_mult + table.fp16_add
    return table.fp32_mult * (bits / 32) ** 2 + table.fp32_add * (bits / 32)


def comparator_um2(table: AreaTable, bits: int) -> float:
    """A comparator of this width (area linear in width, as Aladdin's table scales it)."""
    return table.comparator_32 * bits / 32


def pe_um2(table: AreaTable, word_bytes: int) -> float:
    """One PE: a MAC and its word registers."""
    return mac_um2(table, word_bytes) + REGISTERS_PER_PE * 8 * word_bytes * table.register_bit


# The accelerator fields the area model reads: those AcceleratorConfig declares with `area`
# (Hardware), by dotted path. Its per-component figures are the accelerator's area table.
AREA_FIELDS: tuple[str, ...] = tuple(path for path in ACCELERATOR_FIELDS if hardware(path).area)
_AREA_VALUES = attrgetter(*AREA_FIELDS)  # a config's values of them all, in one call

# The values of AREA_FIELDS, by dotted path. Each number is a scalar or, for many designs at
# once, a numpy array (backend.sim.design_search): the arithmetic is the same.
AreaFields: TypeAlias = dict[str, Any]


def area_fields(accel: AcceleratorConfig, designs: Mapping[str, Any] | None = None) -> AreaFields:
    """`accel`'s AreaFields, but those `designs` holds (dotted path -> array of the designs')."""
    fields = dict(zip(AREA_FIELDS, _AREA_VALUES(accel), strict=True))
    for path, values in (designs or {}).items():
        if path in fields:
            fields[path] = values
    return fields


def mcache_um2(table: AreaTable, f: AreaFields, size: McacheSize) -> tuple[Any, Any]:
    """(entries as SRAM, tag comparators) of the MCACHE, in µm²."""
    ways = size.associativity
    lru_bits = math.ceil(math.log2(ways)) if ways > 1 else 0
    entry_bits = size.signature_bits + 1 + lru_bits + 8 * f["word_bytes"]
    sram = size.entries * entry_bits * table.sram_kib / (8 * 1024)
    lookup_ports = f["mcache.lookups_per_cycle"]
    ports = np.where(lookup_ports == 0, f["rows"], lookup_ports)
    comparators = ports * ways * comparator_um2(table, size.signature_bits)
    return sram, comparators


def area_components(table: AreaTable, f: AreaFields, mcache: McacheSize) -> dict[str, Any]:
    """Each component's area in µm², scalars or arrays as `f`'s numbers are."""
    word_bytes, rows, cols = f["word_bytes"], f["rows"], f["cols"]
    word_bits = 8 * word_bytes
    pes = rows * cols
    sram_kib = f["ifmap_sram_kib"] + f["filter_sram_kib"] + f["ofmap_sram_kib"]
    components = {
        "pe_array": pes * pe_um2(table, word_bytes),
        "column_units": cols * (mac_um2(table, word_bytes) + comparator_um2(table, word_bits)),
        "edge_fifos": (rows + cols) * table.edge_fifo_words * word_bits * table.register_bit,
        "sram": sram_kib * table.sram_kib,
        "zero_skipping": 0.0,
        "mcache_sram": 0.0,
        "mcache_comparators": 0.0,
        "projection_unit": 0.0,
        "gradient_predictor": 0.0,
    }
    if f["zero_skipping.enabled"]:
        index_bits = f["storage.index_bits"]
        index_unit = index_bits * table.register_bit + comparator_um2(table, index_bits)
        codec = comparator_um2(table, word_bits) + index_unit
        components["zero_skipping"] = pes * index_unit + (rows + cols) * codec
    if f["mcache.enabled"]:
        sram, comparators = mcache_um2(table, f, mcache)
        components["mcache_sram"] = sram
        components["mcache_comparators"] = comparators
        components["projection_unit"] = f["mcache.projection_macs_per_cycle"] * mac_um2(
            table, word_bytes
        )
    if f["gradient_predictor.enabled"]:
        components["gradient_predictor"] = f["gradient_predictor.macs_per_cycle"] * pe_um2(
            table, word_bytes
        )
    components["interconnect"] = table.interconnect_fraction * sum(components.values())
    return components


def area(accel: AcceleratorConfig, mcache: McacheSize | None = None) -> AreaBreakdown:
    """The accelerator's area by component; `mcache`: the MCACHE geometry the run's training
    uses (`McacheSize()` when None)."""
    components = area_components(accel.area, area_fields(accel), mcache or McacheSize())
    return AreaBreakdown({name: float(value) for name, value in components.items()})
