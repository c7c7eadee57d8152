"""ADA-GP: alternate backpropagated (BP) and predicted (GP) gradients, adaptively.

A GP batch runs the forward pass only: no autograd graph, no BWD-DATA, no backward through the
network; each conv/linear layer's weight (and bias) gradient comes from its predictor and the
optimiser steps on it. A BP batch is ordinary backprop; its true gradients train (or refresh)
the predictors and measure how good their predictions are.

Predictors (`predictor`):
- `feedback` (default): per sample, the gradient at the layer's output is predicted from the
  output error e = softmax(logits) - onehot(label) (the labels enter here) through a learned
  per-position linear map, gated per element by a learned sigmoid of the layer's own output
  (where the downstream ReLU is off no gradient flows):  dy_pred = (e B_l) * sigmoid(a_k y + c_k).
  The weight gradient is then formed on the array, dW = dy_pred x^T, a real BWD-WEIGHT GEMM; only
  BWD-DATA is skipped. B_l (zero at the start), a and c are trained by regression (MSE on the
  gradient divided by its running RMS, Adam, the gradients in closed form) on the true output
  gradients of BP batches, as synthetic gradients are (Jaderberg et al. 2017); it is learned
  direct feedback (Nokland 2016 uses a fixed random B). Per layer it sees what determines
  dW = sum dy x^T: each sample's input x, its output y and, through e, its label. Measured on
  LeNet-5/MNIST its cosine with the true dW is 0.3-0.5 (convs), 0.5-0.75 (hidden linear
  layers) and 0.96+ (classifier), against 0.1-0.45 for the previous BP batch's gradient.
  BatchNorm (`normalized_projection`): a layer whose output y feeds a BatchNorm (found by a
  forward pre-hook seeing y arrive) gets dy_pred projected as BatchNorm's backward projects the
  true gradient, per channel dy - mean(dy) - y_hat mean(dy y_hat). The true dy has neither a
  per-channel mean nor a component along y_hat (the normalisation discards y's shift and
  scale), so the true dW is orthogonal to each output channel's weights; unprojected, dy_pred
  keeps a per-channel mean, which after ReLU inputs (x >= 0) puts a large spurious sum(x) term
  into every channel's dW_pred. Measured on ResNet-8/Fashion-MNIST (seed 0, GP batches, true
  gradient computed alongside by benchmarks/adagp_gp_batches.py): the convs' cosine with the
  true dW rose from 0.08-0.35 to 0.20-0.74. The predictor is trained through the projection
  (its MSE is on the projected output; the target already lies in that subspace). Cost: 9 ops
  per output element (centring, three per-channel sums, a multiply-add, a subtraction) on the
  batches that form dy_pred (`projection_ops`).
  BatchNorm's own scale and shift get no gradient on GP batches (no backward reaches them);
  the optimiser skips them (no momentum, no weight decay), and their running statistics update
  in the GP batch's ordinary training-mode forward. Measured on ResNet-8 (seeds 0-2):
  replacing the predicted conv and linear gradients on GP batches by the true ones, BatchNorm
  still frozen, gives -0.1 points on average against the baseline (-0.4 at worst), against
  -0.7 with the predictions: the accuracy GP costs comes mostly from the predictions. The
  measured frontier (GP fraction against accuracy, per design) is in
  benchmarks/adagp_frontier.py.
- `history`: the prediction is a running mean (momentum `history_momentum`) of the layer's true
  gradients on BP batches, refreshed by every true gradient; no GEMM, a multiply-add per weight
  per BP batch. Measured under SGD with momentum 0.9 its cosine with the next true gradient is
  negative (-0.05 to -0.13 on LeNet-5/MNIST): the optimiser's momentum has already followed the
  mean, the next gradient pushes back, so the adaptive rule keeps it off.
- `none`: a control; GP batches predict zero (the optimiser's momentum still moves weights), to
  tell what a predictor adds over merely skipping batches.

Calibration (`calibrated_scale`): a layer's predicted gradient p is rescaled to the norm
max(cos, 0) |g|, cos the layer's smoothed predicted cosine and |g| the running norm of its true
gradient on BP batches: the least-squares step along the prediction (<p, g>/<p, p> p) with its
terms averaged over batches, so a predictor barely correlated with the true gradient takes
proportionally small steps and no step is longer than a true gradient (a running gain
<p, g>/<p, p> applied to a later, larger p let long GP runs diverge).

Adaptive rule. On every `cosine_every`-th BP batch the cosine between the predicted and the
true weight gradient (all layers concatenated) is measured; on every BP batch so is a reference
measured in the same run: the cosine between the previous BP batch's true gradient and this
one's (what "reuse the last gradient" would reach). Both are smoothed per layer over BP batches
(momentum `cosine_momentum`), and the rule looks at the worst layer: a layer's predictions
matter as much as its gradient's share of the update, and the cosine of all layers concatenated
is dominated by the layer with the largest gradient (the classifier, predicted almost exactly),
which hid BatchNorm convs predicted at cosine 0.03 on ResNet-8. GP may act only after
`warmup_epochs` and once the training loss has flattened: an epoch whose mean training loss
dropped by less than `plateau_improvement` x a reference opens GP for the rest of the run (it
acts where it hurts least). The reference (`plateau_reference`) is the largest epoch-to-epoch
drop of the run so far ("largest_drop": the loss curve's slope against its own steepest, so a
loss decaying geometrically towards zero counts as flat once its drops are small) or the
previous epoch's loss ("previous_loss": a relative improvement; measured on LeNet-5/MNIST, 6,400
images, the loss falls 28-42% per epoch to the tenth epoch, so GP never acted there). Then
cycles of `bp_batches` BP and a GP run whose length grows by one when every layer's smoothed
predicted cosine reaches `lengthen_ratio` x its smoothed reference (negative references count
as 0) and shrinks by one when some layer's falls below `shorten_ratio` x its reference or the
loss rose, within [min_gp_batches, max_gp_batches].

GP fraction: per epoch, that epoch's GP batches over its batches (warm-up epochs report 0.0), so
the run's fraction, GP batches over all batches with warm-up included, is the mean over epochs
(the `gp_fraction` figure's `over_training`, backend/techniques/adagp/__init__.py). Per layer
and epoch, `cosine` and `reference_cosine` (means over the epoch's BP batches) are stored in the
epoch's per-layer figures.

What the workload charges (annotate_workload):
- the recorder counts FWD on every batch and BWD-DATA / BWD-WEIGHT on BP batches only, so GP
  batches' backward passes are skipped MACs;
- `feedback`: on GP batches the dW = dy_pred x^T product ran, so the layer's BWD-WEIGHT compute
  GEMM gets those executions too (its operand density becomes the execution-weighted mean of the
  measured true-gradient density and 1.0 for the dense predicted gradient); on BP batches the
  same product is formed to measure the cosine, an overhead GEMM on the array; the predictor's
  GEMMs run on the predictor unit: e B_l (FWD, every batch: the prediction is formed on GP
  batches and for training on BP batches) and its weight gradient (BWD-WEIGHT, BP batches); the
  gate's elementwise work and the BatchNorm projection are extra ops, and so is the training
  step's (`training_ops`: the residual, the gate's derivative, the sums for a and c and, for a
  layer feeding a BatchNorm, the residual's projection);
- every predictor: the reference on every BP batch is three dot products over the layer's
  weights (a predictor-unit GEMM m=1, k=weights, n=3) plus a copy of the true gradient kept
  for the next one (`result_copies`); the predicted cosine two more (n=2) on the measured
  batches; the weight update of GP batches (the recorder charges BP batches' only) and the
  `history` running-mean refresh are `weight_updates` extra ops.
  The predictors' Adam step is charged as four `weight_updates` per predictor parameter per BP
  batch. The output error needs no extra work: its softmax is the loss's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from backend.techniques.adagp.feedback_kernels import (
    ChannelMoments,
    gated_product,
    predictor_gradients,
)
from backend.techniques.adagp.params import AdaGPParams
from worker.sim.workload import GemmOp, TrainingPass
from worker.training.layers import GemmLayer
from worker.training.technique import EpochFigures, Step, Technique, WorkloadOps, add_extra

LOSS_RISE_TOLERANCE = 0.1  # a BP loss this much above its running mean counts as rising
NORM_MOMENTUM = 0.9  # running norm of the true gradient
COSINE_DOTS = 5  # <p, g>, <p, p>, <g, g>, <g_prev, g>, <g_prev, g_prev>
# BatchNorm projection per output element: centring y, the three per-channel sums (y^2, dy,
# dy y), the multiply-add and the subtraction
PROJECTION_OPS = 9
# the predictor's training step per output element (`_Feedback.set_gradients`): the residual
# (a multiply-add and a scaling), its product with the gate, the gate's derivative (1 - gate,
# two products), the two per-channel sums for a and c (a multiply-add and an add); a layer
# feeding a BatchNorm also projects the residual (two sums, a subtraction, a multiply-add)
TRAINING_OPS = 10
PROJECTION_BACKWARD_OPS = 6


def _blend(momentum: float, running: Any, new: Any) -> Any:  # floats or tensors
    return momentum * running + (1 - momentum) * new


def _cosine(dot: Tensor, a_squares: Tensor, b_squares: Tensor) -> Tensor:
    return dot / (a_squares * b_squares).sqrt().clamp_min(1e-30)


@dataclass
class _Prediction:
    """One layer's `feedback` prediction on one batch: dy_pred = P((e B) * sigmoid(a y + c)),
    P the BatchNorm projection or the identity, before the running scale, and its per-channel
    sums. A BP batch keeps the factors for the predictor's training step."""

    output: Tensor
    channel_sums: np.ndarray
    direct: Tensor | None = None  # e B
    gate: Tensor | None = None  # sigmoid(a y + c)
    moments: ChannelMoments | None = None  # y's, when projected


@dataclass
class _Feedback:
    """The `feedback` predictor of one layer: dy_pred = (e B) * sigmoid(a y + c), projected
    when y feeds a BatchNorm. The output-sized arithmetic runs fused (feedback_kernels.py)."""

    projection: nn.Parameter  # B: (classes, output elements per sample)
    gate_scale: nn.Parameter  # a: (channels,)
    gate_shift: nn.Parameter  # c: (channels,)
    scale: Tensor | None = None  # running RMS of the true output gradient

    def parameters(self) -> list[nn.Parameter]:
        return [self.projection, self.gate_scale, self.gate_shift]

    @staticmethod
    def channel(is_conv: bool) -> int:
        """The gate's channels: dim 1 of a conv's (B, K, H, W), a linear output's last dim."""
        return 1 if is_conv else -1

    @torch.no_grad()
    def predict(
        self, error: Tensor, y: Tensor, is_conv: bool, eps: float | None, for_training: bool
    ) -> _Prediction:
        """dy_pred on this batch; `eps` is that of the BatchNorm y feeds (None: none)."""
        channel = self.channel(is_conv)
        direct = (error @ self.projection).view(y.shape)
        shape = [1] * y.dim()
        shape[channel] = -1
        gate = torch.addcmul(self.gate_shift.view(shape), y, self.gate_scale.view(shape))
        gate.sigmoid_()
        output, sums, moments = gated_product(direct, gate, y, channel, eps)
        if not for_training:
            return _Prediction(output, sums)
        return _Prediction(output, sums, direct, gate, moments)

    @torch.no_grad()
    def set_gradients(
        self, prediction: _Prediction, error: Tensor, y: Tensor, target: Tensor, is_conv: bool
    ) -> None:
        """The gradients of MSE(dy_pred, target / scale) on B, a and c, in closed form (the
        same as autograd's, tested against it). With r the MSE's gradient at dy_pred, P r
        reaches the gated product; e B gets P r * gate, the gate's pre-activation
        P r * gate * (1 - gate) * e B."""
        direct, gate = prediction.direct, prediction.gate
        assert direct is not None and gate is not None and self.scale is not None
        through, self.gate_scale.grad, self.gate_shift.grad = predictor_gradients(
            prediction.output, target, 1.0 / float(self.scale), direct, gate, y,
            self.channel(is_conv), prediction.moments,
        )  # fmt: skip
        self.projection.grad = error.T @ through.view(len(error), -1)


@dataclass
class _Formed:
    """`feedback` on one batch: the prediction, its running scale (kept apart: it multiplies
    the small weight gradient rather than the output-sized dy) and the weight gradient formed
    from it on the array."""

    prediction: _Prediction
    scale: Tensor | float
    weight_grad: Tensor | None

    def bias_grad(self, dtype: torch.dtype) -> Tensor:
        return torch.from_numpy(self.prediction.channel_sums).to(dtype) * self.scale


@dataclass
class _LayerState:
    layer: GemmLayer
    normalization: nn.modules.batchnorm._BatchNorm | None = None  # the BatchNorm fed by y
    history: Tensor | None = None  # running mean of true weight gradients (`history`)
    bias_history: Tensor | None = None
    previous: Tensor | None = None  # last BP batch's true weight gradient (the reference)
    cosine_mean: float | None = None  # smoothed predicted cosine
    reference_mean: float | None = None  # smoothed reference cosine
    grad_norm: float | None = None  # running norm of the true weight gradient
    feedback: _Feedback | None = None
    x: Tensor | None = None  # this batch's input and output (`feedback`)
    y: Tensor | None = None
    output: Tensor | None = None  # y as it leaves the layer (to recognise its BatchNorm)
    true_output_grad: Tensor | None = None
    output_elements: int = 0  # summed over the training (`feedback` gate work)
    cosines: list[Tensor] = field(default_factory=list)  # this epoch's BP batches
    references: list[Tensor] = field(default_factory=list)

    @property
    def weight(self) -> nn.Parameter:
        return self.layer.weight

    @property
    def bias(self) -> Tensor | None:
        return self.layer.inner.bias


@dataclass
class _Counts:
    bp: int = 0
    gp: int = 0
    loss_sum: float = 0.0
    cosines: list[float] = field(default_factory=list)


class AdaGP(Technique):
    name = "adagp"

    def __init__(self, params: AdaGPParams) -> None:
        self.params = params
        self.states: dict[str, _LayerState] = {}
        self.gp_run = params.gp_batches
        self.phase_is_gp = True
        self.phase_left = 0
        self.predicting = False  # this batch is a GP batch
        self.gp_open = params.plateau_improvement >= 1.0  # the loss has flattened: GP may act
        self.previous_epoch_loss: float | None = None
        self.largest_drop = 0.0  # the largest epoch-to-epoch drop of the mean training loss
        self.loss_mean: float | None = None
        self.labels: Tensor | None = None
        self.logits: Tensor | None = None
        self.optimizer: torch.optim.Optimizer | None = None  # Adam over `feedback` predictors
        self.epoch = _Counts()
        self.total = _Counts()
        # per layer: BP batches on which the predicted / reference cosine was measured
        self.predicted_measurements: dict[str, int] = {}
        self.reference_measurements: dict[str, int] = {}
        self.predictor_trainings = 0  # BP batches on which `feedback` predictors trained
        self.weight_formations: dict[str, int] = {}  # BP batches that formed dW_pred (measuring)

    # -- setup and schedule --------------------------------------------------------------------
    def setup(self, model: nn.Module, layers: list[GemmLayer], seed: int) -> None:
        self.states = {layer.name: _LayerState(layer) for layer in layers}
        if self.params.predictor == "feedback" and self.params.normalized_projection:
            for module in model.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    module.register_forward_pre_hook(self._note_normalization)

    def _note_normalization(self, norm: nn.Module, inputs: tuple[Tensor, ...]) -> None:
        """A BatchNorm's input that is a GEMM layer's output marks that layer as normalized."""
        for state in self.states.values():
            if state.output is not None and inputs[0] is state.output:
                state.normalization = norm  # type: ignore[assignment]

    def start_batch(self, step: Step) -> None:
        self.labels = step.labels
        if step.epoch < self.params.warmup_epochs or not self.gp_open:
            self.predicting = False
            return
        if self.phase_left == 0:
            self.phase_is_gp = not self.phase_is_gp and self.gp_run > 0
            self.phase_left = self.gp_run if self.phase_is_gp else self.params.bp_batches
        self.phase_left -= 1
        self.predicting = self.phase_is_gp

    def runs_backward(self, step: Step) -> bool:
        return not self.predicting

    def end_epoch(self, epoch: int, validation_loss: float) -> None:
        batches = self.epoch.bp + self.epoch.gp
        if not batches:
            return
        loss = self.epoch.loss_sum / batches
        previous, self.previous_epoch_loss = self.previous_epoch_loss, loss
        if previous is None or previous <= 0:
            return
        drop = previous - loss
        self.largest_drop = max(self.largest_drop, drop)
        if epoch + 1 < self.params.warmup_epochs:
            return
        reference = (
            previous if self.params.plateau_reference == "previous_loss" else self.largest_drop
        )
        if reference > 0 and drop < self.params.plateau_improvement * reference:
            self.gp_open = True

    # -- per layer -----------------------------------------------------------------------------
    def after_forward(self, layer: GemmLayer, x: Tensor, y: Tensor) -> None:
        state = self.states.get(layer.name)
        if state is None:
            return
        self.logits = y  # the last GEMM layer's output is the classifier's logits
        if self.params.predictor == "feedback":
            state.x, state.y, state.output = x.detach(), y.detach(), y
            state.output_elements += y.numel()

    def output_grad(self, layer: GemmLayer, grad: Tensor) -> Tensor:
        state = self.states.get(layer.name)
        if state is not None and self.params.predictor == "feedback":
            state.true_output_grad = grad.detach()
        return grad

    # -- the step ------------------------------------------------------------------------------
    def before_step(self, step: Step, backward_ran: bool, loss: float) -> None:
        self.epoch.loss_sum += loss
        if not backward_ran:
            self._predict()
            self.epoch.gp += 1
            self.total.gp += 1
        else:
            cosine = self._learn()
            self.epoch.bp += 1
            self.total.bp += 1
            if cosine is not None:
                self.epoch.cosines.append(cosine)
            self._adapt(loss)
            self.loss_mean = loss if self.loss_mean is None else 0.9 * self.loss_mean + 0.1 * loss
        self._forget_batch()

    def _forget_batch(self) -> None:
        self.logits = self.labels = None
        for state in self.states.values():
            state.x = state.y = state.output = state.true_output_grad = None

    def _output_error(self) -> Tensor:
        """dL/dlogits of the mean cross-entropy: (softmax - onehot) / batch."""
        assert self.logits is not None and self.labels is not None
        logits = self.logits.detach().reshape(len(self.labels), -1)
        error = torch.softmax(logits, 1)
        error[torch.arange(len(self.labels)), self.labels] -= 1.0
        return error / len(self.labels)

    def _feedback_of(self, state: _LayerState, classes: int) -> _Feedback:
        if state.feedback is None:
            assert state.y is not None
            channels = state.y.shape[1] if state.layer.is_conv else state.y.shape[-1]
            per_sample = state.y[0].numel()
            state.feedback = _Feedback(
                nn.Parameter(torch.zeros(classes, per_sample)),
                nn.Parameter(torch.zeros(channels)),
                nn.Parameter(torch.zeros(channels)),
            )
        return state.feedback

    def _predicted_weight_grads(
        self, error: Tensor, for_training: bool, form_weight: bool = True
    ) -> dict[str, _Formed]:
        """`feedback`: per layer, the predicted output gradient from the output error and (if
        `form_weight`) the weight gradient formed from it."""
        out: dict[str, _Formed] = {}
        for name, state in self.states.items():
            if state.y is None or state.x is None:
                continue
            feedback = self._feedback_of(state, error.shape[1])
            eps = state.normalization.eps if state.normalization is not None else None
            prediction = feedback.predict(error, state.y, state.layer.is_conv, eps, for_training)
            scale = feedback.scale if feedback.scale is not None else 1.0
            formed = None
            if form_weight:
                formed = weight_grad(state.layer.inner, state.x, prediction.output).mul_(scale)
                if for_training:  # a BP batch: formed only to measure the cosine
                    self.weight_formations[name] = self.weight_formations.get(name, 0) + 1
            out[name] = _Formed(prediction, scale, formed)
        return out

    def _predict(self) -> None:
        """GP batch: every layer's predicted gradient becomes its `.grad`."""
        predictor = self.params.predictor
        formed = (
            self._predicted_weight_grads(self._output_error(), False)
            if predictor == "feedback"
            else {}
        )
        for name, state in self.states.items():
            bias = state.bias
            if predictor == "history" and state.history is not None:
                gain = self._gain(state, state.history)
                state.weight.grad = state.history * gain
                if bias is not None and state.bias_history is not None:
                    bias.grad = state.bias_history * gain
            elif predictor == "feedback" and name in formed:
                weight_grad = formed[name].weight_grad
                assert weight_grad is not None
                gain = self._gain(state, weight_grad)
                state.weight.grad = weight_grad.mul_(gain)
                if bias is not None:
                    bias.grad = formed[name].bias_grad(bias.dtype) * gain
            elif predictor == "none":
                state.weight.grad = torch.zeros_like(state.weight)

    def _gain(self, state: _LayerState, prediction: Tensor) -> float:
        """The factor that takes a prediction to the calibrated norm max(cos, 0) |g|."""
        if not self.params.calibrated_scale:
            return 1.0
        if state.cosine_mean is None or state.grad_norm is None:
            return 0.0  # not yet measured: no step
        norm = float(prediction.norm())
        return max(state.cosine_mean, 0.0) * state.grad_norm / norm if norm > 0 else 0.0

    def _learn(self) -> float | None:
        """BP batch: measure the reference (every BP batch) and, on every `cosine_every`-th BP
        batch, the predictions against the true gradients; then refresh (history) or train
        (feedback) the predictors. Returns the predicted cosine of all layers concatenated (None
        when not measured)."""
        predictor = self.params.predictor
        measuring = self.total.bp % self.params.cosine_every == 0
        formed: dict[str, _Formed] = {}
        error = None
        if predictor == "feedback" and self.logits is not None and self.labels is not None:
            error = self._output_error()
            formed = self._predicted_weight_grads(error, True, form_weight=measuring)
        sums = torch.zeros(COSINE_DOTS, dtype=torch.float64)
        measured = False
        for name, state in self.states.items():
            grad = state.weight.grad
            if grad is None:
                continue
            true = grad.detach().reshape(-1)
            guess = self._guess(state, formed.get(name)) if measuring else None
            previous = state.previous
            dots = torch.zeros(COSINE_DOTS, dtype=torch.float64)
            dots[2] = torch.vdot(true, true)
            if guess is not None:
                measured = True
                guess = guess.reshape(-1)
                dots[0], dots[1] = torch.vdot(guess, true), torch.vdot(guess, guess)
                state.cosines.append(_cosine(dots[0], dots[1], dots[2]))
                state.cosine_mean = self._smooth(state.cosine_mean, float(state.cosines[-1]))
                self.predicted_measurements[name] = self.predicted_measurements.get(name, 0) + 1
            if previous is not None:
                dots[3], dots[4] = torch.vdot(previous, true), torch.vdot(previous, previous)
                state.references.append(_cosine(dots[3], dots[4], dots[2]))
                state.reference_mean = self._smooth(
                    state.reference_mean, float(state.references[-1])
                )
                self.reference_measurements[name] = self.reference_measurements.get(name, 0) + 1
            sums += dots
            norm = float(dots[2].sqrt())
            state.grad_norm = (
                norm if state.grad_norm is None else _blend(NORM_MOMENTUM, state.grad_norm, norm)
            )
            state.previous = true.clone()
            self._refresh(state)
        if error is not None and formed:
            self._train_feedback(formed, error)
        return float(_cosine(sums[0], sums[1], sums[2])) if measured else None

    def _guess(self, state: _LayerState, formed: _Formed | None) -> Tensor | None:
        """This layer's prediction before the true gradient refreshes it."""
        predictor = self.params.predictor
        if predictor == "history":
            return state.history
        if predictor == "feedback" and formed is not None:
            return formed.weight_grad if self.feedback_trained(state) else None
        if predictor == "none":
            return torch.zeros_like(state.weight)
        return None

    @staticmethod
    def feedback_trained(state: _LayerState) -> bool:
        return state.feedback is not None and state.feedback.scale is not None

    def _refresh(self, state: _LayerState) -> None:
        if self.params.predictor != "history":
            return
        grad, momentum = state.weight.grad.detach(), self.params.history_momentum
        state.history = (
            grad.clone()
            if state.history is None
            else state.history.mul_(momentum).add_(grad, alpha=1 - momentum)
        )
        bias = state.bias
        if bias is not None and bias.grad is not None:
            bgrad = bias.grad.detach()
            state.bias_history = (
                bgrad.clone()
                if state.bias_history is None
                else state.bias_history.mul_(momentum).add_(bgrad, alpha=1 - momentum)
            )

    def _train_feedback(self, formed: dict[str, _Formed], error: Tensor) -> None:
        """One Adam step of every `feedback` predictor: MSE between its prediction and the true
        output gradient divided by a running RMS scale."""
        trained = []
        for name, formed_here in formed.items():
            state = self.states[name]
            target, feedback = state.true_output_grad, state.feedback
            if target is None or feedback is None or state.y is None:
                continue
            rms = torch.linalg.vector_norm(target) / target.numel() ** 0.5
            rms = torch.where(rms > 0, rms, 1.0)
            old = feedback.scale
            feedback.scale = rms if old is None else 0.9 * old + 0.1 * rms
            feedback.set_gradients(
                formed_here.prediction, error, state.y, target, state.layer.is_conv
            )
            trained.extend(feedback.parameters())
        if not trained:
            return
        if self.optimizer is None:
            parameters = [
                p for s in self.states.values() if s.feedback for p in s.feedback.parameters()
            ]
            # fused: one pass over every parameter (measured 2.4x faster than foreach here)
            self.optimizer = torch.optim.Adam(parameters, lr=self.params.predictor_lr, fused=True)
        self.optimizer.step()
        for parameter in trained:
            parameter.grad = None
        self.predictor_trainings += 1

    def _smooth(self, running: float | None, new: float) -> float:
        return new if running is None else _blend(self.params.cosine_momentum, running, new)

    def _adapt(self, loss: float) -> None:
        """Lengthen the GP run when every layer's predictions beat its reference by the
        lengthen ratio, shorten it when one layer's fall below the shorten ratio (or the loss
        rose)."""
        if not self.gp_open:
            return
        ratios = self.params.lengthen_ratio, self.params.shorten_ratio
        measured = [s for s in self.states.values() if s.cosine_mean is not None]
        if not measured or any(s.reference_mean is None for s in measured):
            return
        lengthen, shorten = (
            [s.cosine_mean >= r * max(s.reference_mean, 0.0) for s in measured] for r in ratios
        )
        rising = self.loss_mean is not None and loss > self.loss_mean * (1 + LOSS_RISE_TOLERANCE)
        if rising or not all(shorten):
            self.gp_run = max(self.gp_run - 1, self.params.min_gp_batches)
        elif all(lengthen):
            self.gp_run = min(self.gp_run + 1, self.params.max_gp_batches)

    # -- figures and workload ------------------------------------------------------------------
    def epoch_figures(self) -> EpochFigures:
        counts, self.epoch = self.epoch, _Counts()
        batches = counts.bp + counts.gp
        scalars = {"gp_fraction": counts.gp / batches if batches else 0.0}
        if counts.cosines:
            scalars["cosine_similarity"] = sum(counts.cosines) / len(counts.cosines)
        per_layer: dict[str, dict[str, float]] = {}
        for name, state in self.states.items():
            figures: dict[str, float] = {}
            if state.cosines:
                figures["cosine"] = float(torch.stack(state.cosines).mean())
            if state.references:
                figures["reference_cosine"] = float(torch.stack(state.references).mean())
            if figures:
                per_layer[name] = figures
            state.cosines, state.references = [], []
        return EpochFigures(scalars, per_layer)

    def annotate_workload(self, ops: WorkloadOps) -> None:
        """See the module docstring: what each predictor charges."""
        gp, bp = self.total.gp, self.total.bp
        for name, state in self.states.items():
            size = state.weight.numel()
            weights = size + (state.bias.numel() if state.bias is not None else 0)
            reference = _overhead(
                f"{name}.predictor.reference", TrainingPass.FWD, (1, size, 3),
                self.reference_measurements.get(name, 0),
            )  # fmt: skip
            cosine = _overhead(
                f"{name}.predictor.cosine", TrainingPass.FWD, (1, size, 2),
                self.predicted_measurements.get(name, 0),
            )  # fmt: skip
            # the copy of the true gradient kept for the reference, a word write per weight
            add_extra(reference, "result_copies", bp * size)
            update = ops.find(name, TrainingPass.FWD)  # GP batches' weight updates
            if update is not None:
                add_extra(update, "weight_updates", gp * weights)
            if self.params.predictor == "history":  # the running-mean refresh
                add_extra(reference, "weight_updates", bp * weights)
            for op in (reference, cosine):
                if op.executions:
                    ops.add(op)
            if self.params.predictor == "feedback" and state.feedback is not None:
                self._annotate_feedback(ops, name, state)

    def _annotate_feedback(self, ops: WorkloadOps, name: str, state: _LayerState) -> None:
        assert state.feedback is not None
        classes, per_sample = state.feedback.projection.shape
        batches = self.total.gp + self.total.bp
        batch = state.output_elements // max(per_sample, 1) // max(batches, 1)
        formed = self.total.gp + self.predictor_trainings  # dy_pred = e B on these batches
        project = _overhead(
            f"{name}.predictor.feedback", TrainingPass.FWD, (batch, classes, per_sample), formed
        )
        # the gate: a multiply-add, a sigmoid and a multiply per output element
        add_extra(project, "gate_ops", 4 * state.output_elements * formed / max(batches, 1))
        if state.normalization is not None:
            add_extra(
                project,
                "projection_ops",
                PROJECTION_OPS * state.output_elements * formed / max(batches, 1),
            )
        train = _overhead(
            f"{name}.predictor.feedback", TrainingPass.BWD_WEIGHT,
            (classes, batch, per_sample), self.predictor_trainings,
        )  # fmt: skip
        adam = 4 * sum(p.numel() for p in state.feedback.parameters())
        add_extra(train, "weight_updates", adam * self.predictor_trainings)
        per_element = TRAINING_OPS + (
            PROJECTION_BACKWARD_OPS if state.normalization is not None else 0
        )
        trained_elements = state.output_elements * self.predictor_trainings / max(batches, 1)
        add_extra(train, "training_ops", per_element * trained_elements)
        for op in (project, train):
            if op.executions:
                ops.add(op)
        weight = ops.find(name, TrainingPass.BWD_WEIGHT)
        if weight is None:
            return
        measured = self.weight_formations.get(name, 0)
        if measured:  # dW_pred formed on BP batches to measure its cosine, on the array
            ops.add(replace(
                weight, layer=f"{name}.predictor.measure", executions=measured, role="overhead",
                density_a=1.0, a_row_nnz=None, extra_ops={},
            ))  # fmt: skip
        if self.total.gp:  # GP batches formed dW = dy_pred x^T with the layer's own GEMM
            true_runs = weight.executions
            weight.density_a = (true_runs * weight.density_a + self.total.gp) / (
                true_runs + self.total.gp
            )
            weight.a_row_nnz = None
            weight.executions = true_runs + self.total.gp


def _overhead(layer: str, pass_: TrainingPass, shape: tuple[int, int, int], runs: int) -> GemmOp:
    m, k, n = shape
    return GemmOp(
        layer=layer,
        pass_=pass_,
        m=m,
        k=k,
        n=n,
        executions=runs,
        role="overhead",
        runs_on="predictor",
    )


@torch.no_grad()
def weight_grad(inner: nn.Module, x: Tensor, dy: Tensor) -> Tensor:
    """dW = dy x^T of a conv or linear layer for the output gradient dy: its BWD-WEIGHT GEMM
    alone, without autograd."""
    if isinstance(inner, nn.Conv2d):
        grads = torch.ops.aten.convolution_backward(
            dy, x, inner.weight, None, inner.stride, inner.padding, inner.dilation, False, [0, 0],
            inner.groups, (False, True, False),
        )  # fmt: skip
        return grads[1]
    rows = x.reshape(-1, x.shape[-1])
    return dy.reshape(-1, dy.shape[-1]).T @ rows
