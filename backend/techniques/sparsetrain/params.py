"""SparseTrain's knobs: the pruning rate and the layers it leaves alone."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from backend.specs.training import Spec


class SparseTrainParams(Spec):
    """SparseTrain: stochastic pruning of output gradients, zero-skipping dataflow."""

    name: Literal["sparsetrain"] = "sparsetrain"
    prune_rate: float = Field(
        0.9, ge=0, lt=1, description="target pruning rate p (not the realised sparsity)"
    )
    excluded_layers: list[str] = Field(default_factory=list, description="layers never pruned")
