"""ADA-GP's predictors (`predictor`): what a GP batch's weight gradients are predicted from.

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
  forward pre-hook seeing y arrive, training.py) gets dy_pred projected as BatchNorm's backward
  projects the true gradient, per channel dy - mean(dy) - y_hat mean(dy y_hat). The true dy has
  neither a per-channel mean nor a component along y_hat (the normalisation discards y's shift
  and scale), so the true dW is orthogonal to each output channel's weights; unprojected,
  dy_pred keeps a per-channel mean, which after ReLU inputs (x >= 0) puts a large spurious
  sum(x) term into every channel's dW_pred. Measured on ResNet-8/Fashion-MNIST (seed 0, GP
  batches, true gradient computed alongside by benchmarks/adagp_gp_batches.py): the convs'
  cosine with the true dW rose from 0.08-0.35 to 0.20-0.74. The predictor is trained through
  the projection (its MSE is on the projected output; the target already lies in that
  subspace). Cost: 9 ops per output element (centring, three per-channel sums, a multiply-add,
  a subtraction) on the batches that form dy_pred (`projection_ops`, cost.py).
  BatchNorm's own scale and shift get no gradient on GP batches (no backward reaches them);
  the optimiser skips them (no momentum, no weight decay), and their running statistics update
  in the GP batch's ordinary training-mode forward. Measured on ResNet-8 (seeds 0-2):
  replacing the predicted conv and linear gradients on GP batches by the true ones, BatchNorm
  still frozen, gives -0.1 points on average against the baseline (-0.4 at worst), against
  -0.7 with the predictions: the accuracy GP costs comes mostly from the predictions. The
  measured frontier (GP fraction against accuracy, per design) is in
  benchmarks/adagp_frontier.py.
- `direct` (direct.py): the paper's design; per layer a small network maps pooled statistics of
  each output channel (the tensor reorganization: channels are the predictor's batch) to that
  channel's weight gradient, in the forward hook; GP batches run no backward and no dW product.
- `history`: the prediction is a running mean (momentum `history_momentum`) of the layer's true
  gradients on BP batches, refreshed by every true gradient; no GEMM, a multiply-add per weight
  per BP batch. Measured under SGD with momentum 0.9 its cosine with the next true gradient is
  negative (-0.05 to -0.13 on LeNet-5/MNIST): the optimiser's momentum has already followed the
  mean, the next gradient pushes back, so the adaptive rule (schedule.py) keeps it off.
- `none`: a control; GP batches predict zero (the optimiser's momentum still moves weights), to
  tell what a predictor adds over merely skipping batches: the floor a predictor must beat.
- `oracle`: a control; a GP batch runs the ordinary backward pass and steps on the exact true
  gradient of every conv/linear layer, uncalibrated, while the workload charges it as a GP
  batch (cost.py takes its backward passes back out): a perfect predictor that costs nothing,
  the ceiling a predictor can reach at the same schedule. As on any GP batch the other
  parameters (BatchNorm's scale and shift) get no gradient, so on a model without them the
  oracle trains exactly as the baseline does. Composed with another technique, that technique
  sees a backward pass on the oracle's GP batches.

Each prediction is rescaled before it is applied (calibration.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

from backend.techniques.adagp.feedback_kernels import (
    ChannelMoments,
    gated_product,
    predictor_gradients,
)

if TYPE_CHECKING:
    from backend.techniques.adagp.layer_state import LayerState


@dataclass
class FeedbackPrediction:
    """One layer's `feedback` prediction on one batch: dy_pred = P((e B) * sigmoid(a y + c)),
    P the BatchNorm projection or the identity, before the running scale, and its per-channel
    sums. A BP batch keeps the factors for the predictor's training step."""

    output: Tensor
    channel_sums: np.ndarray
    direct: Tensor | None = None  # e B
    gate: Tensor | None = None  # sigmoid(a y + c)
    moments: ChannelMoments | None = None  # y's, when projected


@dataclass
class FeedbackPredictor:
    """The `feedback` predictor of one layer: dy_pred = (e B) * sigmoid(a y + c), projected
    when y feeds a BatchNorm. The output-sized arithmetic runs fused (feedback_kernels.py)."""

    projection: nn.Parameter  # B: (classes, output elements per sample)
    gate_scale: nn.Parameter  # a: (channels,)
    gate_shift: nn.Parameter  # c: (channels,)
    scale: Tensor | None = None  # running RMS of the true output gradient

    @classmethod
    def untrained(cls, classes: int, y: Tensor, is_conv: bool) -> FeedbackPredictor:
        """A predictor for the layer output y, all zero: it predicts nothing until trained."""
        channels = y.shape[1] if is_conv else y.shape[-1]
        return cls(
            nn.Parameter(torch.zeros(classes, y[0].numel())),
            nn.Parameter(torch.zeros(channels)),
            nn.Parameter(torch.zeros(channels)),
        )

    def parameters(self) -> list[nn.Parameter]:
        return [self.projection, self.gate_scale, self.gate_shift]

    @property
    def trained(self) -> bool:
        return self.scale is not None

    @staticmethod
    def channel(is_conv: bool) -> int:
        """The gate's channels: dim 1 of a conv's (B, K, H, W), a linear output's last dim."""
        return 1 if is_conv else -1

    @torch.no_grad()
    def predict(
        self, error: Tensor, y: Tensor, is_conv: bool, eps: float | None, for_training: bool
    ) -> FeedbackPrediction:
        """dy_pred on this batch; `eps` is that of the BatchNorm y feeds (None: none)."""
        channel = self.channel(is_conv)
        direct = (error @ self.projection).view(y.shape)
        shape = [1] * y.dim()
        shape[channel] = -1
        gate = torch.addcmul(self.gate_shift.view(shape), y, self.gate_scale.view(shape))
        gate.sigmoid_()
        output, sums, moments = gated_product(direct, gate, y, channel, eps)
        if not for_training:
            return FeedbackPrediction(output, sums)
        return FeedbackPrediction(output, sums, direct, gate, moments)

    def track_scale(self, target: Tensor) -> None:
        """Blend the true output gradient's RMS into the running scale the MSE divides by."""
        rms = torch.linalg.vector_norm(target) / target.numel() ** 0.5
        rms = torch.where(rms > 0, rms, 1.0)
        self.scale = rms if self.scale is None else 0.9 * self.scale + 0.1 * rms

    @torch.no_grad()
    def set_gradients(
        self,
        prediction: FeedbackPrediction,
        error: Tensor,
        y: Tensor,
        target: Tensor,
        is_conv: bool,
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
class FormedPrediction:
    """`feedback` on one batch: the prediction, its running scale (kept apart: it multiplies
    the small weight gradient rather than the output-sized dy) and the weight gradient formed
    from it on the array."""

    prediction: FeedbackPrediction
    scale: Tensor | float
    weight_grad: Tensor | None

    def bias_grad(self, dtype: torch.dtype) -> Tensor:
        return torch.from_numpy(self.prediction.channel_sums).to(dtype) * self.scale


def form_feedback(
    states: dict[str, LayerState], error: Tensor, for_training: bool, form_weight: bool = True
) -> dict[str, FormedPrediction]:
    """`feedback`: per layer, the predicted output gradient from the output error and (if
    `form_weight`) the weight gradient formed from it."""
    out: dict[str, FormedPrediction] = {}
    for name, state in states.items():
        if state.y is None or state.x is None:
            continue
        if state.feedback is None:
            state.feedback = FeedbackPredictor.untrained(
                error.shape[1], state.y, state.layer.is_conv
            )
        feedback = state.feedback
        eps = state.normalization.eps if state.normalization is not None else None
        prediction = feedback.predict(error, state.y, state.layer.is_conv, eps, for_training)
        scale = feedback.scale if feedback.scale is not None else 1.0
        formed = None
        if form_weight:
            formed = weight_grad(state.layer.inner, state.x, prediction.output).mul_(scale)
            if for_training:  # a BP batch: formed only to measure the cosine
                state.weight_formations += 1
        out[name] = FormedPrediction(prediction, scale, formed)
    return out


class FeedbackTraining:
    """The `feedback` predictors' training: on each BP batch, one Adam step of every layer's
    predictor on the MSE between its prediction and the true output gradient divided by a
    running RMS scale."""

    def __init__(self, lr: float) -> None:
        self.lr = lr
        self.optimizer: torch.optim.Optimizer | None = None
        self.steps = 0  # BP batches on which the predictors trained

    def step(
        self, states: dict[str, LayerState], formed: dict[str, FormedPrediction], error: Tensor
    ) -> None:
        trained = []
        for name, formed_here in formed.items():
            state = states[name]
            target, feedback = state.true_output_grad, state.feedback
            if target is None or feedback is None or state.y is None:
                continue
            feedback.track_scale(target)
            feedback.set_gradients(
                formed_here.prediction, error, state.y, target, state.layer.is_conv
            )
            trained.extend(feedback.parameters())
        if not trained:
            return
        if self.optimizer is None:
            parameters = [p for s in states.values() if s.feedback for p in s.feedback.parameters()]
            # fused: one pass over every parameter (measured 2.4x faster than foreach here)
            self.optimizer = torch.optim.Adam(parameters, lr=self.lr, fused=True)
        self.optimizer.step()
        for parameter in trained:
            parameter.grad = None
        self.steps += 1


def output_error(logits: Tensor, labels: Tensor) -> Tensor:
    """dL/dlogits of the mean cross-entropy: (softmax - onehot) / batch."""
    logits = logits.detach().reshape(len(labels), -1)
    error = torch.softmax(logits, 1)
    error[torch.arange(len(labels)), labels] -= 1.0
    return error / len(labels)


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


def running_mean(mean: Tensor | None, gradient: Tensor, momentum: float) -> Tensor:
    """`history`: the running mean refreshed by a true gradient (in place once it exists)."""
    if mean is None:
        return gradient.clone()
    return mean.mul_(momentum).add_(gradient, alpha=1 - momentum)
