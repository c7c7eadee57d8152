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

import numba
import numpy as np
import torch
from torch import Tensor, nn

from backend.techniques.sparsetrain.params import SparseTrainParams
from worker.sim.workload import TrainingPass
from worker.training.compiled import compiled
from worker.training.layers import GemmLayer
from worker.training.recorder import MEASURE_EVERY
from worker.training.technique import EpochFigures, Step, Technique, WorkloadOps, add_extra

UNIFORM_BITS = 24  # u = (top 24 bits of a random 64-bit word) / 2^24, as NumPy's float32 uniforms
_GAMMA = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's increment: 2^64 / golden ratio, odd


def _sigma_to_tau(prune_rate: float) -> float:
    return math.sqrt(math.pi / 2) * NormalDist().inv_cdf((1 + prune_rate) / 2)


def pruning_threshold(grad: Tensor, prune_rate: float) -> float:
    """tau such that a fraction `prune_rate` of N(0, sigma^2) values lies below it in size."""
    return _mean_magnitude(_flat(grad)) * _sigma_to_tau(prune_rate)


def stochastic_prune(grad: Tensor, prune_rate: float, key: int) -> Tensor:
    """The pruned gradient at rate `prune_rate` (see `prune_at`)."""
    return prune_at(grad, pruning_threshold(grad, prune_rate), key)


def prune_at(grad: Tensor, tau: float, key: int) -> Tensor:
    """The pruned gradient: |g| >= tau unchanged, else tau*sign(g) with probability |g|/tau.

    One expression covers both cases: keep where u*tau < |g| (always true when |g| >= tau, as
    u < 1), and a kept value is sign(g)*max(|g|, tau). u = j / 2^24 is on the grid of float32
    uniforms and u*tau is computed as j * (tau / 2^24) in float32. The uniforms come from the
    64-bit `key` alone (see `_pruned`): use a different key for every call.
    """
    if not tau > 0:  # p = 0 or an all-zero gradient: nothing to prune
        return grad
    values = _flat(grad)
    pruned = torch.empty_like(grad, memory_format=torch.contiguous_format)
    step = np.float32(tau / 2**UNIFORM_BITS)
    _pruned(values, values.dtype.type(tau), step, np.uint64(key), _flat(pruned))
    return pruned


def _flat(tensor: Tensor) -> np.ndarray:
    return tensor.detach().contiguous().view(-1).numpy()


# The kernels below are single-threaded on purpose: written as plain loops LLVM vectorises them
# to a few GB/s, and a parallel region over gradients this small (at most a few MB) costs more
# than it saves, worse still on a busy machine or next to PyTorch's own threads.


@numba.njit(inline="always")
def _mix64(z: np.uint64) -> np.uint64:
    """SplitMix64's output function (Steele, Lea, Flood, OOPSLA 2014), a bijection of 64 bits."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


# reassoc lets the sum be vectorised (in an order fixed by the compiled code)
@compiled(fastmath={"reassoc"})
def _mean_magnitude(values: np.ndarray) -> float:
    """mean|g|, summed in float64."""
    total = 0.0
    for i in range(len(values)):
        total += abs(values[i])
    return total / max(len(values), 1)


@compiled()
def _pruned(
    values: np.ndarray, tau: float, step: np.float32, key: np.uint64, out: np.ndarray
) -> None:
    """The pruning rule in one pass over g. Element i's random word is the i-th output of a
    SplitMix64 generator started at mix64(key): a function of (key, i) alone, so any part of g
    could be pruned on its own (in parallel) with the same result."""
    start = _mix64(key)
    for i in range(len(values)):
        word = _mix64(start + np.uint64(i + 1) * _GAMMA)
        u_tau = np.float32(word >> np.uint64(64 - UNIFORM_BITS)) * step
        size = abs(values[i])
        kept = max(size, tau) if u_tau < size else np.float32(0.0)
        out[i] = math.copysign(kept, values[i])


@compiled()
def _measured_counts(values: np.ndarray, pruned: np.ndarray, tau: float) -> tuple[int, int, int]:
    """Non-zeros of g and of g', and values of g below tau in size: one pass."""
    natural = kept = below = 0
    for i in range(len(values)):
        natural += values[i] != 0
        kept += pruned[i] != 0
        below += abs(values[i]) < tau
    return natural, kept, below


@dataclass
class _LayerCounts:
    """Element counts on measured batches."""

    elements: int = 0
    natural_nonzero: int = 0
    kept_nonzero: int = 0
    below_threshold: int = 0

    def fraction(self, count: int) -> float:
        return count / self.elements if self.elements else 0.0


class SparseTrain(Technique):
    name = "sparsetrain"

    def __init__(self, params: SparseTrainParams) -> None:
        self.params = params
        self.seed = 0
        self.calls = 0  # pruning calls so far: with the seed, the key of the next one
        self.measuring = True  # measure the next batch that runs backward
        self.epoch: dict[str, _LayerCounts] = {}
        self.measured: dict[str, _LayerCounts] = {}  # over the whole training
        self.pruned_elements: dict[str, int] = {}  # every batch, for the workload overheads

    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        self.seed = seed

    def start_batch(self, step: Step) -> None:
        if step.index % MEASURE_EVERY == 0:
            self.measuring = True

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        if layer.name in self.params.excluded_layers:
            return grad
        # seeds are below 2^31: (seed, call) -> key is one-to-one for 2^32 calls
        tau = pruning_threshold(grad, self.params.prune_rate)
        pruned = prune_at(grad, tau, self.seed << 32 | self.calls)
        self.calls += 1
        self.pruned_elements[layer.name] = self.pruned_elements.get(layer.name, 0) + grad.numel()
        if self.measuring:
            self._measure(layer.name, grad, pruned, tau)
        return pruned

    def _measure(self, name: str, grad: Tensor, pruned: Tensor, tau: float) -> None:
        values = _flat(grad)
        natural, kept, below = _measured_counts(values, _flat(pruned), values.dtype.type(tau))
        for counts in (self.epoch, self.measured):
            entry = counts.setdefault(name, _LayerCounts())
            entry.elements += grad.numel()
            entry.natural_nonzero += natural
            entry.kept_nonzero += kept
            entry.below_threshold += below

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
