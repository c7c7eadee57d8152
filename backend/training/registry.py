"""Turn the API's technique parameters into technique objects.

Each technique's training hook is the class its entry in the technique table returns
(backend/specs/techniques.py), imported on first use: only the worker imports torch.
"""

from __future__ import annotations

from pydantic import BaseModel

from backend.specs.techniques import BASELINE, BY_NAME
from backend.training.technique import Technique


def build_technique(params: BaseModel) -> Technique:
    """The technique object for these parameters, built by its entry's training hook."""
    name = params.name  # type: ignore[attr-defined]
    entry = BY_NAME.get(name)
    if entry is None or not isinstance(params, entry.params_model):
        raise TypeError(f"unknown technique parameters {type(params).__name__}")
    hook = entry.training_hook()
    if not (isinstance(hook, type) and issubclass(hook, Technique)):
        raise TypeError(f"the training hook of '{name}' is not a Technique subclass")
    return hook(params)  # type: ignore[call-arg]


def build_techniques(params: list[BaseModel]) -> list[Technique]:
    """One object per named technique (each at most once); baseline alone adds nothing."""
    names = [p.name for p in params if p.name != BASELINE]  # type: ignore[attr-defined]
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise ValueError(f"technique given twice: {', '.join(sorted(duplicates))}")
    return [build_technique(p) for p in params if p.name != BASELINE]  # type: ignore[attr-defined]
