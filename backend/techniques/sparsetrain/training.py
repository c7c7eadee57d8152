"""SparseTrain: stochastic pruning of the gradient at every conv/linear output.

Rule (Ye et al., "Accelerating CNN Training by Pruning Activation Gradients", ECCV 2020): with
the gradient g of one layer in one iteration modelled as N(0, sigma^2),

    sigma = sqrt(pi/2) * mean|g|,   tau = sigma * Phi^-1((1 + p) / 2)

values with |g| >= tau stay; a smaller value becomes tau*sign(g) with probability |g|/tau and 0
otherwise, so E[g'] = g. Fresh uniform numbers every step. The pruned gradient feeds both
BWD-DATA and BWD-WEIGHT.

Which mean|g| (`threshold_from`, an open choice): tau from the gradient being pruned needs its
mean|g| before the first value is pruned, i.e. a pass over g ahead of the pruning. Hardware that
prunes inline, as g streams out of the array, only has the mean|g| of an earlier gradient. So by
default ("previous") a layer is pruned with the tau measured at its last pruned step (its own
tau on its first step, when there is none), and the mean|g| reduction runs inline on the current
g to give the next step's tau. "current" is the rule as published (what this hook did before
the knob existed).
Each layer's latest applied and measured tau are kept in `SparseTrain.thresholds` (the state
"previous" needs, and what tests read). Measured on LeNet-5/MNIST, p = 0.9, 2,000 test images
(test accuracy %, mean [95% CI over seeds]; `python benchmarks/sparsetrain_threshold.py`, and
with `--seeds 0 1 2 3 4 5 6 7 8 9 --train-samples 6000 --epochs 5`):

    3,000 images, 3 epochs, seeds 0-2     baseline 86.25 [81.12, 91.38]
      previous 82.87 [65.61, 100.12]      current 84.02 [70.50, 97.53]
      previous - current, paired: -1.15 [-4.92, +2.62] points (seed 0 is an outlier in both)
    6,000 images, 5 epochs, seeds 0-9     baseline 95.73 [95.35, 96.11]
      previous 95.63 [95.29, 95.97]       current 95.80 [95.31, 96.30]
      previous - current, paired: -0.17 [-0.45, +0.10] points

No difference is resolved (backward densities 0.027 and 0.026 in the larger run's last epoch).

The target rate p is not the realised sparsity: natural (before pruning) and artificial (after)
densities, and the share of values below the applied tau (each needs a random number), are
measured per layer on the recorder's sampled mini-batches only; the pruning itself runs on every
batch.

Cost (`annotate_workload`), on the layer's BWD-WEIGHT op, per pruned element: one add for the
mean|g| reduction and one compare with tau; a value below tau also a random number and a second
compare. These run on the column units as g leaves the array (backend.sim.extensions). With
"current" the extra pass over g is charged as one more column-unit op per element
("gradient_reads"): the workload has no way to state a bare SRAM or DRAM read, so the pass is
costed as column-unit work, elements / cols more busy cycles per execution (the units take
ceil(all their ops / cols)) and one integer add of energy per element; the energy of reading the
words from SRAM (or DRAM when g does not fit) is not charged. Under the "overlapped" extension
model the pass is hidden behind the array's time like the rest of the pruning, although the
reduction has to finish before pruning starts: the "serial" model's figure is its upper bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numba
import numpy as np
import torch
from torch import Tensor, nn

from backend.sim.workload import TrainingPass
from backend.techniques.sparsetrain.params import SparseTrainParams
from backend.training.compiled import compiled
from backend.training.layers import GemmLayer
from backend.training.recorder import MEASURE_EVERY
from backend.training.technique import EpochFigures, Step, Technique, WorkloadOps, add_extra

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


@dataclass(frozen=True)
class LayerThreshold:
    """One layer's latest pruned step: the tau it was pruned with and the tau measured on its
    gradient (the next step's with threshold_from "previous")."""

    applied: float
    measured: float


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
        self.thresholds: dict[str, LayerThreshold] = {}  # per layer, its latest pruned step

    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        self.seed = seed

    def start_batch(self, step: Step) -> None:
        if step.index % MEASURE_EVERY == 0:
            self.measuring = True

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        if layer.name in self.params.excluded_layers:
            return grad
        measured = pruning_threshold(grad, self.params.prune_rate)
        tau = measured
        last = self.thresholds.get(layer.name)
        if self.params.threshold_from == "previous" and last is not None:
            tau = last.measured
        self.thresholds[layer.name] = LayerThreshold(applied=tau, measured=measured)
        # seeds are below 2^31: (seed, call) -> key is one-to-one for 2^32 calls
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
        measured on sampled batches) also a random number and a second compare; with
        threshold_from "current" one more read of the element (see the module docstring)."""
        for name, elements in self.pruned_elements.items():
            op = ops.find(name, TrainingPass.BWD_WEIGHT)
            if op is None:
                continue
            measured = self.measured.get(name, _LayerCounts())
            below = elements * measured.fraction(measured.below_threshold)
            add_extra(op, "fp_adds", elements)
            add_extra(op, "compares", elements + below)
            add_extra(op, "random_numbers", below)
            if self.params.threshold_from == "current":
                add_extra(op, "gradient_reads", elements)
