"""Zero-skipping: how many cycles a sparsity-aware array spends streaming a sparse GEMM.

A zero-skipping PE checks the operand streamed into it and gates the MAC when it is zero; the time
saved depends on which dimension is streamed (see backend.sim.systolic for the mapping):

- Output stationary streams k. PE row i consumes row i of A and PE column j column j of B, each an
  index-tagged list of non-zeros, so a lane only spends as many steps as its operand has non-zeros
  along k. All lanes of a fold advance together, so the busiest lane in the tile sets the fold's
  pace (load imbalance). The array skips the zeros of the sparser operand (lower density; A on a
  tie): for row tile t, T_fold = max over its R rows of nnz(A row). The per-lane counts are the
  measured `a_row_nnz` / `b_col_nnz`; without them every lane gets ceil(density * k).
- Weight stationary streams the m rows of A through a k-tile of B held in the PE rows. Lanes are
  chained by the partial-sum reduction, so only a vector that is entirely zero over the tile's
  r rows of k can be skipped. For a row with z non-zeros out of k, placed at random, that happens
  with probability C(k - r, z) / C(k, z) (exact for z = 0 or z = k); with no per-row counts,
  (1 - density)^r.
- Input stationary is the mirror image: the n columns of B stream through a k-tile of A.

PEs gate a MAC when either operand is zero, even when its cycle cannot be saved; with zeros
independent between operands, actual MACs = effective MACs x density_a x density_b.

Counts were measured on full GEMM rows; when MERCURY shrinks m or folds k, the per-lane counts are
rescaled (rows kept at random, non-zeros scaled with k). Operands stay stored dense, so SRAM and
DRAM traffic do not change.

The closed form is split for speed: lane_steps depends on the lane tile only (rows, or columns
when output stationary skips B), other_folds multiplies it by the folds of the other dimension.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from backend.sim.systolic import IS, OS, WS
from backend.sim.workload import GemmOp


def skips_a(op: GemmOp) -> bool:
    """Output stationary skips the zeros of the sparser operand (A on a tie)."""
    return op.density_a <= op.density_b


def lane_tile_is_rows(dataflow: np.ndarray, skip_a: np.ndarray) -> np.ndarray:
    """Whether the lanes whose busiest member sets the pace are PE rows (else PE columns)."""
    return ~((dataflow == OS) & ~skip_a)


def other_folds(
    m: np.ndarray,
    n: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    dataflow: np.ndarray,
    skip_a: np.ndarray,
) -> np.ndarray:
    """Folds along the dimension the lanes do not tile: each repeats the lane steps."""
    return np.where(
        dataflow == OS,
        np.where(skip_a, -(-n // cols), -(-m // rows)),
        np.where(dataflow == WS, -(-n // cols), -(-m // cols)),
    )


def lane_steps(
    op: GemmOp, m: int, k: int, n: int, tile: int, dataflow: int, memo: dict | None = None
) -> float:
    """Streamed steps of one group of `op` (effective dims m x k x n) over the folds of one lane
    tile of `tile` PE rows (or columns): times other_folds gives the GEMM's streamed steps.
    `memo` keeps the per-lane counts rescaled to k between calls on the same op."""
    memo = {} if memo is None else memo
    if dataflow == OS:
        a = skips_a(op)
        counts, density = (op.a_row_nnz, op.density_a) if a else (op.b_col_nnz, op.density_b)
        key = ("lanes", id(op), a, k)
        if key not in memo:
            memo[key] = _lane_nnz(counts, density, op.k, k)
        lanes = memo[key]
        swept = m if a else n
        return _busiest_per_tile(lanes, tile) * (-(-swept // tile) / -(-len(lanes) // tile))
    if dataflow not in (WS, IS):
        raise ValueError(f"unknown dataflow code {dataflow}")
    a = dataflow == WS
    counts, density = (op.a_row_nnz, op.density_a) if a else (op.b_col_nnz, op.density_b)
    key = ("nnz", id(op), a, k)
    if key not in memo:
        memo[key] = _nnz_histogram(counts, op.k, k)
    return _streamed_vectors(memo[key], density, k, m if a else n, tile)


def gated_mac_fraction(density_a: np.ndarray, density_b: np.ndarray) -> np.ndarray:
    return density_a * density_b


def _lane_nnz(counts: np.ndarray | None, density: float, k_measured: int, k: int) -> np.ndarray:
    if counts is None or len(counts) == 0:
        return np.array([np.ceil(density * k)])
    scaled = np.ceil(np.asarray(counts, dtype=np.float64) * (k / k_measured))
    return np.clip(scaled, 0, k)


def _busiest_per_tile(lanes: np.ndarray, tile: int) -> float:
    """Sum over tiles of `tile` consecutive lanes of the largest lane count."""
    pad = -len(lanes) % tile
    padded = np.concatenate([lanes, np.zeros(pad)]) if pad else lanes
    return float(padded.reshape(-1, tile).max(axis=1).sum())


def _nnz_histogram(
    counts: np.ndarray | None, k_measured: int, k: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct per-vector non-zero counts rescaled to k, and the share of vectors with each."""
    if counts is None or len(counts) == 0:
        return None
    z = np.clip(np.round(np.asarray(counts, dtype=np.float64) * (k / k_measured)), 0, k)
    values, occurrences = np.unique(z.astype(np.int64), return_counts=True)
    return values, occurrences / len(z)


def _streamed_vectors(
    histogram: tuple[np.ndarray, np.ndarray] | None,
    density: float,
    k: int,
    vectors: int,
    rows: int,
) -> float:
    """Sum over the k-tiles of the vectors that are not entirely zero within the tile."""
    full_tiles, last = divmod(k, rows)
    total = 0.0
    for r, count in ((rows, full_tiles), (last, 1 if last else 0)):
        if count:
            total += count * vectors * (1.0 - _zero_vector_fraction(histogram, density, k, r))
    return total


def _zero_vector_fraction(
    histogram: tuple[np.ndarray, np.ndarray] | None, density: float, k: int, r: int
) -> float:
    if histogram is None:
        return float((1.0 - density) ** r)
    z, share = histogram
    log_fact = _log_factorials(k)
    possible = z <= k - r
    zz = np.where(possible, z, 0)
    # C(k - r, z) / C(k, z) = (k - r)! (k - z)! / ((k - r - z)! k!)
    log_p = log_fact[k - r] + log_fact[k - zz] - log_fact[k - r - zz] - log_fact[k]
    return float((np.where(possible, np.exp(log_p), 0.0) * share).sum())


@lru_cache(maxsize=32)
def _log_factorials(k: int) -> np.ndarray:
    """log(x!) for x = 0..k."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, k + 1)))])
