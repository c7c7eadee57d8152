"""Measure what a zero-skipping accelerator sees: densities and per-row / per-column non-zero
counts of each pass's A and B, computed from the real tensors (never from im2col copies: a
convolution of the non-zero mask with a ones kernel counts the non-zeros of every window).
Each tensor's non-zero mask is computed once, as float 0/1, and shared by all its counts.

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
    """Density of one GEMM operand and its non-zero count per row (A) or per column (B), each
    row (column) `length` elements long."""

    density: float
    counts: np.ndarray
    length: int


def _counts(values: Tensor, length_of_vector: int) -> OperandCounts:
    """`values`: whole-number counts (float) of one operand's vectors."""
    counts = values.reshape(-1).numpy().astype(np.uint32)
    total = int(counts.sum(dtype=np.uint64))
    return OperandCounts(total / (counts.size * length_of_vector), counts, length_of_vector)


# Rows (or columns) of each operand kept in its pooled sample: enough for the busiest-lane
# statistics of arrays up to 1024 lanes wide, small enough to store with every workload.
SAMPLE_ROWS = 4096


class RowSample:
    """A fixed-size uniform sample of one operand's rows (columns), pooled over every measured
    mini-batch by reservoir sampling (Vitter's Algorithm R): after any number of batches every
    row seen so far is in the sample with the same probability. Per-lane counts and the density
    both come from it, so zero-skipping cycles and traffic see the same sparsity."""

    def __init__(self, rng: np.random.Generator, size: int = SAMPLE_ROWS) -> None:
        self.rng = rng
        self.size = size
        self.seen = 0
        self.counts = np.zeros(0, dtype=np.int64)
        self.lengths = np.zeros(0, dtype=np.int64)

    def add(self, observed: OperandCounts) -> None:
        new = np.asarray(observed.counts, dtype=np.int64)
        fill = min(max(self.size - len(self.counts), 0), len(new))
        self.counts = np.concatenate([self.counts, new[:fill]])
        self.lengths = np.concatenate([self.lengths, np.full(fill, observed.length)])
        rest = new[fill:]
        if len(rest):
            # Row number i (0-based, over all rows seen) replaces a uniform slot of [0, i] when
            # that slot is in the sample; later rows overwrite earlier ones, as in sequence.
            index = self.seen + fill + np.arange(len(rest))
            slot = (self.rng.random(len(rest)) * (index + 1)).astype(np.int64)
            kept = np.flatnonzero(slot < self.size)
            last_first = kept[::-1]
            slots, first = np.unique(slot[last_first], return_index=True)
            self.counts[slots] = rest[last_first[first]]
            self.lengths[slots] = observed.length
        self.seen += len(new)

    @property
    def density(self) -> float:
        elements = int(self.lengths.sum())
        return float(self.counts.sum()) / elements if elements else 1.0


def _conv_args(conv: nn.Conv2d) -> tuple:
    return conv.stride, conv.padding, conv.dilation


def conv_input_windows(mask: Tensor, conv: nn.Conv2d) -> OperandCounts:
    """FWD A = im2col(x), from x's non-zero mask: non-zeros of each window (m = B*P rows of
    k = C*R*S).

    Counting is linear in the mask, so channels are summed first: one single-channel conv."""
    per_pixel = mask.sum(1, keepdim=True)
    ones = torch.ones(1, 1, *conv.weight.shape[2:])
    per_window = F.conv2d(per_pixel, ones, None, *_conv_args(conv))
    return _counts(per_window.round_(), conv.weight[0].numel())


def conv_input_columns(mask: Tensor, conv: nn.Conv2d, y_shape: torch.Size) -> OperandCounts:
    """BWD-WEIGHT B = im2col(x), from x's non-zero mask: non-zeros of each (c, r, s) column
    over all B*P windows.

    Summed over the batch first (linear again), so the weight-gradient conv has batch 1."""
    per_position = mask.sum(0, keepdim=True)
    ones = torch.ones(1, 1, *y_shape[2:])
    shape = (1, *conv.weight.shape[1:])
    per_column = torch.nn.grad.conv2d_weight(per_position, shape, ones, *_conv_args(conv))
    return _counts(per_column.round_(), y_shape[0] * y_shape[2] * y_shape[3])


def row_counts(mask: Tensor) -> OperandCounts:
    """Non-zeros of each row of a (..., n) mask read as rows of n: a linear layer's FWD A
    (input vectors) or BWD-DATA A (output gradients)."""
    rows = mask.reshape(-1, mask.shape[-1])
    return _counts(rows.sum(1), rows.shape[1])


def column_counts(mask: Tensor) -> OperandCounts:
    """Non-zeros of each column of a (..., n) mask read as rows of n: a linear layer's
    BWD-WEIGHT B (inputs) or BWD-WEIGHT A (output gradients, transposed)."""
    rows = mask.reshape(-1, mask.shape[-1])
    return _counts(rows.sum(0), rows.shape[0])


def grad_rows(mask: Tensor, is_conv: bool) -> OperandCounts:
    """BWD-DATA A = dy as (B*P x K), from dy's non-zero mask: non-zeros of each output
    pixel's (or row's) gradient."""
    if is_conv:
        return _counts(mask.sum(1), mask.shape[1])
    return row_counts(mask)


def grad_channels(mask: Tensor, is_conv: bool) -> OperandCounts:
    """BWD-WEIGHT A = dy^T (K x B*P), from dy's non-zero mask: non-zeros of each output
    channel's gradient."""
    if is_conv:
        return _counts(mask.sum((0, 2, 3)), mask.numel() // mask.shape[1])
    return column_counts(mask)


def weight_per_output(weight: Tensor) -> OperandCounts:
    """FWD B = W^T (k x n): non-zeros of each filter / output unit."""
    return row_counts(nonzero_mask(weight.detach()).reshape(weight.shape[0], -1))


def weight_per_input(weight: Tensor) -> OperandCounts:
    """BWD-DATA B = W (K x C*R*S): non-zeros of each input position across filters."""
    return column_counts(nonzero_mask(weight.detach()).reshape(weight.shape[0], -1))


def line_macs(mask: Tensor, taps: np.ndarray) -> np.ndarray:
    """The 1-D dataflow's work per row (last dimension) of a 0/1 mask: its non-zeros weighted by
    how many real products each takes part in (backend.sim.row_dataflow's input_taps,
    gradient_taps or kernel_taps), in the tensor's row order."""
    weights = torch.as_tensor(taps, dtype=torch.float32)
    per_row = mask.reshape(-1, mask.shape[-1]).to(torch.float64) @ weights.to(torch.float64)
    return per_row.round().numpy().astype(np.uint32)


def density(values: Tensor) -> float:
    return float(count(nonzero_mask(values))) / max(values.numel(), 1)
