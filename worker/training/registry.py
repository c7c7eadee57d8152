"""Turn the API's technique parameters into technique objects."""

from __future__ import annotations

from backend.specs.training import AdaGPParams, BaselineParams, MercuryParams, SparseTrainParams
from worker.training.baseline import Baseline
from worker.training.technique import Technique

AnyParams = BaselineParams | MercuryParams | AdaGPParams | SparseTrainParams


def build_technique(params: AnyParams) -> Technique:
    if isinstance(params, BaselineParams):
        return Baseline()
    if isinstance(params, MercuryParams):
        from worker.training.mercury import Mercury

        return Mercury(params)
    if isinstance(params, AdaGPParams):
        from worker.training.adagp import AdaGP

        return AdaGP(params)
    if isinstance(params, SparseTrainParams):
        from worker.training.sparsetrain import SparseTrain

        return SparseTrain(params)
    raise TypeError(f"unknown technique parameters {type(params).__name__}")


def build_techniques(params: list[AnyParams]) -> list[Technique]:
    """One object per named technique (each at most once); baseline alone adds nothing."""
    names = [p.name for p in params if p.name != "baseline"]
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise ValueError(f"technique given twice: {', '.join(sorted(duplicates))}")
    return [build_technique(p) for p in params if p.name != "baseline"]
