"""A hardware design search, evaluated chunk by chunk: designs in, Pareto fronts and a bounded
sample out.

Designs (backend/specs/design_search.py) are numbered 0..count-1: the grid first (mixed radix over
the finite axes, the first parameter slowest), then the random samples. A random design's value
on each axis comes from a fixed integer mixing function (splitmix64) of (seed, sample number,
axis position), so any design is drawn on its own, in any chunk, without drawing those before it
(`design_at` rebuilds one exactly, `design_table` a whole range at once as arrays).

Each design is evaluated on every stored workload the caller gives (keys are technique labels,
"baseline", "mercury", "mercury+sparsetrain"): a technique's workload runs on the design with
only the extensions its techniques use switched on (backend.specs.techniques.accelerator_for),
the baseline's on the design with every extension off and every tensor dense ("dense"), or with
only zero-skipping left on ("same"), exactly as an experiment's runs and baselines
(backend.experiments.expand). Per design and workload the figures are:

- time: total cycles of the whole training / clock (SimulationResult.totals.seconds),
- energy: the training's energy in joules (totals.energy_pj * 1e-12),
- area: mm² at 45 nm of the design as the technique switches it on (backend.sim.area), the MCACHE
  sized as the workload's training sized it (`mcache`, from its technique parameters).

Every figure is equal (==) to what simulate() and area() give for that design alone: the batch
runs the same simulator phases over arrays of designs (backend.sim.simulate.simulate_columns).

Constraints drop designs from the fronts and the sample but not from the counts. Per workload a
chunk keeps the exact Pareto front (every objective minimised; identical points do not dominate
each other, so equal designs are all kept) among its feasible designs, and a sample: the
`sample_size` feasible designs with the smallest splitmix64 hash of their index. Both are
mergeable exactly: the front of a union is the front of the union of the fronts, and the
smallest hashes of a union are among each part's smallest, so `merge` gives the same result
however the designs were chunked.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backend.sim.area import UM2_PER_MM2, McacheSize, area_components, area_fields
from backend.sim.pareto import front_2d, front_3d
from backend.sim.results import ENERGY_LEVELS
from backend.sim.simulate import ConfigColumns, simulate_columns
from backend.sim.workload import Workload
from backend.specs.accelerator import AcceleratorConfig, field_value
from backend.specs.design_search import (
    CHOICE_FIELDS,
    FIGURES,
    INTEGER_FIELDS,
    DesignSearch,
    is_finite,
    set_field,
)
from backend.specs.experiment import SAME_BASELINE_EXTENSIONS, BaselineHardware
from backend.specs.techniques import BASELINE, accelerator_for, techniques_of

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 mixing every bit (wrapping arithmetic)."""
    z = np.asarray(x, dtype=np.uint64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def design_hash(indices: np.ndarray) -> np.ndarray:
    """The sample's ordering key of each design index."""
    return splitmix64(np.asarray(indices, dtype=np.uint64))


def _uniform(seed: int, samples: np.ndarray, axis: int) -> np.ndarray:
    """U[0, 1) of (seed, sample number, axis position), 53 bits."""
    key = splitmix64(np.asarray([seed], dtype=np.uint64))[0] ^ np.uint64(axis)
    bits = splitmix64(splitmix64(samples.astype(np.uint64) ^ key))
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def design_count(search: DesignSearch) -> int:
    return search.design_count


def design_table(search: DesignSearch, start: int, stop: int) -> dict[str, np.ndarray]:
    """The searched fields of designs [start, stop): per path an array (int64 for integer
    fields, float64 for the others, the value itself for choice fields, an object array)."""
    if not 0 <= start <= stop <= search.design_count:
        raise ValueError(f"designs [{start}, {stop}) are not within [0, {search.design_count})")
    base = search.base_config
    grid_axes = search.grid_axes
    grid = search.grid_size
    index = np.arange(start, stop, dtype=np.int64)
    in_grid = index < grid
    sizes = [len(values) for values in grid_axes.values()]
    digits = dict(
        zip(grid_axes, np.unravel_index(index[in_grid], sizes) if sizes else [], strict=True)
    )
    samples = index[~in_grid] - grid
    table = {}
    for position, (path, axis) in enumerate(search.parameters.items()):
        default = field_value(base, path)
        grid_values = (
            _typed(path, grid_axes[path])[digits[path]]
            if path in grid_axes
            else np.full(int(in_grid.sum()), default, dtype=_dtype(path))
        )
        u = _uniform(search.seed, samples, position)
        if is_finite(axis):
            choices = _typed(path, axis.finite_values(path in INTEGER_FIELDS))
            drawn = choices[np.minimum((u * len(choices)).astype(np.int64), len(choices) - 1)]
        else:
            assert axis.low is not None and axis.high is not None
            if axis.log:
                low, high = np.log(axis.low), np.log(axis.high)
                drawn = np.exp(low + u * (high - low))
            else:
                drawn = axis.low + u * (axis.high - axis.low)
            drawn = np.clip(drawn, axis.low, axis.high)
            if path in INTEGER_FIELDS:
                drawn = np.rint(drawn).astype(np.int64)
            elif axis.integer:
                drawn = np.rint(drawn)
        table[path] = np.concatenate([grid_values, drawn.astype(_dtype(path))])
    return table


def _dtype(path: str) -> Any:
    if path in CHOICE_FIELDS:
        return object
    return np.int64 if path in INTEGER_FIELDS else np.float64


def _typed(path: str, values: Sequence[Any]) -> np.ndarray:
    if path in INTEGER_FIELDS:
        return np.asarray([round(float(v)) for v in values], dtype=np.int64)
    if path in CHOICE_FIELDS:
        out = np.empty(len(values), dtype=object)
        out[:] = list(values)
        return out
    return np.asarray([float(v) for v in values], dtype=np.float64)


def design_at(search: DesignSearch, index: int) -> AcceleratorConfig:
    """Design `index` of the search as an accelerator config (a front point, to run or save)."""
    table = design_table(search, index, index + 1)
    base = search.base_config
    data = base.model_dump()
    for path, values in table.items():
        value = values[0]
        set_field(data, path, value.item() if isinstance(value, np.generic) else value)
    data["name"] = f"{base.name} #{index}"[:64]
    return AcceleratorConfig.model_validate(data)


def hardware_for(
    design: AcceleratorConfig, label: str, baseline_hardware: BaselineHardware = "dense"
) -> AcceleratorConfig:
    """The design as a run of the workload labelled `label` is simulated on."""
    if label == BASELINE:
        extensions = SAME_BASELINE_EXTENSIONS if baseline_hardware == "same" else frozenset()
        return design.with_extensions(extensions)
    return accelerator_for(design, techniques_of(label))


@dataclass
class Points:
    """Designs by index, each with its figures (time s, energy J, area mm²; FIGURES' order)."""

    index: list[int] = field(default_factory=list)
    figures: list[list[float]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"index": list(self.index), "figures": [list(row) for row in self.figures]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Points:
        return cls(
            [int(i) for i in data["index"]], [[float(v) for v in r] for r in data["figures"]]
        )

    @classmethod
    def of(cls, index: np.ndarray, figures: np.ndarray) -> Points:
        return cls(index.tolist(), figures.tolist())

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.asarray(self.index, dtype=np.int64),
            np.asarray(self.figures, dtype=np.float64).reshape(-1, len(FIGURES)),
        )


@dataclass
class WorkloadResult:
    """One workload's designs: how many were evaluated and feasible, the front, the sample."""

    evaluated: int = 0
    feasible: int = 0
    front: Points = field(default_factory=Points)
    sample: Points = field(default_factory=Points)

    def to_json(self) -> dict[str, Any]:
        return {
            "evaluated": self.evaluated,
            "feasible": self.feasible,
            "front": self.front.to_json(),
            "sample": self.sample.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkloadResult:
        return cls(
            int(data["evaluated"]),
            int(data["feasible"]),
            Points.from_json(data["front"]),
            Points.from_json(data["sample"]),
        )


@dataclass
class SearchResult:
    """The fronts and samples of a set of designs, per workload key. A chunk's result and a
    merged one are the same kind of thing (merge is associative)."""

    objectives: list[str]
    sample_size: int
    workloads: dict[str, WorkloadResult]

    def to_json(self) -> dict[str, Any]:
        return {
            "objectives": list(self.objectives),
            "sample_size": self.sample_size,
            "workloads": {key: result.to_json() for key, result in self.workloads.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SearchResult:
        return cls(
            [str(o) for o in data["objectives"]],
            int(data["sample_size"]),
            {key: WorkloadResult.from_json(value) for key, value in data["workloads"].items()},
        )


ChunkResult = SearchResult


def pareto_mask(points: np.ndarray) -> np.ndarray:
    """Undominated rows of `points` (every column minimised), as backend.sim.pareto."""
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    columns = [points[:, j].tolist() for j in range(points.shape[1])]
    mask = front_2d(*columns) if points.shape[1] == 2 else front_3d(*columns)
    return np.asarray(mask, dtype=bool)


def _objective_columns(objectives: Sequence[str]) -> list[int]:
    return [FIGURES.index(o) for o in objectives]  # type: ignore[arg-type]


def _front(index: np.ndarray, figures: np.ndarray, objectives: Sequence[str]) -> Points:
    mask = pareto_mask(figures[:, _objective_columns(objectives)])
    order = np.argsort(index[mask], kind="stable")
    return Points.of(index[mask][order], figures[mask][order])


def _sample(index: np.ndarray, figures: np.ndarray, size: int) -> Points:
    hashes = design_hash(index)
    if len(index) > size:
        kept = np.argpartition(hashes, size)[:size] if size else np.zeros(0, np.int64)
    else:
        kept = np.arange(len(index))
    order = kept[np.argsort(hashes[kept], kind="stable")]
    return Points.of(index[order], figures[order])


BLOCK = 8192  # designs simulated together: (designs x GEMMs) arrays of a few MB each


def design_columns(hardware: AcceleratorConfig, table: Mapping[str, np.ndarray]) -> ConfigColumns:
    """ConfigColumns of designs: `hardware`'s fields with the searched ones from `table`."""
    count = len(next(iter(table.values())))
    columns = ConfigColumns(
        {
            name: np.repeat(values, count, axis=0)
            for name, values in ConfigColumns.of([hardware]).items()
        }
    )
    for path, values in table.items():
        columns[path] = ConfigColumns.column(path, values)
    return columns


def design_area_mm2(
    hardware: AcceleratorConfig, table: Mapping[str, np.ndarray], mcache: McacheSize
) -> np.ndarray:
    """area(design, mcache).area_mm2 of each design, as arrays."""
    count = len(next(iter(table.values())))
    fields = area_fields(hardware, table)
    total = sum(area_components(hardware.area, fields, mcache).values())
    return np.broadcast_to(total / UM2_PER_MM2, (count,))


def evaluate_figures(
    workload: Workload,
    hardware: AcceleratorConfig,
    table: Mapping[str, np.ndarray],
    mcache: McacheSize,
    memo: dict | None = None,
) -> np.ndarray:
    """(designs, FIGURES) of one workload on `hardware` with the searched fields of `table`:
    what simulate() and area() give for each design alone."""
    cfg = design_columns(hardware, table)
    if workload.ops:
        columns = simulate_columns(workload, cfg, memo)
        cycles = columns["total_cycles"].sum(axis=1)
        energy_pj = sum(columns[f"energy_{level}_pj"].sum(axis=1) for level in ENERGY_LEVELS)
    else:
        cycles = energy_pj = np.zeros(cfg.count)
    seconds = cycles / (cfg["clock_mhz"][:, 0] * 1e6)
    area_mm2 = design_area_mm2(hardware, table, mcache)
    return np.stack([seconds, energy_pj * 1e-12, area_mm2], axis=1)


_MEMOS: dict[int, tuple[weakref.ref, dict]] = {}
_MEMO_WORKLOADS = 8


def _memo(workload: Workload) -> dict:
    """The simulator's per-GEMM sparse work for this workload object, kept between the chunks a
    worker evaluates (for the last few workloads it met)."""
    held = _MEMOS.get(id(workload))
    if held is not None and held[0]() is workload:
        return held[1]
    while len(_MEMOS) >= _MEMO_WORKLOADS:
        del _MEMOS[next(iter(_MEMOS))]
    memo: dict = {}
    _MEMOS[id(workload)] = (weakref.ref(workload), memo)
    return memo


def evaluate_chunk(
    workloads: Mapping[str, Workload],
    search: DesignSearch,
    start: int,
    stop: int,
    *,
    baseline_hardware: BaselineHardware = "dense",
    mcache: Mapping[str, McacheSize] | None = None,
) -> SearchResult:
    """Designs [start, stop) of the search on every workload (keys: technique labels), with
    `mcache[label]`: the MCACHE geometry of that workload's training (`McacheSize()` when
    absent), for the area."""
    index = np.arange(start, stop, dtype=np.int64)
    table = design_table(search, start, stop)
    base = search.base_config
    sram = sum(
        table[path].astype(np.float64) if path in table else float(field_value(base, path))
        for path in ("ifmap_sram_kib", "filter_sram_kib", "ofmap_sram_kib")
    ) * np.ones(len(index))
    limits = search.constraints
    results = {}
    for label, workload in workloads.items():
        size = (mcache or {}).get(label, McacheSize())
        hardware = hardware_for(base, label, baseline_hardware)
        memo = _memo(workload)
        figures = np.zeros((len(index), len(FIGURES)))
        for block in range(0, len(index), BLOCK):  # an empty chunk evaluates nothing
            part = {path: values[block : block + BLOCK] for path, values in table.items()}
            figures[block : block + BLOCK] = evaluate_figures(workload, hardware, part, size, memo)
        feasible = np.ones(len(index), dtype=bool)
        for bound, column in (
            (limits.energy_j_max, figures[:, 1]),
            (limits.area_mm2_max, figures[:, 2]),
            (limits.sram_kib_max, sram),
        ):
            if bound is not None:
                feasible &= column <= bound
        kept_index, kept = index[feasible], figures[feasible]
        results[label] = WorkloadResult(
            evaluated=len(index),
            feasible=int(feasible.sum()),
            front=_front(kept_index, kept, search.objectives),
            sample=_sample(kept_index, kept, search.sample_size),
        )
    return SearchResult(list(search.objectives), search.sample_size, results)


def merge(chunks: Sequence[SearchResult]) -> SearchResult:
    """One result from chunk results over disjoint designs: fronts of the union of the fronts,
    the smallest-hash sample of the union of the samples, counts summed. A design given twice
    (a chunk merged again) counts in the fronts and sample once."""
    if not chunks:
        raise ValueError("nothing to merge")
    first = chunks[0]
    for chunk in chunks[1:]:
        if chunk.objectives != first.objectives or chunk.sample_size != first.sample_size:
            raise ValueError("chunks of different searches (objectives or sample size differ)")
        if chunk.workloads.keys() != first.workloads.keys():
            raise ValueError("chunks of different workloads")
    merged = {}
    for label in first.workloads:
        parts = [chunk.workloads[label] for chunk in chunks]
        fronts = [part.front.arrays() for part in parts]
        samples = [part.sample.arrays() for part in parts]
        merged[label] = WorkloadResult(
            evaluated=sum(part.evaluated for part in parts),
            feasible=sum(part.feasible for part in parts),
            front=_front(*_union(fronts), first.objectives),
            sample=_sample(*_union(samples), first.sample_size),
        )
    return SearchResult(list(first.objectives), first.sample_size, merged)


def _union(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    index = np.concatenate([p[0] for p in parts])
    figures = np.concatenate([p[1] for p in parts])
    index, first = np.unique(index, return_index=True)
    return index, figures[first]
