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
        "the workload as one column-unit op per element). Accuracy on LeNet-5/MNIST, p 0.9, "
        "6,000 images, 5 epochs, seeds 0-9 (benchmarks/sparsetrain_threshold.py): previous "
        "95.63% [95.29, 95.97], current 95.80% [95.31, 96.30], baseline 95.73% "
        "[95.35, 96.11]; previous - current -0.17 points [-0.45, +0.10] paired by seed, no "
        "difference resolved",
    )
    excluded_layers: list[str] = Field(default_factory=list, description="layers never pruned")
