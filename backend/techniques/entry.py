"""What a technique's folder declares: its entry in the technique table, its paper, its figures.

A technique is one folder under backend/techniques/ (a built-in) or in any installed package,
and one entry point in the group `orrery.techniques` naming the folder's `TECHNIQUE`, a
`TechniqueEntry`. The folder holds:

- `params.py`: its knobs, a pydantic model built on `backend.specs.training.Spec` with the field
  `name: Literal["NAME"] = "NAME"`;
- `training.py`: its training hook, a `backend.training.technique.Technique` subclass, with the
  modules only it uses beside it (MERCURY's signatures and MCACHE, ADA-GP's predictors and
  schedule). They import torch, so only the worker imports them, through the entry's
  `training_hook` (a function that imports the class when called);
- its paper, where it reproduces one: the headline and a miniature experiment (`miniature.yaml`)
  that asks the paper's question on this installation;
- the figures it measures per epoch (`Figure`), which the engine stores, the API serves, the
  charts draw and the paper check prints, all from this declaration.

This module imports neither torch nor the service's settings: the API reads every entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from backend.training.technique import Technique


@dataclass(frozen=True)
class Figure:
    """A figure a training measures in every epoch: stored under `key` in the epoch's figures,
    and per layer under the same key where the technique measures it per layer."""

    key: str
    label: str  # for people: "hit rate"
    description: str
    percent: bool = True  # a fraction, shown in per cent
    # How one number for a whole training is read from its epochs: the last epoch's value, or
    # the mean over epochs (an epoch with no value counts as 0: e.g. warm-up has no GP batch).
    over_training: Literal["last", "mean"] = "last"

    def of_training(self, values: Sequence[float | None]) -> float | None:
        """The training's value from its epochs' values, in epoch order."""
        if not values:
            return None
        if self.over_training == "mean":
            return sum(v or 0.0 for v in values) / len(values)
        return values[-1]


@dataclass(frozen=True)
class Paper:
    """A technique paper's headline, and the miniature that asks its question here."""

    title: str
    venue: str
    headline: str  # the claim in the paper's words, figures included
    speedup: float  # average speedup the paper reports
    energy_ratio: float | None  # technique energy / baseline energy, where the paper gives one
    accuracy: str  # what the paper says of accuracy
    miniature: Path  # the miniature experiment's YAML file
    figure: str  # the key of the technique's figure that says what it did (the paper check's)
    # What this installation measured about the technique beyond the verdict, each finding in
    # plain words with the command that measured it; the papers page shows them.
    findings: tuple[str, ...] = ()


@dataclass(frozen=True)
class TechniqueEntry:
    """One technique of the table. `training_hook` returns the hook class (importing torch);
    `hardware_extension` names the `AcceleratorConfig` extension it switches on (None: none);
    `extension_size` gives that extension's geometry for the technique's parameters as a run
    stores them (MERCURY: the MCACHE's entries, ways and signature width), which the area model
    prices (None: the extension has one size)."""

    name: str
    label: str
    params_model: type[BaseModel]
    training_hook: Callable[[], type[Technique]]
    hardware_extension: str | None = None
    extension_size: Callable[[Mapping[str, Any]], Any] | None = None
    figures: tuple[Figure, ...] = ()
    paper: Paper | None = None
