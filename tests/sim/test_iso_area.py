"""The iso-area comparison (backend/sim/iso_area.py): the dense family as its docstring states it,
and the fastest and lowest-energy choices within an area budget, each against a brute-force
reference written here (every design simulated on its own, every rule applied by loops)."""

from __future__ import annotations

import random

import pytest

from backend.sim import Workload, simulate
from backend.sim.area import area
from backend.sim.iso_area import DenseDesign, choose, dense_candidates, evaluate, iso_area
from backend.sim.lowering import lower_conv2d, lower_linear
from backend.specs.accelerator import EXTENSIONS, PRESETS, AcceleratorConfig

SIDES = (0.5, 0.75, 0.875, 1.0, 1.125, 1.25, 1.5, 2.0)
BUFFERS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
SRAMS = ("ifmap_sram_kib", "filter_sram_kib", "ofmap_sram_kib")


def family_by_hand(accel: AcceleratorConfig) -> list[tuple[int, ...]]:
    """(rows, cols, SRAMs) of the family: sides and buffers scaled, rounded half up, clamped,
    first of equals kept."""

    def scaled(value: int, factor: float, high: int) -> int:
        return max(1, min(high, int(value * factor + 0.5)))

    seen: list[tuple[int, ...]] = []
    for row_factor in SIDES:
        for col_factor in SIDES:
            for sram_factor in BUFFERS:
                design = (
                    scaled(accel.rows, row_factor, 1024),
                    scaled(accel.cols, col_factor, 1024),
                    *(scaled(getattr(accel, name), sram_factor, 1 << 20) for name in SRAMS),
                )
                if design not in seen:
                    seen.append(design)
    return seen


ODD = AcceleratorConfig(
    name="odd", rows=3, cols=1000, ifmap_sram_kib=1, filter_sram_kib=3, ofmap_sram_kib=700_000
)


@pytest.mark.parametrize("accel", [*PRESETS.values(), ODD], ids=[*PRESETS, "odd"])
def test_the_family_is_the_stated_grid_of_dense_designs(accel: AcceleratorConfig) -> None:
    family = dense_candidates(accel)
    assert [(d.rows, d.cols, *(getattr(d, n) for n in SRAMS)) for d in family] == family_by_hand(
        accel
    )
    dense = accel.with_extensions(())
    assert all(d.extensions_on == () for d in family)
    assert all(
        (d.storage.activations, d.storage.gradients, d.storage.weights) == ("dense",) * 3
        for d in family
    )
    varied = {"rows", "cols", *SRAMS}
    kept = {k: v for k, v in dense.model_dump().items() if k not in varied}
    assert all({k: v for k, v in d.model_dump().items() if k not in varied} == kept for d in family)
    assert dense in family  # the same array, dense: every run has a candidate


def small_network() -> Workload:
    ops = lower_conv2d("conv1", 4, 3, 8, 12, 12, 3, 1, padding=1)
    ops += lower_conv2d("conv2", 4, 8, 16, 12, 12, 3, 2, padding=1)
    ops += lower_linear("fc", 4, 16 * 6 * 6, 10)
    return Workload(model="m", dataset="d", batch_size=4, iterations=20, ops=ops)


def least(designs: list[tuple[int, DenseDesign]], first: str, second: str) -> DenseDesign:
    """By loops: the least `first`, then `second`, then area, then the earliest."""
    best: tuple[int, DenseDesign] | None = None
    for index, design in designs:
        if best is None:
            best = (index, design)
            continue
        mine = (getattr(design, first), getattr(design, second), design.area_mm2, index)
        theirs = (getattr(best[1], first), getattr(best[1], second), best[1].area_mm2, best[0])
        if mine < theirs:
            best = (index, design)
    assert best is not None
    return best[1]


@pytest.mark.parametrize("preset", ["edge", "sparsetrain-like", "adagp-like"])
def test_the_choice_equals_brute_force_over_every_design(preset: str) -> None:
    workload = small_network()
    offered = PRESETS[preset]
    family = dense_candidates(offered)
    by_hand = []
    for design in family:  # each simulated alone, its area from the area model
        totals = simulate(workload, design).totals
        by_hand.append((design, area(design).area_mm2, totals.seconds, totals.energy_pj))
    evaluated = evaluate(workload, family)
    for (design, area_mm2, seconds, energy), got in zip(by_hand, evaluated, strict=True):
        assert (got.rows, got.cols, got.ifmap_sram_kib) == (
            design.rows,
            design.cols,
            design.ifmap_sram_kib,
        )
        assert got.area_mm2 == pytest.approx(area_mm2, rel=1e-12)
        assert got.seconds == pytest.approx(seconds, rel=1e-12)
        assert got.energy_pj == pytest.approx(energy, rel=1e-12)

    # Budgets: the array with each extension it offers, the dense array itself, one between
    # the smallest and the largest design, and one below every design.
    areas = sorted(a for _, a, _, _ in by_hand)
    budgets = [area(offered.with_extensions([name])).area_mm2 for name in EXTENSIONS]
    budgets += [area(offered.with_extensions(())).area_mm2, (areas[0] + areas[-1]) / 2]
    for budget in budgets:
        within = [(i, d) for i, d in enumerate(evaluated) if d.area_mm2 <= budget * (1 + 1e-9)]
        found = choose(evaluated, budget)
        assert found is not None and found.within_area == len(within)
        assert found.candidates == len(family)
        assert found.fastest == least(within, "seconds", "energy_pj")
        assert found.lowest_energy == least(within, "energy_pj", "seconds")
        assert all(d.area_mm2 <= budget * (1 + 1e-9) for d in (found.fastest, found.lowest_energy))
    assert choose(evaluated, areas[0] * 0.99) is None

    # Against the same array, dense: never slower, never more energy.
    dense = simulate(workload, offered.with_extensions(())).totals
    with_hardware = area(offered).area_mm2
    found = iso_area(workload, offered, with_hardware)
    assert found is not None
    assert found.fastest.seconds <= dense.seconds
    assert found.lowest_energy.energy_pj <= dense.energy_pj
    assert found.speedup(2 * dense.seconds) == pytest.approx(
        found.fastest.seconds / (2 * dense.seconds)
    )
    assert found.energy_ratio(dense.energy_pj) == pytest.approx(
        dense.energy_pj / found.lowest_energy.energy_pj
    )


def test_ties_are_broken_as_stated() -> None:
    """Random designs drawn from few values, so ties abound: the choice equals the loops'."""
    rng = random.Random(3)
    for _ in range(300):
        designs = [
            DenseDesign(
                rows=i,
                cols=1,
                ifmap_sram_kib=1,
                filter_sram_kib=1,
                ofmap_sram_kib=1,
                area_mm2=rng.choice([1.0, 2.0, 3.0]),
                seconds=rng.choice([0.5, 1.0]),
                energy_pj=rng.choice([10.0, 20.0]),
            )
            for i in range(rng.randrange(1, 12))
        ]
        budget = rng.choice([0.5, 1.0, 2.0, 3.0])
        within = [(i, d) for i, d in enumerate(designs) if d.area_mm2 <= budget]
        found = choose(designs, budget)
        if not within:
            assert found is None
            continue
        assert found is not None
        assert found.fastest is least(within, "seconds", "energy_pj")
        assert found.lowest_energy is least(within, "energy_pj", "seconds")
