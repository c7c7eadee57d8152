"""ADA-GP's `direct` predictor: the paper's design, a layer's weight gradient predicted from that
layer's output alone, during the forward pass.

What the paper states (MICRO 2023, arXiv 2305.13236): one small predictor network per layer
maps the layer's output activations to a predicted weight gradient as soon as the output exists;
on a GP batch the weights are updated with it and no backward pass runs (so the activations need
not be kept for one); on BP batches the predictor trains on the true gradients; a tensor
reorganization folds the output-channel dimension into the predictor's batch dimension, so the
predictor emits one filter's C·R·S values per output channel instead of all K·C·R·S at once.

What is ours (the open choices, each a knob with its default):
- the input per output channel k (`direct_features`, 20): statistics of y[:, k] pooled over the
  batch, the channel's mean and RMS over batch and positions, then for a conv the batch-mean map
  pooled into `direct_features` - 2 position bins (adaptive average pooling of the flattened
  H·W map), for a linear layer the channel's values over the batch (and sequence) sorted and
  pooled into as many quantile bins (a linear output has no positions; sorting makes the bins
  independent of the batch's order). The features are divided by the layer output's RMS on
  this batch, so the predictor sees shapes, not scales (the calibration sets the step's norm);
- what else it sees per channel (`direct_channel`, 'embedding'): a learned vector per channel
  added to the hidden pre-activation (it lets each channel learn its own typical gradient, as
  `history` does, modulated by the statistics); 'filter' feeds the channel's current weights
  through a second input matrix instead; 'none' the statistics only. The paper's predictor sees
  the activations only; a channel's identity or filter is what the statistics, shared by every
  channel, cannot tell apart;
- its size: one hidden layer of `direct_hidden` (64) ReLU units, output C·R·S (+1 with a
  bias: the bias gradient is one more output per channel); the output layer starts at zero, so
  an untrained predictor predicts nothing;
- its training: on each BP batch one Adam step (`predictor_lr`) on the MSE between the
  prediction and the true dW divided by a running RMS of the true dW (0.9 momentum): the
  target's scale is normalised away because the calibration (calibration.py) rescales every
  prediction to max(cos, 0) x the running true-gradient norm, so only the direction matters,
  and MSE on a unit-scale target is a cosine-friendly loss with a well-conditioned Adam step.

Known limit, measured before this design was built (techniques.md, 2026-12): pooled,
batch-averaged statistics of the output reached cosine 0.002-0.07 with the true dW. dW = Σ dy xᵀ
depends on each sample's input and label, which the statistics do not carry; the adaptive rule
keeps GP off where the cosine does not beat the previous BP batch's gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

SCALE_MOMENTUM = 0.9  # running RMS of the true weight gradient


@torch.no_grad()
def channel_features(y: Tensor, is_conv: bool, features: int) -> Tensor:
    """(K, features): per output channel, its mean and RMS over batch and positions, then
    `features` - 2 pooled bins (conv: of the batch-mean map; linear: of the sorted values), all
    divided by y's RMS on this batch."""
    bins = features - 2
    if is_conv:  # (B, K, H, W): reduce over batch and positions without a channel-major copy
        dims: tuple[int, ...] = (0, 2, 3)
        per_channel = y[:, 0].numel()
        batch_map = y.mean(0).reshape(y.shape[1], 1, -1)  # (K, 1, H·W)
        pooled = F.adaptive_avg_pool1d(batch_map, bins).squeeze(1)
        mean = y.mean(dims).unsqueeze(1)
        rms = (torch.linalg.vector_norm(y, dim=dims) / per_channel**0.5).unsqueeze(1)
    else:
        values = y.reshape(-1, y.shape[-1]).T  # (K, B·T)
        ordered = values.sort(1).values.unsqueeze(1)
        pooled = F.adaptive_avg_pool1d(ordered, bins).squeeze(1)
        mean = values.mean(1, keepdim=True)
        rms = torch.linalg.vector_norm(values, dim=1, keepdim=True) / values.shape[1] ** 0.5
    scale = rms.square().mean().sqrt().clamp_min(1e-12)  # y's RMS (every channel has as many)
    return torch.cat((mean, rms, pooled), 1) / scale


class DirectPredictor(nn.Module):
    """One layer's `direct` predictor: (K, features) [+ the channel's identity or filter] ->
    (K, C·R·S [+1]) through one hidden ReLU layer; rows are output channels (the tensor
    reorganization: channels are the predictor's batch)."""

    def __init__(
        self, weight: Tensor, has_bias: bool, features: int, hidden: int, channel_input: str
    ) -> None:
        super().__init__()
        channels, per_channel = len(weight), weight[0].numel()
        self.per_channel = per_channel
        self.has_bias = has_bias
        self.channel_input = channel_input
        self.hidden = nn.Linear(features, hidden)
        self.embedding = (
            nn.Parameter(torch.zeros(channels, hidden)) if channel_input == "embedding" else None
        )
        self.filter = (
            nn.Linear(per_channel, hidden, bias=False) if channel_input == "filter" else None
        )
        self.out = nn.Linear(hidden, per_channel + int(has_bias))
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, features: Tensor, weight: Tensor) -> Tensor:
        h = self.hidden(features)
        if self.embedding is not None:
            h = h + self.embedding
        if self.filter is not None:
            h = h + self.filter(weight.detach().reshape(len(weight), -1))
        return self.out(torch.relu(h))


@dataclass
class DirectState:
    """A layer's `direct` predictor and what it keeps between forward and step."""

    predictor: DirectPredictor
    scale: Tensor | None = None  # running RMS of the true dW (None: never trained)
    features: Tensor | None = None  # this batch's channel features (K, features)

    @property
    def trained(self) -> bool:
        return self.scale is not None

    def predict(self, weight: Tensor) -> Tensor:
        """(K, C·R·S [+1]) in the true gradient's units (times the running scale)."""
        assert self.features is not None
        with torch.no_grad():
            raw = self.predictor(self.features, weight)
        return raw * (self.scale if self.scale is not None else 1.0)

    def loss(self, weight: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
        """Tracks the running scale with `target` (K, C·R·S [+1], the true gradient) and returns
        the prediction made before this update (true units, detached, for the cosine) and the
        MSE on the scaled target (with its graph, for the predictor's step)."""
        assert self.features is not None
        with torch.enable_grad():
            raw = self.predictor(self.features, weight)
        before = raw.detach() * (self.scale if self.scale is not None else 1.0)
        rms = torch.linalg.vector_norm(target) / target.numel() ** 0.5
        rms = torch.where(rms > 0, rms, 1.0)
        self.scale = (
            rms if self.scale is None else SCALE_MOMENTUM * self.scale + (1 - SCALE_MOMENTUM) * rms
        )
        return before, F.mse_loss(raw, target / self.scale)


def split(prediction: Tensor, weight: Tensor, has_bias: bool) -> tuple[Tensor, Tensor | None]:
    """A (K, C·R·S [+1]) prediction as the weight's gradient and the bias's."""
    per_channel = weight[0].numel()
    grad = prediction[:, :per_channel].reshape(weight.shape)
    return grad, (prediction[:, per_channel] if has_bias else None)


def joined(weight_grad: Tensor, bias_grad: Tensor | None) -> Tensor:
    """The true gradients as the predictor's (K, C·R·S [+1]) target."""
    rows = weight_grad.reshape(len(weight_grad), -1)
    return rows if bias_grad is None else torch.cat((rows, bias_grad.reshape(-1, 1)), 1)


class DirectTraining:
    """The `direct` predictors' training: one Adam step over every layer's predictor per BP
    batch, on the sum of the layers' MSEs (each layer's parameters see only its own)."""

    def __init__(self, lr: float) -> None:
        self.lr = lr
        self.optimizer: torch.optim.Optimizer | None = None
        self.steps = 0

    def step(self, losses: list[Tensor], predictors: list[DirectPredictor]) -> None:
        if not losses:
            return
        if self.optimizer is None:
            parameters = [p for predictor in predictors for p in predictor.parameters()]
            self.optimizer = torch.optim.Adam(parameters, lr=self.lr, fused=True)
        self.optimizer.zero_grad(set_to_none=True)
        with torch.enable_grad():
            torch.stack(losses).sum().backward()
        self.optimizer.step()
        self.steps += 1
