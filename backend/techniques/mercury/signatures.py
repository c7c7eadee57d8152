"""MERCURY's Random Projection with Quantization (RPQ) signatures.

An input vector x (an im2col window of a conv, an input row of a linear layer) gets the bit
signature s(x) = [R (x - mu) >= 0], R a k x d Gaussian matrix drawn once per layer and mu a centre
in input space (zero unless the layer is centred, see `RandomProjection.observe`). Bit i is packed
as 2**i of an int64 (bit 63 makes it negative), so equal signatures are equal integers. For a
conv, R x for every window is one convolution with k filters: the dataflow of the layer itself,
no im2col copy; the centre enters as that convolution's bias -R mu.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from backend.training.compiled import compiled


@compiled()
def pack_signs(projections: np.ndarray) -> np.ndarray:
    """(outer, bits, inner) projections, bits <= 64 -> (outer * inner) int64 signatures, bit i
    set where projection i is >= 0 (rows in outer-major order)."""
    outer, bits, inner = projections.shape
    packed = np.zeros((outer, inner), dtype=np.int64)
    for o in range(outer):
        for bit in range(bits):
            for i in range(inner):
                packed[o, i] |= np.int64(projections[o, bit, i] >= 0) << bit
    return packed.reshape(-1)


class RandomProjection:
    """The fixed projection of one layer; the first `bits` rows of R give a `bits`-bit
    signature, so growing the signature keeps the bits it had."""

    def __init__(self, inner: nn.Conv2d | nn.Linear, max_bits: int, generator: torch.Generator):
        self.inner = inner
        vector_length = inner.weight[0].numel()
        self.matrix = torch.randn(max_bits, vector_length, generator=generator)
        self.centre = torch.zeros(vector_length)
        self._observed = False

    def observe(self, x: Tensor, momentum: float) -> None:
        """Move the centre towards the mean input vector of `x` (the first batch sets it):
        hyperplanes through the data cloud split post-ReLU vectors, which all lie in the
        positive orthant, far better than hyperplanes through the origin."""
        with torch.no_grad():
            mean = self.mean_vector(x)
            if self._observed:
                self.centre.lerp_(mean, momentum)
            else:
                self.centre, self._observed = mean, True

    def mean_vector(self, x: Tensor) -> Tensor:
        """The mean of the layer's input vectors (im2col windows of a conv) in `x`."""
        inner = self.inner
        if not isinstance(inner, nn.Conv2d):
            return x.reshape(-1, x.shape[-1]).mean(0)
        # the windows of the batch-summed image sum to the batch's windows: unfold one image
        summed = x.detach().sum(0, keepdim=True)
        windows = F.unfold(summed, inner.kernel_size, inner.dilation, inner.padding, inner.stride)
        return windows[0].mean(1) / x.shape[0]

    def projections(self, x: Tensor, bits: int) -> Tensor:
        """R (x - mu) for every row of the layer's FWD GEMM: (rows, bits), rows in GEMM order."""
        return torch.movedim(self._projected(x, bits), 1, -1).reshape(-1, bits)

    def signatures(self, x: Tensor, bits: int) -> np.ndarray:
        """The packed signature of every row of the layer's FWD GEMM, rows in GEMM order."""
        projected = self._projected(x, bits)  # bits in dim 1, then the rest of a row's place
        return pack_signs(projected.reshape(projected.shape[0], bits, -1).numpy())

    def _projected(self, x: Tensor, bits: int) -> Tensor:
        """R (x - mu) with the bit index in dim 1: (B, bits, H, W) for a conv, (rows, bits)."""
        with torch.no_grad():
            matrix = self.matrix[:bits]
            offset = -(matrix @ self.centre)
            inner = self.inner
            if isinstance(inner, nn.Conv2d):
                filters = matrix.reshape(bits, *inner.weight.shape[1:])
                return F.conv2d(x, filters, offset, inner.stride, inner.padding, inner.dilation)
            return torch.addmm(offset, x.reshape(-1, x.shape[-1]), matrix.T)

    def projections_by_unfolding(self, x: Tensor, bits: int) -> Tensor:
        """The same projections through an explicit im2col (slow; the reference)."""
        inner = self.inner
        if not isinstance(inner, nn.Conv2d):
            return (x.reshape(-1, x.shape[-1]) - self.centre) @ self.matrix[:bits].T
        windows = F.unfold(
            x.detach(), inner.kernel_size, inner.dilation, inner.padding, inner.stride
        )
        rows = windows.transpose(1, 2).reshape(-1, windows.shape[1])
        return (rows - self.centre) @ self.matrix[:bits].T
