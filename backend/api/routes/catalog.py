"""What a spec may name: the techniques and the accelerator presets (for the submit form and
the CLI).

The technique list is public, like the OpenAPI schema whose parameter models it points into;
the presets need a caller, as every other API answer does. Both come from the spec tables
(`backend.specs`), so they change only with the code.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.api.schemas import TechniqueOut
from backend.api.security import CurrentUser
from backend.specs.accelerator import PRESETS
from backend.specs.techniques import TECHNIQUES

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
