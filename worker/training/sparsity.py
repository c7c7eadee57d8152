"""Measure what a zero-skipping accelerator sees: densities and per-row / per-column non-zero
counts of each pass's A and B, computed from the real tensors (never from im2col copies: a
convolution of the non-zero mask with a ones kernel counts the non-zeros of every window).

Row/column orders follow gemm_shapes.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

EXACT_FLOAT32_COUNT = 2**24  # every integer up to 2^24 is a float32: 0/1 sums stay exact


def nonzero_mask(values: Tensor) -> Tensor:
    """1.0 where `values` is non-zero, else 0.0: a comparison written to float32 (then summed)
    runs several times faster on CPU than one producing a bool tensor."""
    return torch.ne(values, 0, out=torch.empty(values.shape, dtype=torch.float32))


def count(mask: Tensor, dims: int | tuple[int, ...] | None = None) -> Tensor:
    """Exact number of ones in a 0/1 float mask (along `dims`): float32 sums while that is
    exact, float64 beyond."""
    dtype = torch.float32 if mask.numel() <= EXACT_FLOAT32_COUNT else torch.float64
    return mask.sum(dims, dtype=dtype) if dims is not None else mask.sum(dtype=dtype)


@dataclass(frozen=True)
class OperandCounts:
    """Density of one GEMM operand and its non-zero count per row (A) or per column (B)."""

    density: float
    counts: np.ndarray


def _counts(values: Tensor, length_of_vector: int) -> OperandCounts:
    flat = values.reshape(-1).to(torch.int64)
    total = int(flat.sum())
    return OperandCounts(total / (flat.numel() * length_of_vector), flat.numpy().astype(np.uint32))


def _conv_args(conv: nn.Conv2d) -> tuple:
    return conv.stride, conv.padding, conv.dilation


def conv_input_windows(x: Tensor, conv: nn.Conv2d) -> OperandCounts:
    """FWD A = im2col(x): non-zeros of each window (m = B*P rows of k = C*R*S).

    Counting is linear in the mask, so channels are summed first: one single-channel conv."""
    per_pixel = (x != 0).sum(1, keepdim=True, dtype=torch.float32)
    ones = torch.ones(1, 1, *conv.weight.shape[2:])
    per_window = F.conv2d(per_pixel, ones, None, *_conv_args(conv))
    return _counts(per_window.round(), conv.weight[0].numel())


def conv_input_columns(x: Tensor, conv: nn.Conv2d, y_shape: torch.Size) -> OperandCounts:
    """BWD-WEIGHT B = im2col(x): non-zeros of each (c, r, s) column over all B*P windows.

    Summed over the batch first (linear again), so the weight-gradient conv has batch 1."""
    per_position = (x != 0).sum(0, keepdim=True, dtype=torch.float32)
    ones = torch.ones(1, 1, *y_shape[2:])
    shape = (1, *conv.weight.shape[1:])
    per_column = torch.nn.grad.conv2d_weight(per_position, shape, ones, *_conv_args(conv))
    return _counts(per_column.round(), y_shape[0] * y_shape[2] * y_shape[3])


def linear_input_rows(x: Tensor) -> OperandCounts:
    rows = x.reshape(-1, x.shape[-1]) != 0
    return _counts(rows.sum(1), rows.shape[1])


def linear_input_columns(x: Tensor) -> OperandCounts:
    rows = x.reshape(-1, x.shape[-1]) != 0
    return _counts(rows.sum(0), rows.shape[0])


def grad_rows(grad: Tensor, is_conv: bool) -> OperandCounts:
    """BWD-DATA A = dy as (B*P x K): non-zeros of each output pixel's (or row's) gradient."""
    mask = grad != 0
    if is_conv:
        return _counts(mask.sum(1), grad.shape[1])
    rows = mask.reshape(-1, grad.shape[-1])
    return _counts(rows.sum(1), rows.shape[1])


def grad_channels(grad: Tensor, is_conv: bool) -> OperandCounts:
    """BWD-WEIGHT A = dy^T (K x B*P): non-zeros of each output channel's gradient."""
    mask = grad != 0
    if is_conv:
        return _counts(mask.sum((0, 2, 3)), grad.numel() // grad.shape[1])
    rows = mask.reshape(-1, grad.shape[-1])
    return _counts(rows.sum(0), rows.shape[0])


def weight_per_output(weight: Tensor) -> OperandCounts:
    """FWD B = W^T (k x n): non-zeros of each filter / output unit."""
    mask = weight.detach().reshape(weight.shape[0], -1) != 0
    return _counts(mask.sum(1), mask.shape[1])


def weight_per_input(weight: Tensor) -> OperandCounts:
    """BWD-DATA B = W (K x C*R*S): non-zeros of each input position across filters."""
    mask = weight.detach().reshape(weight.shape[0], -1) != 0
    return _counts(mask.sum(0), mask.shape[0])


def density(values: Tensor) -> float:
    return float((values != 0).sum()) / max(values.numel(), 1)
