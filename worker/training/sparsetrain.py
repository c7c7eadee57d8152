"""SparseTrain: stochastic pruning of the gradient at every conv/linear output.

Rule (Ye et al., "Accelerating CNN Training by Pruning Activation Gradients", ECCV 2020): with
the gradient g of one layer in one iteration modelled as N(0, sigma^2),

    sigma = sqrt(pi/2) * mean|g|,   tau = sigma * Phi^-1((1 + p) / 2)

values with |g| >= tau stay; a smaller value becomes tau*sign(g) with probability |g|/tau and 0
otherwise, so E[g'] = g. Fresh uniform numbers every step. The pruned gradient feeds both
BWD-DATA and BWD-WEIGHT.

The target rate p is not the realised sparsity: natural (before pruning) and artificial (after)
densities, and the share of values below tau (each needs a random number), are measured per
layer on the recorder's sampled mini-batches only; the pruning itself runs on every batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import torch
from torch import Tensor, nn

from backend.specs.training import SparseTrainParams
from worker.sim.workload import TrainingPass
from worker.training.layers import GemmLayer
from worker.training.recorder import MEASURE_EVERY
from worker.training.sparsity import count, nonzero_mask
from worker.training.technique import EpochFigures, Step, Technique, WorkloadOps, add_extra


def _sigma_to_tau(prune_rate: float) -> float:
    return math.sqrt(math.pi / 2) * NormalDist().inv_cdf((1 + prune_rate) / 2)


def pruning_threshold(grad: Tensor, prune_rate: float) -> float:
    """tau such that a fraction `prune_rate` of N(0, sigma^2) values lies below it in size."""
    return float(grad.abs().mean()) * _sigma_to_tau(prune_rate)


UNIFORM_BITS = 24  # as NumPy's float32 uniforms: u = (top 24 bits of a 32-bit word) / 2^24


def uniform_draws(rng: np.random.Generator, size: int) -> Tensor:
    """`size` integers j uniform on [0, 2^24), i.e. u = j / 2^24 on the grid of float32
    uniforms; from raw generator words, several times faster than NumPy's float path."""
    words = rng.bit_generator.random_raw((size + 1) // 2).view(np.uint32)[:size]
    np.right_shift(words, 32 - UNIFORM_BITS, out=words)
    return torch.from_numpy(words.view(np.int32))


def stochastic_prune(grad: Tensor, prune_rate: float, rng: np.random.Generator) -> Tensor:
    """The pruned gradient: |g| >= tau unchanged, else tau*sign(g) with probability |g|/tau.

    One expression covers both cases: keep where u*tau < |g| (always true when |g| >= tau, as
    u < 1), and a kept value is sign(g)*max(|g|, tau). u*tau is j * (tau / 2^24) in float32,
    the same product as NumPy's float32 u = j / 2^24 times tau; the test is written as a float
    0/1 mask, as bool tensors are several times slower on CPU.
    """
    magnitude = grad.abs()
    tau = float(magnitude.mean()) * _sigma_to_tau(prune_rate)
    if not tau > 0:  # p = 0 or an all-zero gradient: nothing to prune
        return grad
    draws = uniform_draws(rng, grad.numel()).reshape(grad.shape)
    thresholds = torch.mul(draws, tau / 2**UNIFORM_BITS)  # u * tau, as float32
    keep = torch.lt(thresholds, magnitude, out=thresholds)
    return magnitude.clamp_min_(tau).mul_(keep).copysign_(grad)


@dataclass
class _LayerCounts:
    """Element counts on measured batches (tensors, read only at the epoch's end)."""

    elements: float = 0.0
    natural_nonzero: Tensor | float = 0.0
    kept_nonzero: Tensor | float = 0.0
    below_threshold: Tensor | float = 0.0

    def fraction(self, count: Tensor | float) -> float:
        return float(count) / self.elements if self.elements else 0.0


class SparseTrain(Technique):
    name = "sparsetrain"

    def __init__(self, params: SparseTrainParams) -> None:
        self.params = params
        self.rng = np.random.default_rng()
        self.measuring = True  # measure the next batch that runs backward
        self.epoch: dict[str, _LayerCounts] = {}
        self.measured: dict[str, _LayerCounts] = {}  # over the whole training
        self.pruned_elements: dict[str, int] = {}  # every batch, for the workload overheads

    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        self.rng = np.random.Generator(np.random.SFC64(seed + 2))  # NumPy's fastest raw words

    def start_batch(self, step: Step) -> None:
        if step.index % MEASURE_EVERY == 0:
            self.measuring = True

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        if layer.name in self.params.excluded_layers:
            return grad
        pruned = stochastic_prune(grad, self.params.prune_rate, self.rng)
        self.pruned_elements[layer.name] = self.pruned_elements.get(layer.name, 0) + grad.numel()
        if self.measuring:
            self._measure(layer.name, grad, pruned)
        return pruned

    def _measure(self, name: str, grad: Tensor, pruned: Tensor) -> None:
        with torch.no_grad():
            natural = count(nonzero_mask(grad))
            kept = count(nonzero_mask(pruned))
            tau = pruning_threshold(grad, self.params.prune_rate)
            below = count(torch.lt(grad.abs(), tau, out=torch.empty_like(grad)))
        for counts in (self.epoch, self.measured):
            entry = counts.setdefault(name, _LayerCounts())
            entry.elements += grad.numel()
            entry.natural_nonzero = entry.natural_nonzero + natural
            entry.kept_nonzero = entry.kept_nonzero + kept
            entry.below_threshold = entry.below_threshold + below

    def before_step(self, step: Step, backward_ran: bool, loss: float) -> None:
        if backward_ran:
            self.measuring = False

    def epoch_figures(self) -> EpochFigures:
        per_layer = {
            name: {
                "grad_density_natural": c.fraction(c.natural_nonzero),
                "grad_density_pruned": c.fraction(c.kept_nonzero),
            }
            for name, c in self.epoch.items()
        }
        self.epoch = {}
        return EpochFigures(per_layer=per_layer)

    def annotate_workload(self, ops: WorkloadOps) -> None:
        """Per pruned element: one add for mean|g|, one compare with tau; below tau (share
        measured on sampled batches) also a random number and a second compare."""
        for name, elements in self.pruned_elements.items():
            op = ops.find(name, TrainingPass.BWD_WEIGHT)
            if op is None:
                continue
            measured = self.measured.get(name, _LayerCounts())
            below = elements * measured.fraction(measured.below_threshold)
            add_extra(op, "fp_adds", elements)
            add_extra(op, "compares", elements + below)
            add_extra(op, "random_numbers", below)
