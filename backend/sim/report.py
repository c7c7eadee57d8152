"""A per-layer, per-pass table of a simulation, for terminals."""

from __future__ import annotations

from rich.table import Table

from backend.sim.results import SimulationResult


def layer_table(result: SimulationResult) -> Table:
    table = Table(
        title=f"{result.model} ({result.technique}) on {result.accelerator}",
        caption=_caption(result),
    )
    table.add_column("layer")
    table.add_column("pass")
    table.add_column("role")
    for header in ("MACs alg.", "MACs actual", "MACs skipped", "MACs overhead"):
        table.add_column(header, justify="right")
    for header in ("array cyc", "ext. cyc", "stall cyc", "util %", "energy µJ"):
        table.add_column(header, justify="right")
    for row in result.layers:
        table.add_row(
            row.layer,
            row.pass_,
            row.role,
            _count(row.macs_algorithmic),
            _count(row.macs_actual),
            _count(row.macs_skipped),
            _count(row.macs_overhead),
            _count(row.array_cycles),
            _count(row.exposed_extension_cycles),
            _count(row.stall_cycles),
            f"{100 * row.utilization:.1f}",
            f"{row.energy_pj / 1e6:.3g}",
        )
    t = result.totals
    table.add_section()
    table.add_row(
        "total", "", "",
        _count(t.macs_algorithmic), _count(t.macs_actual), _count(t.macs_skipped),
        _count(t.macs_overhead), _count(t.array_cycles), _count(t.exposed_extension_cycles),
        _count(t.stall_cycles),
        f"{100 * t.utilization:.1f}", f"{t.energy_pj / 1e6:.3g}",
        style="bold",
    )  # fmt: skip
    return table


def _caption(result: SimulationResult) -> str:
    t = result.totals
    return (
        f"{result.iterations} iterations: {t.seconds:.4g} s ({t.seconds_per_step:.4g} s a step), "
        f"{t.energy_pj / 1e12:.4g} J, "
        f"DRAM {t.dram_bytes / 2**20:.4g} MiB, mapping efficiency "
        f"{100 * t.mapping_efficiency:.1f}%; {extensions_line(result)}; "
        "cycles = array + exposed extension (ext.) + stall"
    )


def extensions_line(result: SimulationResult) -> str:
    names = ", ".join(result.extensions) if result.extensions else "none"
    return f"extensions on: {names}"


def _count(value: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.0f}"
