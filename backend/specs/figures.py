"""The figures a run is judged by, declared once: the run's and each layer-pass's measures
(`Measure`, each stored as a column of its own), and the figures a training measures in every
epoch (`Figure`, stored together as JSON).

Epoch figures are of two kinds: those the training engine measures for every training whatever
its techniques (the operand densities its recorder samples: natural ReLU sparsity is there
without any technique), declared here, and those a technique measures, declared in its folder
(`TechniqueEntry.figures`). An epoch stores them all in one JSON object (`epoch_metrics.figures`,
and per layer in `per_layer`); the API, the charts and the paper check list them from
`EPOCH_FIGURES` (backend/specs/techniques.py).

Adding a measure is its declaration below, the line of the simulator (or of the area model,
backend/sim/area.py) that computes it, and a migration adding its column; adding an epoch figure
is its declaration and the code that measures it.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.techniques.entry import Figure

TRAINING_FIGURES: tuple[Figure, ...] = (
    Figure(
        "density_fwd",
        "FWD density",
        "non-zero fraction of the conv/linear layers' inputs (sampled batches)",
    ),
    Figure(
        "density_bwd",
        "BWD density",
        "non-zero fraction of the gradients arriving at the conv/linear layers' outputs, after "
        "any pruning (sampled batches)",
    ),
)


@dataclass(frozen=True)
class Measure:
    """A number a run (or one layer-pass of it) is judged by, stored as a column of its own so
    it can be filtered, sorted and indexed. The ORM columns, the API models, the export, the
    run table's sort keys and the chart data are built from these declarations."""

    key: str
    kind: type[int] | type[float]
    unit: str  # "" for a ratio or a fraction
    description: str
    # How people read it, where the unit does not say (backend/numbers.py): "×" a ratio, "%" a
    # fraction in per cent.
    shown_as: str = ""

    @property
    def display_unit(self) -> str:
        """The unit the number formatter writes it in."""
        return self.shown_as or self.unit

    def of(self, source: object) -> int | float:
        """The value `source` (a simulator result) holds under this key, as stored."""
        value = getattr(source, self.key)
        return round(value) if self.kind is int else float(value)


# What the simulator gives for each layer-pass and, summed, for a whole training.
SIMULATED: tuple[Measure, ...] = (
    Measure("total_cycles", int, "cycles", "array + exposed extension + stall cycles"),
    Measure("compute_cycles", int, "cycles", "array + exposed extension cycles"),
    Measure("stall_cycles", int, "cycles", "cycles the array waits for DRAM"),
    Measure("energy_pj", float, "pJ", "energy of the MACs, SRAM, DRAM and extensions"),
    Measure("macs_algorithmic", int, "MACs", "MACs of the dense training"),
    Measure("macs_actual", int, "MACs", "MACs the array performed"),
    Measure("macs_skipped", int, "MACs", "MACs the techniques skipped"),
    Measure("macs_overhead", int, "MACs", "MACs the techniques added (their own GEMMs)"),
    Measure("dram_bytes", int, "bytes", "bytes read from and written to DRAM"),
)
# What only a layer-pass has.
LAYER_ONLY: tuple[Measure, ...] = (
    Measure("utilization", float, "", "MACs performed / (PEs x array cycles)", "%"),
    Measure("mapping_efficiency", float, "", "share of the PEs the GEMM's tiles occupy", "%"),
)
LAYER_MEASURES: tuple[Measure, ...] = SIMULATED + LAYER_ONLY
# What only the whole training has: its time on the accelerator (the simulator's totals).
TRAINING_ONLY: tuple[Measure, ...] = (
    Measure("seconds", float, "s", "total cycles / clock: the whole training's time"),
    Measure("seconds_per_step", float, "s", "seconds / training steps (mini-batches)"),
    Measure(
        "stall_share",
        float,
        "",
        "stall cycles / total cycles: the share spent waiting on DRAM",
        "%",
    ),
)
# What the accelerator is, as the run's training sized it (backend/sim/area.py).
HARDWARE: tuple[Measure, ...] = (
    Measure("area_mm2", float, "mm²", "accelerator area at 45 nm, the run's extensions included"),
)
# A technique run against the best dense designs of no more area (backend/sim/iso_area.py), on
# its baseline's training; None for a baseline, and until that training is stored.
ISO_AREA: tuple[Measure, ...] = (
    Measure(
        "iso_area_speedup",
        float,
        "",
        "time of the fastest dense design of equal or smaller area (its baseline's training) / "
        "run time",
        "×",
    ),
    Measure(
        "iso_area_energy_ratio",
        float,
        "",
        "run energy / energy of the lowest-energy dense design of equal or smaller area",
        "×",
    ),
)
# A run's: its training's outcome, the simulated totals, and the comparison with its baseline.
RUN_MEASURES: tuple[Measure, ...] = (
    Measure("accuracy", float, "", "test accuracy after the last epoch (0-1)", "%"),
    Measure("loss", float, "", "test loss after the last epoch"),
    *SIMULATED,
    *TRAINING_ONLY,
    *HARDWARE,
    Measure("speedup", float, "", "baseline cycles / run cycles (1 for a baseline)", "×"),
    Measure("energy_ratio", float, "", "run energy / baseline energy (1 for a baseline)", "×"),
    *ISO_AREA,
)
# A design of a hardware search, on one technique's stored workload (backend/sim/design_search.py),
# in the order of its objectives (backend.specs.design_search.FIGURES: time, energy, area).
DESIGN_MEASURES: tuple[Measure, ...] = (
    Measure("time_s", float, "s", "the whole training's time on the design (cycles / clock)"),
    Measure("energy_j", float, "J", "the whole training's energy on the design"),
    Measure("area_mm2", float, "mm²", "the design's area at 45 nm, its technique's extensions on"),
)
