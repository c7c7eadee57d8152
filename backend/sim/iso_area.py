"""Iso-area comparison: a technique's run against the best dense accelerators of no more area.

The question: would the silicon a technique's hardware takes be better spent on a larger dense
array? A run on accelerator D has area A (backend.sim.area, its extensions included). The dense
training's workload (the run's baseline's training: same training config and seed, no
technique) is simulated on a family of dense designs derived from D, and among those whose area
is at most A:
- the fastest (least training time): iso-area speedup = its seconds / the run's seconds;
- the lowest-energy: iso-area energy ratio = the run's energy / its energy.
Both sit next to the same-array ratios (speedup, energy ratio against the run's baseline).

The family (the open choices, each a constant below):
- Every design is D with every extension off and every tensor stored dense
  (`D.with_extensions(())`, what a 'dense' baseline runs on), so the same dataflow, clock, word
  size, DRAM bandwidth, convolution-operand traffic, energy table and area table (the same node).
- Array rows and columns are each scaled, independently, by SIDE_FACTORS; the three SRAMs are
  scaled together by SRAM_FACTORS (their split kept). Values are rounded half up and clamped to
  the fields' ranges (1 to 1024 PEs a side, 1 KiB to 1 GiB a buffer); a design met twice is kept
  once, at its first place in the order rows, columns, SRAM. At most 8 x 8 x 6 = 384 designs.
- The side factors are fine near 1 (0.875, 1.125) because a technique's hardware is a few per
  cent of the area: a ladder of powers of two would never find a dense design that uses it. The
  SRAM factors let PEs be traded for buffer at equal area.
- D's own dense design (factors 1, 1, 1) is in the family and never has more area than D with
  its extensions, so every run has a candidate. When the run's baseline is D's dense design
  (`baseline_hardware: dense`), the iso-area speedup is therefore at most the same-array
  speedup, and the iso-area energy ratio at least the same-array energy ratio.
- "Equal or smaller" allows a relative AREA_TOLERANCE (the same area summed another way).
- Ties: the fastest by (seconds, energy, area, family order), the lowest-energy by (energy,
  seconds, area, family order).
- Not varied: dataflow, clock, DRAM bandwidth and word size (they change the memory system or
  the node, not how the die's area is spent), other SRAM splits.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from backend.sim.area import area
from backend.sim.simulate import simulate_many
from backend.sim.workload import Workload
from backend.specs.accelerator import AcceleratorConfig

SIDE_FACTORS: tuple[float, ...] = (0.5, 0.75, 0.875, 1.0, 1.125, 1.25, 1.5, 2.0)
SRAM_FACTORS: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
AREA_TOLERANCE = 1e-9
SRAMS = ("ifmap_sram_kib", "filter_sram_kib", "ofmap_sram_kib")


def _scaled(value: int, factor: float, field: str) -> int:
    """value x factor, rounded half up, within the field's range."""
    metadata = AcceleratorConfig.model_fields[field].metadata
    low = next(m.ge for m in metadata if hasattr(m, "ge"))
    high = next(m.le for m in metadata if hasattr(m, "le"))
    return max(low, min(high, math.floor(value * factor + 0.5)))


def dense_candidates(accel: AcceleratorConfig) -> list[AcceleratorConfig]:
    """The dense family derived from `accel` (see the module's docstring), in family order."""
    dense = accel.with_extensions(())
    designs: dict[tuple[int, ...], AcceleratorConfig] = {}
    for row_factor, col_factor, sram_factor in itertools.product(
        SIDE_FACTORS, SIDE_FACTORS, SRAM_FACTORS
    ):
        fields = {
            "rows": _scaled(dense.rows, row_factor, "rows"),
            "cols": _scaled(dense.cols, col_factor, "cols"),
            **{name: _scaled(getattr(dense, name), sram_factor, name) for name in SRAMS},
        }
        key = tuple(fields.values())
        if key not in designs:
            designs[key] = dense.model_copy(update=fields)
    return list(designs.values())


@dataclass(frozen=True)
class DenseDesign:
    """One dense design of the family with what the dense training costs on it."""

    rows: int
    cols: int
    ifmap_sram_kib: int
    filter_sram_kib: int
    ofmap_sram_kib: int
    area_mm2: float
    seconds: float
    energy_pj: float


def evaluate(workload: Workload, designs: Sequence[AcceleratorConfig]) -> list[DenseDesign]:
    """Each design's area and the workload's time and energy on it (one vectorised sweep)."""
    results = simulate_many(workload, list(designs))
    return [
        DenseDesign(
            rows=design.rows,
            cols=design.cols,
            ifmap_sram_kib=design.ifmap_sram_kib,
            filter_sram_kib=design.filter_sram_kib,
            ofmap_sram_kib=design.ofmap_sram_kib,
            area_mm2=area(design).area_mm2,
            seconds=result.totals.seconds,
            energy_pj=result.totals.energy_pj,
        )
        for design, result in zip(designs, results, strict=True)
    ]


@dataclass(frozen=True)
class IsoArea:
    """The fastest and the lowest-energy dense designs within an area budget."""

    area_budget_mm2: float
    candidates: int  # designs in the family
    within_area: int  # of them, those within the budget
    fastest: DenseDesign
    lowest_energy: DenseDesign

    def speedup(self, run_seconds: float) -> float:
        """The fastest dense design's time / the run's time."""
        return self.fastest.seconds / run_seconds

    def energy_ratio(self, run_energy_pj: float) -> float:
        """The run's energy / the lowest-energy dense design's."""
        return run_energy_pj / self.lowest_energy.energy_pj

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose(designs: Sequence[DenseDesign], area_budget_mm2: float) -> IsoArea | None:
    """The fastest and the lowest-energy of `designs` (in family order) within the budget;
    None when none is."""
    limit = area_budget_mm2 * (1 + AREA_TOLERANCE)
    within = [(i, d) for i, d in enumerate(designs) if d.area_mm2 <= limit]
    if not within:
        return None
    _, fastest = min(within, key=lambda at: (at[1].seconds, at[1].energy_pj, at[1].area_mm2, at[0]))
    _, lowest = min(within, key=lambda at: (at[1].energy_pj, at[1].seconds, at[1].area_mm2, at[0]))
    return IsoArea(area_budget_mm2, len(designs), len(within), fastest, lowest)


def iso_area(
    workload: Workload, accel: AcceleratorConfig, area_budget_mm2: float
) -> IsoArea | None:
    """The iso-area choice for a run on `accel` of this area, on the dense training's workload."""
    return choose(evaluate(workload, dense_candidates(accel)), area_budget_mm2)
