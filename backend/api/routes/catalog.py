"""What a spec may name and what runs are judged by: the techniques, the accelerator presets
(for the submit form and the CLI) and the declared figures and measures.

The technique and figure lists are public, like the OpenAPI schema whose parameter models they
point into; the presets need a caller, as every other API answer does. All come from the spec
tables (`backend.specs`), so they change only with the code.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.api.schemas import FigureOut, FiguresOut, MeasureOut, TechniqueOut
from backend.api.security import CurrentUser
from backend.specs.accelerator import PRESETS
from backend.specs.figures import LAYER_MEASURES, RUN_FIGURES
from backend.specs.techniques import EPOCH_FIGURES, TECHNIQUES

router = APIRouter(tags=["specs"])


@router.get("/accelerator-presets")
def accelerator_presets(_user: CurrentUser) -> dict[str, dict[str, Any]]:
    """The accelerator presets an experiment may name, in full (for the submit form)."""
    return {name: preset.model_dump() for name, preset in PRESETS.items()}


@router.get("/techniques", response_model=list[TechniqueOut])
def techniques() -> list[TechniqueOut]:
    """The techniques a spec may name, in the technique table's order (baseline first). Public,
    like the OpenAPI schema whose parameter models it points into."""
    return [
        TechniqueOut(
            name=entry.name,
            label=entry.label,
            params_schema=entry.params_model.__name__,
            hardware_extension=entry.hardware_extension,
        )
        for entry in TECHNIQUES
    ]


@router.get("/figures", response_model=FiguresOut)
def figures() -> FiguresOut:
    """The figures runs are judged by, as declared: each epoch's (every training's, then each
    technique's in table order) and the measures of a run and of a layer-pass (a run's in the
    order summaries show them), with how each is named, written, totalled and summarised.
    Public, like the technique list."""
    owner = {figure.key: entry.name for entry in TECHNIQUES for figure in entry.figures}
    run_keys = {measure.key for measure in RUN_FIGURES}
    layer_keys = {measure.key for measure in LAYER_MEASURES}
    measures = {measure.key: measure for measure in (*RUN_FIGURES, *LAYER_MEASURES)}
    return FiguresOut(
        epoch=[
            FigureOut(
                key=f.key,
                label=f.label,
                description=f.description,
                percent=f.percent,
                technique=owner.get(f.key),
            )
            for f in EPOCH_FIGURES
        ],
        measures=[
            MeasureOut(
                key=m.key,
                label=m.label,
                unit=m.unit,
                display_unit=m.display_unit,
                description=m.description,
                per_run=m.key in run_keys,
                per_layer=m.key in layer_keys,
                stored=m.stored,
                total=m.total,
                summarised=m.summarised,
                higher_is_better=m.higher_is_better,
            )
            for m in measures.values()
        ],
    )
