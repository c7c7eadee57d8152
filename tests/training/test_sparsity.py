"""Operand non-zero counts from masks equal brute-force counts on im2col copies."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from worker.training import sparsity


def _sparse(*shape: int, seed: int) -> torch.Tensor:
    values = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return values.where(values > 0.3, 0.0)


def test_conv_counts_match_im2col() -> None:
    conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
    x = _sparse(2, 3, 9, 9, seed=0)
    y = conv(x)
    windows = F.unfold(x, 3, padding=1, stride=2) != 0  # (B, C*R*S, P)
    mask = sparsity.nonzero_mask(x)
    rows = sparsity.conv_input_windows(mask, conv)
    assert (rows.counts == windows.sum(1).reshape(-1).numpy()).all()
    assert rows.density == pytest.approx(windows.float().mean().item())
    columns = sparsity.conv_input_columns(mask, conv, y.shape)
    assert (columns.counts == windows.sum((0, 2)).numpy()).all()


def test_gradient_and_weight_counts_match_their_gemm_operands() -> None:
    grad = _sparse(2, 4, 5, 5, seed=1)
    as_rows = grad.permute(0, 2, 3, 1).reshape(-1, 4) != 0  # BWD-DATA A: (B*P, K)
    mask = sparsity.nonzero_mask(grad)
    assert (sparsity.grad_rows(mask, True).counts == as_rows.sum(1).numpy()).all()
    assert (sparsity.grad_channels(mask, True).counts == as_rows.sum(0).numpy()).all()
    weight = _sparse(4, 3, 3, 3, seed=2).reshape(4, -1) != 0
    assert (sparsity.weight_per_output(weight.float()).counts == weight.sum(1).numpy()).all()
    assert (sparsity.weight_per_input(weight.float()).counts == weight.sum(0).numpy()).all()
    linear = _sparse(6, 5, seed=3)
    rows = sparsity.row_counts(sparsity.nonzero_mask(linear))
    assert (rows.counts == (linear != 0).sum(1).numpy()).all()
    assert sparsity.density(linear) == pytest.approx((linear != 0).float().mean().item())


def test_count_is_exact_beyond_float32_integers() -> None:
    ones = torch.ones(sparsity.EXACT_FLOAT32_COUNT + 3)
    assert int(sparsity.count(ones)) == sparsity.EXACT_FLOAT32_COUNT + 3
