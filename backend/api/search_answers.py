"""The API's answers about a design search: its status and progress, its fronts, its sample.

Built from the stored search (`DesignSearchRow`: the merged result so far, the searched fields
of the designs it kept). A design's figures are the declared `DESIGN_MEASURES`
(backend/specs/figures.py: time_s, energy_j, area_mm2, in the order of the search's
objectives' FIGURES), so their keys and units are said once.

Shapes, for the design-space page:
- fronts: per technique label, its front's designs, each with its figures and searched fields
  (a front is small: tens to hundreds of designs);
- sample: columnar, so 20,000 points per technique stay small: one table of the designs kept
  (`designs`: index, the searched fields, total SRAM KiB), and per technique the row of each
  point in that table with its figures, column by column. `ranges` gives each figure's,
  field's and SRAM's smallest and largest value over every point, for constraint sliders.
  Figures and SRAM travel rounded to `SAMPLE_DIGITS` significant digits, float32's precision:
  far beyond the three the page writes and the simulator's own accuracy, and about half the
  characters of a float64 written whole; the searched fields stay exact (they are the design).
Before the search is done these are the chunks merged so far.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, computed_field, create_model

from backend.api.schemas import from_row
from backend.db.models import DesignSearchRow
from backend.searches.records import Progress
from backend.specs.axes import Scalar
from backend.specs.design_search import FIGURES, DesignSearch
from backend.specs.figures import DESIGN_MEASURES

MEASURE_OF = dict(zip(FIGURES, DESIGN_MEASURES, strict=True))
SRAM_FIELDS = ("ifmap_sram_kib", "filter_sram_kib", "ofmap_sram_kib")
SAMPLE_DIGITS = 7  # significant digits of the sample's figures: float32's precision


class SearchProgressOut(BaseModel):
    chunks_total: int = Field(description="chunks the search's designs are split into")
    chunks_done: int = Field(description="chunks evaluated and merged")
    designs_evaluated: int = Field(description="designs in the chunks done")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fraction(self) -> float:
        """chunks done / total (0 before the search started)"""
        return self.chunks_done / self.chunks_total if self.chunks_total else 0


class TechniqueCounts(BaseModel):
    evaluated: int = Field(description="designs evaluated on this technique's workload")
    feasible: int = Field(description="of those, designs meeting every constraint")
    front: int = Field(description="designs on its front")
    sample: int = Field(description="designs in its sample")


class SearchOut(BaseModel):
    id: int
    experiment_id: int
    status: str = Field(description="waiting (for the trainings), running, done, failed, cancelled")
    error: str | None
    spec: dict[str, Any] = Field(description="the DesignSearch")
    designs: int | None = Field(description="designs searched (known once started)")
    objectives: list[str]
    fields: list[str] = Field(description="the searched accelerator fields (paths)")
    progress: SearchProgressOut
    techniques: dict[str, TechniqueCounts] = Field(
        description="per technique label: counts so far (empty before the first chunk)"
    )
    can_edit: bool = Field(description="you may cancel it and turn its front designs into runs")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


FigureColumns = create_model(
    "FigureColumns",
    **{
        m.key: (list[float], Field(description=f"{m.description} ({m.unit})"))
        for m in DESIGN_MEASURES
    },  # type: ignore[call-overload]
)
DesignFigures = create_model(
    "DesignFigures",
    **{m.key: (float, Field(description=f"{m.description} ({m.unit})")) for m in DESIGN_MEASURES},  # type: ignore[call-overload]
)


class FrontPoint(DesignFigures):  # type: ignore[misc,valid-type]
    index: int = Field(description="the design's number in the search")
    fields: dict[str, Scalar] = Field(description="its searched fields")


class MeasureUnit(BaseModel):
    key: str
    unit: str
    description: str


class _Answer(BaseModel):
    search_id: int
    status: str
    objectives: list[str] = Field(description="the search's objectives (time, energy, area)")
    measures: list[MeasureUnit] = Field(description="each design figure's key and unit")
    fields: list[str] = Field(description="the searched accelerator fields (paths)")


class FrontsOut(_Answer):
    fronts: dict[str, list[FrontPoint]] = Field(
        description="per technique label, its Pareto front (every objective minimised), by index"
    )


class DesignTable(BaseModel):
    index: list[int] = Field(description="design numbers, one per row")
    sram_kib: list[float] = Field(description="ifmap + filter + ofmap SRAM KiB of each design")
    fields: dict[str, list[Scalar]] = Field(description="per searched field, a value per row")


class SampleSeries(FigureColumns):  # type: ignore[misc,valid-type]
    row: list[int] = Field(description="each point's row in `designs`")


class SampleOut(_Answer):
    constraints: dict[str, float | None] = Field(description="the search's constraints")
    designs: DesignTable
    techniques: dict[str, SampleSeries] = Field(
        description="per technique label, its sample (and its front), columnar"
    )
    ranges: dict[str, tuple[float, float]] = Field(
        description="smallest and largest value of each figure, numeric field and sram_kib "
        "over every point"
    )


def _result(search: DesignSearchRow) -> dict[str, Any]:
    return search.result or {"objectives": [], "workloads": {}}


def _spec(search: DesignSearchRow) -> DesignSearch:
    return DesignSearch.stored(search.spec)


def search_out(search: DesignSearchRow, progress: Progress, can_edit: bool) -> SearchOut:
    spec = _spec(search)
    workloads = _result(search)["workloads"]
    return from_row(
        SearchOut,
        search,
        objectives=list(spec.objectives),
        fields=list(spec.parameters),
        progress=progress,
        techniques={
            label: TechniqueCounts(
                evaluated=w["evaluated"],
                feasible=w["feasible"],
                front=len(w["front"]["index"]),
                sample=len(w["sample"]["index"]),
            )
            for label, w in workloads.items()
        },
        can_edit=can_edit,
    )


def _answer(search: DesignSearchRow) -> dict[str, Any]:
    spec = _spec(search)
    return {
        "search_id": search.id,
        "status": search.status,
        "objectives": list(spec.objectives),
        "measures": [
            MeasureUnit(key=m.key, unit=m.unit, description=m.description) for m in DESIGN_MEASURES
        ],
        "fields": list(spec.parameters),
    }


def _rows(search: DesignSearchRow) -> tuple[dict[str, Any], dict[int, int]]:
    table = search.design_fields or {"index": [], "fields": {}}
    return table, {index: row for row, index in enumerate(table["index"])}


def fronts_out(search: DesignSearchRow) -> FrontsOut:
    table, row_of = _rows(search)
    fronts: dict[str, list[FrontPoint]] = {}
    for label, workload in _result(search)["workloads"].items():
        front = workload["front"]
        fronts[label] = [
            FrontPoint(
                index=index,
                fields={path: values[row_of[index]] for path, values in table["fields"].items()},
                **{m.key: value for m, value in zip(DESIGN_MEASURES, figures, strict=True)},
            )
            for index, figures in zip(front["index"], front["figures"], strict=True)
        ]
    return FrontsOut(**_answer(search), fronts=fronts)


def _sram(spec: DesignSearch, table: dict[str, Any]) -> list[float]:
    count = len(table["index"])
    base = spec.base_config
    columns = [table["fields"].get(path) or [getattr(base, path)] * count for path in SRAM_FIELDS]
    return [float(sum(values)) for values in zip(*columns, strict=True)] if count else []


def _span(values: list[Any]) -> tuple[float, float] | None:
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return (min(numbers), max(numbers)) if numbers else None


def significant(values: list[float], digits: int = SAMPLE_DIGITS) -> list[float]:
    """Each value rounded to `digits` significant digits (half to even), as the float nearest
    that decimal, which JSON then writes in at most `digits` digits."""
    array = np.asarray(values, dtype=float)
    rounded = array.copy()
    finite = np.isfinite(array) & (array != 0)
    shift = digits - 1 - np.floor(np.log10(np.abs(array[finite])))
    scale = np.power(10.0, np.abs(shift))  # exact up to 10^22: the quotient is then the nearest
    rounded[finite] = np.where(
        shift >= 0,
        np.round(array[finite] * scale) / scale,
        np.round(array[finite] / scale) * scale,
    )
    return rounded.tolist()


def sample_out(search: DesignSearchRow) -> SampleOut:
    spec = _spec(search)
    table, row_of = _rows(search)
    techniques: dict[str, SampleSeries] = {}
    for label, workload in _result(search)["workloads"].items():
        points = {
            i: f
            for part in ("sample", "front")
            for i, f in zip(workload[part]["index"], workload[part]["figures"], strict=True)
        }
        indices = sorted(points)
        techniques[label] = SampleSeries(
            row=[row_of[i] for i in indices],
            **{
                m.key: significant([points[i][column] for i in indices])
                for column, m in enumerate(DESIGN_MEASURES)
            },
        )
    sram = significant(_sram(spec, table))
    spans: dict[str, tuple[float, float] | None] = {
        m.key: _span([v for series in techniques.values() for v in getattr(series, m.key)])
        for m in DESIGN_MEASURES
    }
    spans["sram_kib"] = _span(sram)
    spans.update({path: _span(values) for path, values in table["fields"].items()})
    return SampleOut(
        **_answer(search),
        constraints=spec.constraints.model_dump(),
        designs=DesignTable(index=table["index"], sram_kib=sram, fields=table["fields"]),
        techniques=techniques,
        ranges={key: span for key, span in spans.items() if span is not None},
    )
