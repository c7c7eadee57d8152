"""SparseTrain's knobs: the pruning rate, where its threshold comes from, the layers it leaves
alone."""

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
    threshold_from: Literal["previous", "current"] = Field(
        "previous",
        description="which gradient's mean |g| sets the threshold tau a layer prunes with: "
        "'previous' (default), the one measured at the layer's last pruned step (its own on the "
        "first), what hardware pruning inline as the gradient streams can use; 'current', the "
        "gradient being pruned, which needs one more pass over it before pruning (charged in "
        "the workload as one column-unit op per element)",
    )
    excluded_layers: list[str] = Field(default_factory=list, description="layers never pruned")
