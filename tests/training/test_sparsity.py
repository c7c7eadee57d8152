"""Operand non-zero counts from masks equal brute-force counts on im2col copies."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from backend.training import sparsity


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


def _batch(counts: list[int], length: int) -> sparsity.OperandCounts:
    values = np.asarray(counts, dtype=np.uint32)
    return sparsity.OperandCounts(float(values.sum()) / (len(values) * length), values, length)


def test_row_sample_keeps_everything_until_full() -> None:
    sample = sparsity.RowSample(np.random.default_rng(0), size=10)
    sample.add(_batch([0, 1, 2], length=4))
    sample.add(_batch([4, 4], length=4))
    assert sample.counts.tolist() == [0, 1, 2, 4, 4]
    assert sample.density == pytest.approx(11 / 20)


def test_row_sample_is_uniform_over_all_batches_not_the_last() -> None:
    """1000 empty rows, then 3000 rows with 4 of 4 non-zeros: a uniform sample holds about 3/4
    full rows (the last batch alone would say 1.0, the first 0.0); over 200 seeded samples the
    mean fraction is within 0.01 of 3/4 and its spread is the binomial one of 400 draws."""
    fractions = []
    rng = np.random.default_rng(1)
    for _ in range(200):
        sample = sparsity.RowSample(rng, size=400)
        sample.add(_batch([0] * 1000, length=4))
        sample.add(_batch([4] * 3000, length=4))
        assert len(sample.counts) == 400 and sample.seen == 4000
        fractions.append(sample.density)
    assert abs(np.mean(fractions) - 0.75) < 0.01
    assert np.std(fractions) == pytest.approx(np.sqrt(0.75 * 0.25 / 400), rel=0.25)
