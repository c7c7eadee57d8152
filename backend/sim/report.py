"""A per-layer, per-pass table of a simulation, for terminals: every layer-pass measure
(backend/specs/figures.py) and the parts its cycles are made of, with the training's totals."""

from __future__ import annotations

from rich.table import Table

from backend.sim.results import Figures, SimulationResult
from backend.specs.figures import LAYER_MEASURES, Measure

# The simulator's parts of compute cycles (array + exposed extension), beside the measures.
CYCLE_PARTS = (("array cyc", "array_cycles"), ("ext. cyc", "exposed_extension_cycles"))
# How a cell is written per unit: its header's suffix, and the factor to the written number.
WRITTEN = {"%": ("%", 100.0), "pJ": ("µJ", 1e-6), "bytes": ("B", 1.0)}


def layer_table(result: SimulationResult) -> Table:
    table = Table(
        title=f"{result.model} ({result.technique}) on {result.accelerator}",
        caption=_caption(result),
    )
    for header in ("layer", "pass", "role"):
        table.add_column(header)
    for measure in LAYER_MEASURES:
        suffix = WRITTEN.get(measure.display_unit, ("", 1.0))[0]
        table.add_column(f"{measure.label} {suffix}".strip(), justify="right")
    for header, _ in CYCLE_PARTS:
        table.add_column(header, justify="right")
    for row in result.layers:
        table.add_row(row.layer, row.pass_, row.role, *_figures(row))
    table.add_section()
    table.add_row("total", "", "", *_figures(result.totals), style="bold")
    return table


def _figures(figures: Figures) -> list[str]:
    cells = [_cell(getattr(figures, m.key), m) for m in LAYER_MEASURES]
    return cells + [_count(getattr(figures, key)) for _, key in CYCLE_PARTS]


def _cell(value: float, measure: Measure) -> str:
    if measure.display_unit in ("cycles", "MACs", "bytes"):
        return _count(value)
    factor = WRITTEN.get(measure.display_unit, ("", 1.0))[1]
    return f"{value * factor:.1f}" if measure.display_unit == "%" else f"{value * factor:.3g}"


def _caption(result: SimulationResult) -> str:
    t = result.totals
    return (
        f"{result.iterations} iterations: {t.seconds:.4g} s ({t.seconds_per_step:.4g} s a step), "
        f"{t.energy_pj / 1e12:.4g} J, "
        f"DRAM {t.dram_bytes / 2**20:.4g} MiB, mapping efficiency "
        f"{100 * t.mapping_efficiency:.1f}%; {extensions_line(result)}; "
        "compute cycles = array + exposed extension (ext.) cycles"
    )


def extensions_line(result: SimulationResult) -> str:
    names = ", ".join(result.extensions) if result.extensions else "none"
    return f"extensions on: {names}"


def _count(value: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.0f}"
