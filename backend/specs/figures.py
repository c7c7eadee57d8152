"""The figures a run is judged by, declared once: the run's and each layer-pass's measures
(`Measure`, each stored as a column of its own), and the figures a training measures in every
epoch (`Figure`, stored together as JSON).

Epoch figures are of two kinds: those the training engine measures for every training whatever
its techniques (the operand densities its recorder samples: natural ReLU sparsity is there
without any technique), declared here, and those a technique measures, declared in its folder
(`TechniqueEntry.figures`). An epoch stores them all in one JSON object (`epoch_metrics.figures`,
and per layer in `per_layer`); the API, the charts and the paper check list them from
`EPOCH_FIGURES` (backend/specs/techniques.py).

Adding a measure is its declaration below, the model that computes it (the simulator's, or the
area model, backend/sim/area.py), the simulator phase that emits its column, a migration adding
its column and its test: README.md, "Adding a figure", walks through it. Adding an epoch figure
is its declaration and the code that measures it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


Total = Literal["sum", "max", "derived"]

# Words of a key written otherwise for people ("dram_bytes" -> "DRAM"); None: left out (a unit).
_WORDS: dict[str, str | None] = {
    "pj": None, "bytes": None, "mm2": None, "macs": "MACs", "dram": "DRAM", "sram": "SRAM",
}  # fmt: skip


def _label(key: str) -> str:
    """A key for people: 'dram_bytes' -> 'DRAM', 'macs_actual' -> 'MACs actual'."""
    parts = [_WORDS.get(p, p) for p in key.split("_")]
    text = " ".join(p for p in parts if p)
    return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class Measure:
    """A number a run (or one layer-pass of it) is judged by. A stored measure is a column of
    its own so it can be filtered, sorted and indexed; a derived one (`stored=False`) is computed
    from a run's stored measures (and its baseline's) by the API's SQL (backend/api/run_columns.py).
    The ORM columns, the API models, the export, the run table's columns, the group summaries,
    the chart data, the simulator's figure columns, the CLI tables and the dashboard's pages
    (which read GET /api/v1/figures) are built from these declarations."""

    key: str
    kind: type[int] | type[float]
    unit: str  # "" for a ratio or a fraction
    description: str
    # How people read it, where the unit does not say (backend/numbers.py): "×" a ratio, "%" a
    # fraction in per cent, "pt" a difference of fractions.
    shown_as: str = ""
    # A layer-pass measure's run total: the sum or the largest of its layer-passes' values, or
    # "derived": computed from other totals (backend/sim/results.py). A measure the simulator
    # does not give per layer-pass (accuracy, area, ...) is "derived" by whatever computes it.
    total: Total = "derived"
    # Whether the group summaries (runs over seeds, runs grouped by a column) show its mean.
    summarised: bool = False
    higher_is_better: bool = False  # which way a summary sorts it first
    stored: bool = True
    label: str = ""  # its name for people; left empty, made from the key (`_label`)

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", _label(self.key))

    @property
    def display_unit(self) -> str:
        """The unit the number formatter writes it in."""
        return self.shown_as or self.unit

    def of(self, source: object) -> int | float:
        """The value `source` (a simulator result) holds under this key, as stored."""
        value = getattr(source, self.key)
        return round(value) if self.kind is int else float(value)


# What the simulator gives for each layer-pass and, as `total` says, for a whole training.
SIMULATED: tuple[Measure, ...] = (
    Measure(
        "total_cycles",
        int,
        "cycles",
        "array + exposed extension + stall cycles",
        total="sum",
        summarised=True,
    ),
    Measure("compute_cycles", int, "cycles", "array + exposed extension cycles", total="sum"),
    Measure("stall_cycles", int, "cycles", "cycles the array waits for DRAM", total="sum"),
    # Derived: the sum of its levels' totals (backend/sim/results.py), as a design search sums it.
    Measure(
        "energy_pj",
        float,
        "pJ",
        "energy of the MACs, SRAM, DRAM and extensions",
        summarised=True,
    ),
    Measure("macs_algorithmic", int, "MACs", "MACs of the dense training", total="sum"),
    Measure("macs_actual", int, "MACs", "MACs the array performed", total="sum"),
    Measure("macs_skipped", int, "MACs", "MACs the techniques skipped", total="sum"),
    Measure(
        "macs_overhead", int, "MACs", "MACs the techniques added (their own GEMMs)", total="sum"
    ),
    Measure(
        "dram_bytes",
        int,
        "bytes",
        "bytes read from and written to DRAM",
        total="sum",
        summarised=True,
    ),
)
# What only a layer-pass has (their training-wide values are the simulator's totals, not stored).
LAYER_ONLY: tuple[Measure, ...] = (
    Measure(
        "utilization",
        float,
        "",
        "MACs performed / (PEs x array cycles)",
        "%",
        higher_is_better=True,
        label="Utilisation",
    ),
    Measure(
        "mapping_efficiency",
        float,
        "",
        "share of the PEs the GEMM's tiles occupy",
        "%",
        higher_is_better=True,
    ),
)
LAYER_MEASURES: tuple[Measure, ...] = SIMULATED + LAYER_ONLY
# What only the whole training has: its time on the accelerator (the simulator's totals).
TRAINING_ONLY: tuple[Measure, ...] = (
    Measure(
        "seconds",
        float,
        "s",
        "total cycles / clock: the whole training's time",
        summarised=True,
        label="Time",
    ),
    Measure(
        "seconds_per_step",
        float,
        "s",
        "seconds / training steps (mini-batches)",
        summarised=True,
        label="Time a step",
    ),
    Measure(
        "stall_share",
        float,
        "",
        "stall cycles / total cycles: the share spent waiting on DRAM",
        "%",
        summarised=True,
    ),
)
# What the accelerator is, as the run's training sized it (backend/sim/area.py).
HARDWARE: tuple[Measure, ...] = (
    Measure(
        "area_mm2",
        float,
        "mm²",
        "accelerator area at 45 nm, the run's extensions included",
        summarised=True,
    ),
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
        summarised=True,
        higher_is_better=True,
        label="Iso-area speedup",
    ),
    Measure(
        "iso_area_energy_ratio",
        float,
        "",
        "run energy / energy of the lowest-energy dense design of equal or smaller area",
        "×",
        summarised=True,
        label="Iso-area energy ratio",
    ),
)
# Computed from a run's stored measures and its baseline's (backend/api/run_columns.py), not
# stored.
ACCURACY_DELTA = Measure(
    "accuracy_delta",
    float,
    "",
    "accuracy - its baseline's accuracy (same seed)",
    "pt",
    summarised=True,
    higher_is_better=True,
    stored=False,
    label="Δ accuracy",
)
BASELINE_STALL_SHARE = Measure(
    "baseline_stall_share",
    float,
    "",
    "the stall share of the run's baseline (a baseline's own)",
    "%",
    summarised=True,
    stored=False,
)
FROM_STORED: tuple[Measure, ...] = (
    Measure(
        "energy_delay",
        float,
        "pJ·s",
        "energy-delay product: energy (pJ) x time (s)",
        summarised=True,
        stored=False,
        label="EDP",
    ),
    Measure("duration", float, "s", "wall-clock time from start to finish", stored=False),
    Measure(
        "dram_words",
        float,
        "words",
        "DRAM traffic in the accelerator's words",
        stored=False,
        label="DRAM words",
    ),
)
# A run's figures: its training's outcome, the simulated totals, and the comparison with its
# baseline, in the order summaries and exports show them.
RUN_FIGURES: tuple[Measure, ...] = (
    Measure(
        "accuracy",
        float,
        "",
        "test accuracy after the last epoch (0-1)",
        "%",
        summarised=True,
        higher_is_better=True,
    ),
    ACCURACY_DELTA,
    Measure("loss", float, "", "test loss after the last epoch"),
    *SIMULATED,
    *TRAINING_ONLY,
    BASELINE_STALL_SHARE,
    *FROM_STORED,
    *HARDWARE,
    Measure(
        "speedup",
        float,
        "",
        "baseline cycles / run cycles (1 for a baseline)",
        "×",
        summarised=True,
        higher_is_better=True,
        label="Speedup, same array",
    ),
    Measure(
        "energy_ratio",
        float,
        "",
        "run energy / baseline energy (1 for a baseline)",
        "×",
        summarised=True,
        label="Energy ratio, same array",
    ),
    *ISO_AREA,
)
# The stored ones: a column each.
RUN_MEASURES: tuple[Measure, ...] = tuple(m for m in RUN_FIGURES if m.stored)
# What group summaries show, in this order.
SUMMARISED: tuple[Measure, ...] = tuple(m for m in RUN_FIGURES if m.summarised)
# A design of a hardware search, on one technique's stored workload (backend/sim/design_search.py),
# in the order of its objectives (backend.specs.design_search.FIGURES: time, energy, area).
DESIGN_MEASURES: tuple[Measure, ...] = (
    Measure("time_s", float, "s", "the whole training's time on the design (cycles / clock)"),
    Measure("energy_j", float, "J", "the whole training's energy on the design"),
    Measure("area_mm2", float, "mm²", "the design's area at 45 nm, its technique's extensions on"),
)
