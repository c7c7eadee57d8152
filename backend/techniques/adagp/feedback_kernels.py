"""The `feedback` predictor's output-sized arithmetic, fused into one or two passes per tensor.

ADA-GP's `feedback` predictor (predictors.py) does a few operations on every element of a layer's
output, per batch: the gated product (e B) * gate, BatchNorm's projection (three per-channel
sums and a subtraction) and, on BP batches, its training step (the residual, its projection, the
gate's derivative, two per-channel sums). As PyTorch operations that is about fifteen passes
over output-sized tensors, each allocating its result and each bound by memory bandwidth:
measured on ResNet-8 (width 16, batch 64) the prediction alone took half as long as a whole
baseline batch. The loops here do the same arithmetic in two passes (one pass when nothing is
projected), summing per channel in float64. The gate's sigmoid stays in PyTorch: its exp is
vectorised, numba's (without SVML) is a scalar call several times slower than the whole pass.

A tensor is viewed as (outer, channels, inner) around its channel dimension: a conv output
(B, K, H, W) as (B, K, H*W), a linear output (B, F) as (B, F, 1).

BatchNorm's projection of v over one channel's n elements, y_hat = (y - mean y) / sqrt(var + eps):
    P v = v - mean(v) - (y - mean y) * (sum(v (y - mean y)) / n) / (var + eps)
with sum(v (y - mean y)) = sum(v y) - mean(y) sum(v), so one pass gathers every sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from backend.training.compiled import compiled


@dataclass(frozen=True)
class ChannelMoments:
    """Per channel of a layer's output y (float64): mean(y) and 1 / (var(y) + eps)."""

    mean: np.ndarray
    inverse_variance: np.ndarray


def channel_view(tensor: Tensor, channel: int) -> np.ndarray:
    """`tensor` (contiguous, no autograd) as a NumPy (outer, channels, inner) view."""
    dim = channel % tensor.dim()
    shape = tensor.shape
    outer, inner = math.prod(shape[:dim]), math.prod(shape[dim + 1 :])
    return tensor.detach().contiguous().view(outer, shape[dim], inner).numpy()


def gated_product(
    direct: Tensor, gate: Tensor, y: Tensor, channel: int, eps: float | None
) -> tuple[Tensor, np.ndarray, ChannelMoments | None]:
    """dy_pred = P(direct * gate), P BatchNorm's projection over y's channels when `eps` is
    given (the BatchNorm's eps), else the identity. Returns dy_pred, its per-channel sums (the
    bias gradient before scaling) and y's moments (None when nothing is projected)."""
    output = torch.empty_like(y, memory_format=torch.contiguous_format)
    moments = np.zeros((3, y.shape[channel]), dtype=np.float64)
    normalize = eps is not None
    _gated_product(
        channel_view(direct, channel),
        channel_view(gate, channel),
        channel_view(y, channel),
        float(eps or 0.0),
        normalize,
        channel_view(output, channel),
        moments,
    )
    projected = ChannelMoments(moments[0], moments[1]) if normalize else None
    return output, moments[2], projected


def predictor_gradients(
    output: Tensor,
    target: Tensor,
    inverse_scale: float,
    direct: Tensor,
    gate: Tensor,
    y: Tensor,
    channel: int,
    moments: ChannelMoments | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The training step of dy_pred = P(direct * sigmoid(a y + c)) on the loss
    MSE(dy_pred, target * inverse_scale): with r = P (dLoss/d dy_pred) (P is symmetric), returns
    r * gate (what B's gradient is formed from), and a's and c's gradients, the per-channel
    sums of pre * y and of pre, pre = r * gate * (1 - gate) * direct."""
    through = torch.empty_like(y, memory_format=torch.contiguous_format)
    sums = np.zeros((2, y.shape[channel]), dtype=np.float64)
    empty = np.zeros(0, dtype=np.float64)
    _predictor_gradients(
        channel_view(output, channel),
        channel_view(target, channel),
        float(inverse_scale),
        2.0 / output.numel(),
        channel_view(direct, channel),
        channel_view(gate, channel),
        channel_view(y, channel),
        moments.mean if moments is not None else empty,
        moments.inverse_variance if moments is not None else empty,
        channel_view(through, channel),
        sums,
    )
    gate_scale, gate_shift = (torch.from_numpy(row).to(y.dtype) for row in sums)
    return through, gate_scale, gate_shift


# Single-threaded on purpose, as the kernels of sparsetrain.py: the tensors are a few MB and the
# loops are bound by memory bandwidth. `reassoc` lets LLVM vectorise the sums.


@compiled(fastmath={"reassoc"})
def _gated_product(
    direct: np.ndarray,
    gate: np.ndarray,
    y: np.ndarray,
    eps: float,
    normalize: bool,
    out: np.ndarray,
    moments: np.ndarray,
) -> None:
    """out = P(direct * gate); moments = (mean y, 1 / (var y + eps), sums of out) per channel
    (the first two only when `normalize`)."""
    outer, channels, inner = y.shape
    count = outer * inner
    out_sums, y_sums = np.zeros(channels), np.zeros(channels)
    y_squares, out_y = np.zeros(channels), np.zeros(channels)
    for b in range(outer):
        for k in range(channels):
            s_out = s_y = s_yy = s_out_y = 0.0
            for i in range(inner):
                value = direct[b, k, i] * gate[b, k, i]
                out[b, k, i] = value
                o = np.float64(value)
                s_out += o
                if normalize:  # loop-invariant: compiled as two loops, y read only here
                    v = np.float64(y[b, k, i])
                    s_y += v
                    s_yy += v * v
                    s_out_y += o * v
            out_sums[k] += s_out
            y_sums[k] += s_y
            y_squares[k] += s_yy
            out_y[k] += s_out_y
    if not normalize:
        moments[2] = out_sums
        return
    mean_y = y_sums / count
    inverse_variance = 1.0 / (y_squares / count - mean_y * mean_y + eps)
    mean_out = out_sums / count
    along = (out_y / count - mean_y * mean_out) * inverse_variance
    projected_sums = np.zeros(channels)
    for b in range(outer):
        for k in range(channels):
            shift, slope, centre = mean_out[k], along[k], mean_y[k]
            s_out = 0.0
            for i in range(inner):
                value = out[b, k, i] - (shift + (y[b, k, i] - centre) * slope)
                out[b, k, i] = value
                s_out += value
            projected_sums[k] += s_out
    moments[0] = mean_y
    moments[1] = inverse_variance
    moments[2] = projected_sums


@compiled(fastmath={"reassoc"})
def _predictor_gradients(
    output: np.ndarray,
    target: np.ndarray,
    inverse_scale: float,
    factor: float,
    direct: np.ndarray,
    gate: np.ndarray,
    y: np.ndarray,
    mean_y: np.ndarray,
    inverse_variance: np.ndarray,
    through: np.ndarray,
    sums: np.ndarray,
) -> None:
    """r = (output - target * inverse_scale) * factor, projected when moments are given;
    through = r * gate; sums = per channel (sum of pre * y, sum of pre),
    pre = through * (1 - gate) * direct."""
    outer, channels, inner = y.shape
    count = outer * inner
    shift, slope = np.zeros(channels), np.zeros(channels)
    if len(mean_y):  # the residual's projection: its mean and its component along y_hat
        r_sums, r_y = np.zeros(channels), np.zeros(channels)
        for b in range(outer):
            for k in range(channels):
                s_r = s_ry = 0.0
                for i in range(inner):
                    r = np.float64((output[b, k, i] - target[b, k, i] * inverse_scale) * factor)
                    s_r += r
                    s_ry += r * np.float64(y[b, k, i])
                r_sums[k] += s_r
                r_y[k] += s_ry
        shift = r_sums / count
        slope = (r_y / count - mean_y * shift) * inverse_variance
    centre = mean_y if len(mean_y) else np.zeros(channels)
    for b in range(outer):
        for k in range(channels):
            s_a = s_c = 0.0
            for i in range(inner):
                r = (output[b, k, i] - target[b, k, i] * inverse_scale) * factor
                r -= shift[k] + (y[b, k, i] - centre[k]) * slope[k]
                g = gate[b, k, i]
                value = r * g
                through[b, k, i] = value
                pre = np.float64(value * (1 - g) * direct[b, k, i])
                s_a += pre * np.float64(y[b, k, i])
                s_c += pre
            sums[0, k] += s_a
            sums[1, k] += s_c
