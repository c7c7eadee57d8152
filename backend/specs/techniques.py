"""The technique table: every training-acceleration technique the service offers.

Each technique is a folder (backend/techniques/entry.py says what it holds) registered by an
entry point in the group `orrery.techniques` that names its `TechniqueEntry`. The table loads
them all when this module is first imported, in every process alike (API, worker, CLI), and is
then closed: the pydantic models built from it are fixed at that moment, so a technique is the
same to every part of the service or the import fails, naming the entry point. A package that
adds an entry point must be (re)installed for `importlib.metadata` to see it.

Order: the baseline first, then by name, so the spec's union (OpenAPI `oneOf`), the form and
the API list the techniques the same way whatever order the installed packages are found in.

Everything else reads this table: the spec models (the union of parameter models, told apart by
`name`), the expansion (sweep paths; which extensions a run switches on), the API
(`GET /api/v1/techniques`, which the submit form and the charts read), the figures an epoch
stores (`EPOCH_FIGURES`) and the worker, which alone calls the training hooks. This module
imports no torch and reads no settings.

Open choice: the simulator has no per-technique code, so no entry names one. It costs what the
workload's ops record (reused rows, folded reductions, extra ops, GEMMs on a unit beside the
array, sparsity) on whichever extensions the accelerator has switched on. A technique on existing
hardware needs no simulator work; one that needs new hardware adds a `HardwareExtension` field to
`AcceleratorConfig` (backend/specs/accelerator.py), costs it in backend/sim, and names the field
in its entry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Annotated, Any, Union

from pydantic import BaseModel, Field, TypeAdapter

from backend.specs.accelerator import EXTENSIONS, AcceleratorConfig
from backend.specs.figures import TRAINING_FIGURES
from backend.techniques.entry import Figure, TechniqueEntry

ENTRY_POINT_GROUP = "orrery.techniques"
BASELINE = "baseline"  # the technique that is no technique: plain training, the reference

# A name is a sweep path's head ("mercury.signature_bits") and part of a composed label
# ("mercury+sparsetrain"), so it holds neither '.' nor '+'.
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def check_entry(entry: TechniqueEntry) -> TechniqueEntry:
    """The entry, or ValueError saying what does not hold together."""
    if not _NAME.fullmatch(entry.name):
        raise ValueError(f"technique name '{entry.name}' must match {_NAME.pattern}")
    name_field = entry.params_model.model_fields.get("name")
    if name_field is None or name_field.default != entry.name:
        raise ValueError(
            f"{entry.params_model.__name__} needs the field name: Literal['{entry.name}'] "
            f"= '{entry.name}'"
        )
    if entry.hardware_extension is not None and entry.hardware_extension not in EXTENSIONS:
        raise ValueError(
            f"hardware extension '{entry.hardware_extension}' is not one of {', '.join(EXTENSIONS)}"
        )
    known = {figure.key for figure in TRAINING_FIGURES}
    for figure in entry.figures:
        if figure.key in known:
            raise ValueError(f"technique '{entry.name}' declares figure '{figure.key}' again")
        known.add(figure.key)
    if entry.paper is not None and entry.paper.figure not in known:
        raise ValueError(f"the paper of '{entry.name}' names an undeclared figure")
    return entry


def _check_figures_apart(entries: Iterable[TechniqueEntry]) -> None:
    """Each figure key belongs to one technique: an epoch stores them side by side."""
    owner: dict[str, str] = {}
    for entry in entries:
        for figure in entry.figures:
            if figure.key in owner:
                raise ValueError(
                    f"technique '{entry.name}' declares figure '{figure.key}' again "
                    f"(technique '{owner[figure.key]}' declares it)"
                )
            owner[figure.key] = entry.name


def load_entries(points: Iterable[EntryPoint]) -> tuple[TechniqueEntry, ...]:
    """The table's entries from these entry points: the baseline first, then by name;
    ImportError or ValueError naming the entry point that does not load or hold together."""
    entries: dict[str, TechniqueEntry] = {}
    for point in points:
        try:
            entry = point.load()
        except Exception as exc:
            raise ImportError(
                f"technique entry point '{point.name} = {point.value}' does not load: {exc}"
            ) from exc
        if not isinstance(entry, TechniqueEntry):
            raise ValueError(f"entry point '{point.name}' names no TechniqueEntry")
        try:
            check_entry(entry)
        except ValueError as exc:
            raise ValueError(f"entry point '{point.name}': {exc}") from exc
        if entry.name != point.name:
            raise ValueError(f"entry point '{point.name}' names technique '{entry.name}'")
        if entry.name in entries:
            raise ValueError(f"technique '{entry.name}' is registered twice")
        entries[entry.name] = entry
    if BASELINE not in entries:
        raise ValueError(f"no '{BASELINE}' technique: is the package installed?")
    _check_figures_apart(entries.values())
    return tuple(sorted(entries.values(), key=lambda e: (e.name != BASELINE, e.name)))


TECHNIQUES: tuple[TechniqueEntry, ...] = load_entries(entry_points(group=ENTRY_POINT_GROUP))
TECHNIQUE_NAMES: tuple[str, ...] = tuple(entry.name for entry in TECHNIQUES)
BY_NAME: dict[str, TechniqueEntry] = {entry.name: entry for entry in TECHNIQUES}
EPOCH_FIGURES: tuple[Figure, ...] = TRAINING_FIGURES + tuple(
    figure for entry in TECHNIQUES for figure in entry.figures
)

# The parameter models as one union, told apart by `name` (OpenAPI: oneOf with a discriminator).
AnyTechnique: Any = Union[tuple(entry.params_model for entry in TECHNIQUES)]  # noqa: UP007
TechniqueParams: Any = Annotated[AnyTechnique, Field(discriminator="name")]

_technique_list: TypeAdapter[list[Any]] = TypeAdapter(list[TechniqueParams])


def parse_techniques(data: list[dict[str, Any]]) -> list[Any]:
    """Technique params from their stored JSON form."""
    return _technique_list.validate_python(data)


def technique_label(techniques: Iterable[BaseModel]) -> str:
    """'mercury+sparsetrain' for a composed run, 'baseline' for none."""
    names = sorted({t.name for t in techniques if t.name != BASELINE})  # type: ignore[attr-defined]
    return "+".join(names) if names else BASELINE


def techniques_of(label: str) -> frozenset[str]:
    """{'mercury', 'sparsetrain'} from a workload's technique label 'mercury+sparsetrain'."""
    return frozenset(name for name in label.split("+") if name and name != BASELINE)


def extensions_for(techniques: Iterable[str]) -> frozenset[str]:
    """The hardware extensions these techniques use (a name not in the table uses none)."""
    return frozenset(
        extension
        for name in techniques
        if (entry := BY_NAME.get(name)) is not None and (extension := entry.hardware_extension)
    )


def extension_sizes(technique_params: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    """The geometry of each sized extension for a run's technique parameters (as a run stores
    them), keyed by extension: from the owning technique's parameters where the run has that
    technique, else from its defaults (a preset may carry the extension without the technique)."""
    given = {params.get("name"): params for params in technique_params or []}
    return {
        entry.hardware_extension: entry.extension_size(given.get(entry.name, {}))
        for entry in TECHNIQUES
        if entry.hardware_extension is not None and entry.extension_size is not None
    }


def accelerator_for(accelerator: AcceleratorConfig, techniques: Iterable[str]) -> AcceleratorConfig:
    """The accelerator with only the extensions these techniques use switched on (where it
    offers them): the hardware a run of those techniques is simulated on."""
    return accelerator.with_extensions(extensions_for(techniques))
