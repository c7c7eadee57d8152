"""The technique table: every training-acceleration technique the service offers, defined once.

An entry names the technique, its label for people, its parameter model (the knobs a spec sets
and sweeps), the import path of its training hook ("module:Class", a
`worker.training.technique.Technique` built with the parameters) and the accelerator extension
it switches on (a `HardwareExtension` field of `AcceleratorConfig`, None for none). Everything
else reads this table: the spec models (the union of parameter models, told apart by `name`, in
table order), the expansion (sweep paths; which extensions a run switches on), the API
(`GET /api/v1/techniques`, which the submit form and the charts read) and the worker, which
alone imports the hooks, by path. This module imports no torch, nor does anything it names
except the hooks.

Registration: the built-ins below through `register`, then the modules the
`ORRERY_TECHNIQUE_MODULES` setting names, each calling `register` for its own techniques. The
table is then closed: the pydantic models built from it are fixed when it loads, so a later
`register` is an error rather than a technique that half the service does not know.

Open choice: the simulator has no per-technique code, so no entry names one. It costs what the
workload's ops record (reused rows, folded reductions, extra ops, GEMMs on a unit beside the
array, sparsity) on whichever extensions the accelerator has switched on. A technique on existing
hardware needs no simulator work; one that needs new hardware adds a `HardwareExtension` field to
`AcceleratorConfig` (backend/specs/accelerator.py), costs it in worker/sim, and names the field
here.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import BaseModel, Field, TypeAdapter

from backend.settings import Settings
from backend.specs.accelerator import EXTENSIONS, AcceleratorConfig
from backend.specs.training import AdaGPParams, BaselineParams, MercuryParams, SparseTrainParams

# A name is a sweep path's head ("mercury.signature_bits") and part of a composed label
# ("mercury+sparsetrain"), so it holds neither '.' nor '+'.
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_HOOK = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass(frozen=True)
class TechniqueEntry:
    name: str
    label: str
    params_model: type[BaseModel]
    training_hook: str
    hardware_extension: str | None = None


_entries: dict[str, TechniqueEntry] = {}
_closed = False


def register(entry: TechniqueEntry) -> TechniqueEntry:
    """Add a technique to the table: ValueError when the entry does not hold together,
    RuntimeError once the table is loaded."""
    if not _NAME.fullmatch(entry.name):
        raise ValueError(f"technique name '{entry.name}' must match {_NAME.pattern}")
    if entry.name in _entries:
        raise ValueError(f"technique '{entry.name}' is registered twice")
    name_field = entry.params_model.model_fields.get("name")
    if name_field is None or name_field.default != entry.name:
        raise ValueError(
            f"{entry.params_model.__name__} needs the field name: Literal['{entry.name}'] "
            f"= '{entry.name}'"
        )
    if not _HOOK.fullmatch(entry.training_hook):
        raise ValueError(f"training hook '{entry.training_hook}' is not 'module:Class'")
    if entry.hardware_extension is not None and entry.hardware_extension not in EXTENSIONS:
        raise ValueError(
            f"hardware extension '{entry.hardware_extension}' is not one of {', '.join(EXTENSIONS)}"
        )
    if _closed:
        raise RuntimeError(
            f"technique '{entry.name}' registered after the technique table was loaded: "
            "register it in a module named by ORRERY_TECHNIQUE_MODULES"
        )
    _entries[entry.name] = entry
    return entry


register(
    TechniqueEntry("baseline", "Baseline", BaselineParams, "worker.training.baseline:Baseline")
)
register(
    TechniqueEntry("mercury", "MERCURY", MercuryParams, "worker.training.mercury:Mercury", "mcache")
)
register(
    TechniqueEntry(
        "adagp", "ADA-GP", AdaGPParams, "worker.training.adagp:AdaGP", "gradient_predictor"
    )
)
register(
    TechniqueEntry(
        "sparsetrain",
        "SparseTrain",
        SparseTrainParams,
        "worker.training.sparsetrain:SparseTrain",
        "zero_skipping",
    )
)
for _module in Settings().technique_module_names:
    try:
        importlib.import_module(_module)
    except ModuleNotFoundError as exc:
        raise ImportError(f"ORRERY_TECHNIQUE_MODULES names '{_module}': {exc}") from exc
_closed = True

TECHNIQUES: tuple[TechniqueEntry, ...] = tuple(_entries.values())
TECHNIQUE_NAMES: tuple[str, ...] = tuple(_entries)
BY_NAME: dict[str, TechniqueEntry] = dict(_entries)

# The parameter models as one union, told apart by `name` (OpenAPI: oneOf with a discriminator).
AnyTechnique: Any = Union[tuple(entry.params_model for entry in TECHNIQUES)]  # noqa: UP007
TechniqueParams: Any = Annotated[AnyTechnique, Field(discriminator="name")]

_technique_list: TypeAdapter[list[Any]] = TypeAdapter(list[TechniqueParams])


def parse_techniques(data: list[dict[str, Any]]) -> list[Any]:
    """Technique params from their stored JSON form."""
    return _technique_list.validate_python(data)


def technique_label(techniques: Iterable[BaseModel]) -> str:
    """'mercury+sparsetrain' for a composed run, 'baseline' for none."""
    names = sorted({t.name for t in techniques if t.name != "baseline"})  # type: ignore[attr-defined]
    return "+".join(names) if names else "baseline"


def techniques_of(label: str) -> frozenset[str]:
    """{'mercury', 'sparsetrain'} from a workload's technique label 'mercury+sparsetrain'."""
    return frozenset(name for name in label.split("+") if name and name != "baseline")


def extensions_for(techniques: Iterable[str]) -> frozenset[str]:
    """The hardware extensions these techniques use (a name not in the table uses none)."""
    return frozenset(
        extension
        for name in techniques
        if (entry := BY_NAME.get(name)) is not None and (extension := entry.hardware_extension)
    )


def accelerator_for(accelerator: AcceleratorConfig, techniques: Iterable[str]) -> AcceleratorConfig:
    """The accelerator with only the extensions these techniques use switched on (where it
    offers them): the hardware a run of those techniques is simulated on."""
    return accelerator.with_extensions(extensions_for(techniques))
