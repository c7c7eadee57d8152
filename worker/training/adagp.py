"""ADA-GP: alternate backpropagated (BP) and predicted (GP) gradients, adaptively.

Each conv/linear layer has a small MLP predictor. Tensor reorganisation: the output-channel
dimension is folded into the predictor's batch, so the predictor maps one channel's pooled
output features to that channel's filter gradient (C*R*S values), for all K channels at once.

- BP batch: ordinary backprop; each predictor then trains on the true gradients (MSE on the
  gradient divided by a running RMS scale, Adam), and the cosine similarity between its
  prediction and the true gradient is logged.
- GP batch: forward only (no autograd graph, no backward pass); each layer's predicted gradient
  becomes its weight gradient for the optimiser step. Biases and normalisation parameters keep
  their values on GP batches (no predictor for them).
- Calibrated scale (`calibrated_scale`, default on): a prediction is multiplied by a running
  least-squares gain <p, g>/<p, p> measured on BP batches (clamped at 0), so a predictor whose
  output is barely correlated with the true gradient takes proportionally small steps instead
  of full-size noisy ones.
- Schedule: `warmup_epochs` of BP only, then cycles of `bp_batches` BP and a GP run whose length
  grows by one when the BP batch's cosine exceeds `cos_high` and shrinks by one when it falls
  below `cos_low` or the loss rose, within [min_gp_batches, max_gp_batches]. The default
  min_gp_batches is 0 (it was 1): while predictions stay poor GP switches off entirely, since a
  forced GP batch per cycle cost LeNet-5 on digits 14 accuracy points; BP batches keep training
  the predictors and measuring the cosine, and GP resumes once the cosine exceeds cos_high.
- Features are per-channel reductions of the output (mean, std, mean |y|, fraction positive,
  batch-mean map pooled to 4 x 4), read in one compiled pass: their cost must stay small next
  to the layer's own GEMM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from backend.specs.training import AdaGPParams
from worker.sim.workload import GemmOp, TrainingPass
from worker.training.compiled import compiled
from worker.training.layers import GemmLayer
from worker.training.technique import EpochFigures, Step, Technique, WorkloadOps, add_extra

POOLED_GRID = 4  # a conv channel's output map is average-pooled to 4 x 4 (batch mean)
FEATURES = POOLED_GRID * POOLED_GRID + 4
SCALE_MOMENTUM = 0.9
LOSS_RISE_TOLERANCE = 0.1  # a BP loss this much above its running mean counts as rising


def channel_features(y: Tensor) -> Tensor:
    """(K, FEATURES) float32: per output channel, mean, std, mean |y|, fraction positive and
    (conv) the batch-mean output map average-pooled to a 4 x 4 grid (as adaptive_avg_pool2d).

    Computed on every batch for every layer, so their cost must stay small next to the layer's
    own GEMM: one compiled pass over the output, in float64, instead of a dozen tensor
    operations whose fixed costs alone matched a small layer's convolution.
    """
    values = y.detach().contiguous().numpy()
    channels = y.shape[1] if y.dim() == 4 else y.shape[-1]
    features = np.empty((channels, FEATURES), dtype=np.float32)
    if y.dim() == 4:
        _conv_features(values, features)
    else:
        _linear_features(values.reshape(-1, channels), features)
    return torch.from_numpy(features)


@numba.njit(inline="always")
def _write_stats(
    out: np.ndarray, k: int, count: int, total: float, squares: float, positives: float,
    positive_sum: float,
) -> None:  # fmt: skip
    mean = total / count
    out[k, 0] = mean
    out[k, 1] = math.sqrt(max(squares / count - mean * mean, 0.0))
    out[k, 2] = 2.0 * positive_sum / count - mean  # mean |y| = 2 E[max(y, 0)] - E[y]
    out[k, 3] = positives / count


@compiled(fastmath={"reassoc"})  # reassoc lets the sums be vectorised
def _conv_features(y: np.ndarray, out: np.ndarray) -> None:
    batch, channels, height, width = y.shape
    count = batch * height * width
    summed_map = np.empty((height, width))
    for k in range(channels):
        summed_map[:] = 0.0
        squares, positives, positive_sum = 0.0, 0.0, 0.0
        for b in range(batch):
            for h in range(height):
                for w in range(width):
                    value = np.float64(y[b, k, h, w])
                    summed_map[h, w] += value
                    squares += value * value
                    positives += 1.0 if value > 0.0 else 0.0
                    positive_sum += max(value, 0.0)
        _write_stats(out, k, count, summed_map.sum(), squares, positives, positive_sum)
        for i in range(POOLED_GRID):  # adaptive pooling: cell i spans [floor, ceil) of i/4
            top, bottom = i * height // POOLED_GRID, -(-(i + 1) * height // POOLED_GRID)
            for j in range(POOLED_GRID):
                left, right = j * width // POOLED_GRID, -(-(j + 1) * width // POOLED_GRID)
                cell = summed_map[top:bottom, left:right]
                out[k, 4 + i * POOLED_GRID + j] = cell.sum() / (cell.size * batch)


@compiled(fastmath={"reassoc"})
def _linear_features(rows: np.ndarray, out: np.ndarray) -> None:
    count, channels = rows.shape
    totals, squares = np.zeros(channels), np.zeros(channels)
    positives, positive_sums = np.zeros(channels), np.zeros(channels)
    for r in range(count):
        for k in range(channels):
            value = np.float64(rows[r, k])
            totals[k] += value
            squares[k] += value * value
            positives[k] += 1.0 if value > 0.0 else 0.0
            positive_sums[k] += max(value, 0.0)
    for k in range(channels):
        _write_stats(out, k, count, totals[k], squares[k], positives[k], positive_sums[k])
        out[k, 4:] = 0.0  # no spatial map


@dataclass
class _Predictor:
    network: nn.Sequential
    weight: nn.Parameter
    scale: Tensor | None = None  # running RMS of the true gradient
    gain: Tensor | None = None  # running least-squares gain of the prediction (calibration)
    features: Tensor | None = None
    predicted: Tensor | None = None
    output_elements: int = 0
    cosines: list[Tensor] = field(default_factory=list)  # per BP batch of this epoch

    def prediction(self, calibrated: bool) -> Tensor:
        """The predicted weight gradient for this batch's features (no autograd)."""
        assert self.features is not None and self.scale is not None
        factor = self.scale * self.gain if calibrated and self.gain is not None else self.scale
        with torch.no_grad():
            guess = self.network(self.features).mul_(factor)
        return guess.reshape(self.weight.shape)


@dataclass
class _Counts:
    bp: int = 0
    gp: int = 0
    predictor_bp: int = 0  # BP batches on which the predictors trained
    cosines: list[float] = field(default_factory=list)


def _blend(running: Tensor, new: Tensor) -> Tensor:
    return SCALE_MOMENTUM * running + (1 - SCALE_MOMENTUM) * new


class AdaGP(Technique):
    name = "adagp"

    def __init__(self, params: AdaGPParams) -> None:
        self.params = params
        self.predictors: dict[str, _Predictor] = {}
        self.gp_run = params.gp_batches
        self.phase_is_gp = True
        self.phase_left = 0
        self.predicting = False  # this batch is a GP batch
        self.loss_mean: float | None = None
        self.optimizer: torch.optim.Optimizer | None = None  # one Adam over all predictors
        self.epoch = _Counts()
        self.total = _Counts()

    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        with torch.random.fork_rng():
            torch.manual_seed(seed + 4)
            for layer in layers:
                outputs = layer.weight[0].numel()
                network = nn.Sequential(
                    nn.Linear(FEATURES, self.params.predictor_hidden),
                    nn.ReLU(),
                    nn.Linear(self.params.predictor_hidden, outputs),
                )
                self.predictors[layer.name] = _Predictor(network, layer.weight)
        # Adam is element-wise, so one optimiser stepping every predictor on the sum of their
        # losses equals one per predictor, with one backward and one step per batch; fused, the
        # step is one kernel over all predictors instead of a Python loop over their tensors.
        parameters = [p for pr in self.predictors.values() for p in pr.network.parameters()]
        if parameters:
            self.optimizer = torch.optim.Adam(parameters, lr=self.params.predictor_lr, fused=True)

    def start_batch(self, step: Step) -> None:
        if step.epoch < self.params.warmup_epochs:
            self.predicting = False
            return
        if self.phase_left == 0:
            self.phase_is_gp = not self.phase_is_gp and self.gp_run > 0
            self.phase_left = self.gp_run if self.phase_is_gp else self.params.bp_batches
        self.phase_left -= 1
        self.predicting = self.phase_is_gp

    def runs_backward(self, step: Step) -> bool:
        return not self.predicting

    def after_forward(self, layer: GemmLayer, x: Tensor, y: Tensor) -> None:
        predictor = self.predictors.get(layer.name)
        if predictor is None:
            return
        predictor.features = channel_features(y.detach())
        predictor.output_elements += y.numel()
        if self.predicting and predictor.scale is not None:
            predictor.predicted = predictor.prediction(self.params.calibrated_scale)

    def before_step(self, step: Step, backward_ran: bool, loss: float) -> None:
        if not backward_ran:
            for predictor in self.predictors.values():
                predictor.weight.grad = predictor.predicted
                predictor.predicted = None
            self.epoch.gp += 1
            self.total.gp += 1
            return
        cosine = self._train_predictors()
        self.epoch.bp += 1
        self.total.bp += 1
        if cosine is not None:
            self.epoch.cosines.append(cosine)
            self.total.predictor_bp += 1
            if step.epoch >= self.params.warmup_epochs:
                self._adapt(cosine, loss)
        self.loss_mean = loss if self.loss_mean is None else 0.9 * self.loss_mean + 0.1 * loss

    def _train_predictors(self) -> float | None:
        """One Adam step per predictor on this batch's true gradients; the cosine similarity
        of all predicted (before the step) and true weight gradients."""
        trained: list[_Predictor] = []
        losses: list[Tensor] = []
        products: list[Tensor] = []  # per predictor: <guess, target>, |guess|^2, |true|^2
        for predictor in self.predictors.values():
            grad = predictor.weight.grad
            if grad is None or predictor.features is None:
                continue
            true = grad.reshape(grad.shape[0], -1)
            true_squares = torch.vdot(grad.reshape(-1), grad.reshape(-1))
            if predictor.scale is None:
                rms = (true_squares / grad.numel()).sqrt()
                predictor.scale = torch.where(rms > 0, rms, 1.0)
            guess = predictor.network(predictor.features)
            target = true / predictor.scale
            losses.append(F.mse_loss(guess, target))
            flat_guess = guess.detach().reshape(-1)
            products += [
                torch.vdot(flat_guess, target.reshape(-1)),
                torch.vdot(flat_guess, flat_guess),
                true_squares,
            ]
            trained.append(predictor)
        if not losses or self.optimizer is None:
            return None
        self.optimizer.zero_grad(set_to_none=True)
        torch.stack(losses).sum().backward()
        self.optimizer.step()
        with torch.no_grad():
            return self._update_running(trained, *torch.stack(products).reshape(-1, 3).unbind(1))

    @staticmethod
    def _update_running(
        trained: list[_Predictor], dots: Tensor, guess_squares: Tensor, true_squares: Tensor
    ) -> float:
        """Cosines, gains and RMS scales of all trained predictors at once (vectors with one
        entry per predictor); returns the overall cosine."""
        scales = torch.stack([p.scale for p in trained if p.scale is not None])
        target_squares = true_squares / scales.square()
        cosines = dots / ((guess_squares * target_squares).sqrt() + 1e-30)
        gains = (dots / (guess_squares + 1e-30)).clamp_min_(0.0)
        known = [p.gain is not None for p in trained]
        if any(known):  # a predictor's first gain is its first measurement
            pairs = zip(trained, gains, strict=True)
            previous = torch.stack([g if p.gain is None else p.gain for p, g in pairs])
            gains = torch.where(torch.tensor(known), _blend(previous, gains), gains)
        sizes = torch.tensor([p.weight.numel() for p in trained], dtype=scales.dtype)
        scales = _blend(scales, (true_squares / sizes).sqrt())
        columns = (scales.unbind(), gains.unbind(), cosines.unbind())
        for predictor, scale, gain, cosine in zip(trained, *columns, strict=True):
            predictor.scale, predictor.gain = scale, gain
            predictor.cosines.append(cosine)
        norms = (guess_squares.sum() * target_squares.sum()).sqrt()
        return float(dots.sum() / norms.clamp_min(1e-30))

    def _adapt(self, cosine: float, loss: float) -> None:
        rising = self.loss_mean is not None and loss > self.loss_mean * (1 + LOSS_RISE_TOLERANCE)
        if cosine < self.params.cos_low or rising:
            self.gp_run = max(self.gp_run - 1, self.params.min_gp_batches)
        elif cosine > self.params.cos_high:
            self.gp_run = min(self.gp_run + 1, self.params.max_gp_batches)

    def epoch_figures(self) -> EpochFigures:
        counts, self.epoch = self.epoch, _Counts()
        batches = counts.bp + counts.gp
        scalars = {"gp_fraction": counts.gp / batches if batches else 0.0}
        if counts.cosines:
            scalars["cosine_similarity"] = sum(counts.cosines) / len(counts.cosines)
        per_layer: dict[str, dict[str, float]] = {}
        for name, predictor in self.predictors.items():
            if predictor.cosines:
                per_layer[name] = {"cosine": float(torch.stack(predictor.cosines).mean())}
            predictor.cosines = []
        return EpochFigures(scalars, per_layer)

    def annotate_workload(self, ops: WorkloadOps) -> None:
        """Predictor GEMMs (on the predictor unit when the accelerator has one): FWD on every
        batch, training on BP batches; GP batches' weight updates."""
        hidden = self.params.predictor_hidden
        batches = self.total.bp + self.total.gp
        for name, predictor in self.predictors.items():
            channels, outputs = predictor.weight.shape[0], predictor.weight[0].numel()

            def op(suffix: str, pass_: TrainingPass, shape: tuple[int, int, int], runs: int,
                   layer: str = name) -> GemmOp:  # fmt: skip
                m, k, n = shape
                return GemmOp(
                    layer=f"{layer}.predictor.{suffix}", pass_=pass_, m=m, k=k, n=n,
                    executions=runs, role="overhead", runs_on="predictor",
                )  # fmt: skip

            trained = self.total.predictor_bp
            first = op("fc1", TrainingPass.FWD, (channels, FEATURES, hidden), batches)
            second = op("fc2", TrainingPass.FWD, (channels, hidden, outputs), batches)
            add_extra(first, "fp_adds", predictor.output_elements)  # pooling the features
            add_extra(second, "weight_updates", self.total.gp * predictor.weight.numel())
            for new in (
                first,
                second,
                op("fc2", TrainingPass.BWD_DATA, (channels, outputs, hidden), trained),
                op("fc2", TrainingPass.BWD_WEIGHT, (outputs, channels, hidden), trained),
                op("fc1", TrainingPass.BWD_WEIGHT, (hidden, channels, FEATURES), trained),
            ):
                if new.executions:
                    ops.add(new)
