"""A technique that exists only for the tests: its parameter model and its one registration.

Loaded through ORRERY_TECHNIQUE_MODULES=tests.techniques.toy, exactly as a deployment adds a
technique of its own; its training hook is tests/techniques/toy_training.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.specs.techniques import TechniqueEntry, register


class ToyParams(BaseModel):
    """Toy: a test technique that trains like the baseline and asks for the predictor unit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["toy"] = "toy"
    strength: float = Field(0.5, ge=0, le=1, description="a knob the form shows and a spec sweeps")


register(
    TechniqueEntry(
        "toy", "Toy", ToyParams, "tests.techniques.toy_training:Toy", "gradient_predictor"
    )
)
