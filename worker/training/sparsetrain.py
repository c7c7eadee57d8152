"""SparseTrain: stochastic pruning of the gradient at every conv/linear output.

Rule (Ye et al., "Accelerating CNN Training by Pruning Activation Gradients", ECCV 2020): with
the gradient g of one layer in one iteration modelled as N(0, sigma^2),

    sigma = sqrt(pi/2) * mean|g|,   tau = sigma * Phi^-1((1 + p) / 2)

values with |g| >= tau stay; a smaller value becomes tau*sign(g) with probability |g|/tau and 0
otherwise, so E[g'] = g. The pruned gradient feeds both BWD-DATA and BWD-WEIGHT. The target
rate p is not the realised sparsity: natural (before pruning) and artificial (after) densities
are measured per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import torch
from torch import Tensor, nn

from backend.specs.training import SparseTrainParams
from worker.sim.workload import TrainingPass
from worker.training.layers import GemmLayer
from worker.training.technique import EpochFigures, Technique, WorkloadOps, add_extra


def pruning_threshold(grad: Tensor, prune_rate: float) -> float:
    """tau such that a fraction `prune_rate` of N(0, sigma^2) values lies below it in size."""
    sigma = math.sqrt(math.pi / 2) * float(grad.abs().mean())
    return sigma * NormalDist().inv_cdf((1 + prune_rate) / 2)


def stochastic_prune(
    grad: Tensor, prune_rate: float, generator: torch.Generator
) -> tuple[Tensor, int]:
    """The pruned gradient and how many values were below the threshold (each needed a random
    number and a second comparison)."""
    tau = pruning_threshold(grad, prune_rate)
    if tau <= 0:
        return grad, 0
    magnitude = grad.abs()
    small = magnitude < tau
    random = torch.rand(grad.shape, generator=generator, dtype=grad.dtype)
    promoted = torch.where(random < magnitude / tau, tau * torch.sign(grad), 0.0)
    return torch.where(small, promoted, grad), int(small.sum())


@dataclass
class _LayerCounts:
    elements: float = 0.0
    natural_nonzero: float = 0.0
    kept_nonzero: float = 0.0
    below_threshold: float = 0.0


class SparseTrain(Technique):
    name = "sparsetrain"

    def __init__(self, params: SparseTrainParams) -> None:
        self.params = params
        self.generator = torch.Generator()
        self.epoch: dict[str, _LayerCounts] = {}
        self.total: dict[str, _LayerCounts] = {}

    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        self.generator.manual_seed(seed + 2)

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        if layer.name in self.params.excluded_layers:
            return grad
        natural = int((grad != 0).sum())
        pruned, below = stochastic_prune(grad, self.params.prune_rate, self.generator)
        kept = int((pruned != 0).sum())
        for counts in (self.epoch, self.total):
            entry = counts.setdefault(layer.name, _LayerCounts())
            entry.elements += grad.numel()
            entry.natural_nonzero += natural
            entry.kept_nonzero += kept
            entry.below_threshold += below
        return pruned

    def epoch_figures(self) -> EpochFigures:
        per_layer = {
            name: {
                "grad_density_natural": c.natural_nonzero / c.elements,
                "grad_density_pruned": c.kept_nonzero / c.elements,
            }
            for name, c in self.epoch.items()
        }
        self.epoch = {}
        return EpochFigures(per_layer=per_layer)

    def annotate_workload(self, ops: WorkloadOps) -> None:
        """Per pruned element: one add for mean|g|, one compare with tau; below tau also a
        random number and a second compare."""
        for name, counts in self.total.items():
            op = ops.find(name, TrainingPass.BWD_WEIGHT)
            if op is None:
                continue
            add_extra(op, "fp_adds", counts.elements)
            add_extra(op, "compares", counts.elements + counts.below_threshold)
            add_extra(op, "random_numbers", counts.below_threshold)
