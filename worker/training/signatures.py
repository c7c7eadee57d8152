"""MERCURY's Random Projection with Quantization (RPQ) signatures.

An input vector x (an im2col window of a conv, an input row of a linear layer) gets the bit
signature s(x) = [R x >= 0], R a k x d Gaussian matrix drawn once per layer. Bit i is packed
as 2**i of an int64, so equal signatures are equal integers. For a conv, R x for every window
is one convolution with k filters: the dataflow of the layer itself, no im2col copy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def pack_bits(bits: Tensor) -> Tensor:
    """(rows, k) booleans -> (rows,) int64 with bit i = column i (k <= 64)."""
    shifts = torch.arange(bits.shape[1], dtype=torch.int64)
    return (bits.to(torch.int64) << shifts).sum(1)


class RandomProjection:
    """The fixed projection of one layer; the first `bits` rows of R give a `bits`-bit
    signature, so growing the signature keeps the bits it had."""

    def __init__(self, inner: nn.Conv2d | nn.Linear, max_bits: int, generator: torch.Generator):
        self.inner = inner
        vector_length = inner.weight[0].numel()
        self.matrix = torch.randn(max_bits, vector_length, generator=generator)

    def projections(self, x: Tensor, bits: int) -> Tensor:
        """R x for every row of the layer's FWD GEMM: (rows, bits), rows in GEMM order."""
        with torch.no_grad():
            inner = self.inner
            if isinstance(inner, nn.Conv2d):
                filters = self.matrix[:bits].reshape(bits, *inner.weight.shape[1:])
                projected = F.conv2d(x, filters, None, inner.stride, inner.padding, inner.dilation)
                return projected.permute(0, 2, 3, 1).reshape(-1, bits)
            return x.reshape(-1, x.shape[-1]) @ self.matrix[:bits].T

    def signatures(self, x: Tensor, bits: int) -> Tensor:
        return pack_bits(self.projections(x, bits) >= 0)

    def projections_by_unfolding(self, x: Tensor, bits: int) -> Tensor:
        """The same projections through an explicit im2col (slow; the reference)."""
        inner = self.inner
        if not isinstance(inner, nn.Conv2d):
            return self.projections(x, bits)
        windows = F.unfold(
            x.detach(), inner.kernel_size, inner.dilation, inner.padding, inner.stride
        )
        return windows.transpose(1, 2).reshape(-1, windows.shape[1]) @ self.matrix[:bits].T
