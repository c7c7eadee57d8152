"""A technique that exists only for the tests, as a technique folder: its knobs and entry here,
its training hook in training.py. `tests.techniques.install_toy` makes its entry point visible
to a fresh interpreter exactly as installing a package that declares it would."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from backend.specs.training import Spec
from backend.techniques.entry import Figure, TechniqueEntry

if TYPE_CHECKING:
    from backend.training.technique import Technique


class ToyParams(Spec):
    """Toy: a test technique that trains like the baseline and asks for the predictor unit."""

    name: Literal["toy"] = "toy"
    strength: float = Field(0.5, ge=0, le=1, description="a knob the form shows and a spec sweeps")


def _training_hook() -> type[Technique]:
    from tests.techniques.toy.training import Toy

    return Toy


TECHNIQUE = TechniqueEntry(
    name="toy",
    label="Toy",
    params_model=ToyParams,
    training_hook=_training_hook,
    hardware_extension="gradient_predictor",
    figures=(Figure("toy_level", "toy level", "the toy's strength, reported every epoch"),),
)
