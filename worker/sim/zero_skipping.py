"""Zero-skipping: how many cycles a sparsity-aware array spends streaming a sparse GEMM.

A zero-skipping PE checks the operand streamed into it and gates the MAC when it is zero; the time
saved depends on which dimension is streamed (see worker.sim.systolic for the mapping):

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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from worker.sim.systolic import IS, OS, WS
from worker.sim.workload import GemmOp


@dataclass(frozen=True)
class SparseStream:
    temporal_cycles: float  # sum over folds of the streamed steps, replacing folds * T
    mac_fraction: float  # actual / effective MACs


def sparse_stream(
    op: GemmOp,
    m: int,
    k: int,
    n: int,
    rows: int,
    cols: int,
    dataflow: int,
) -> SparseStream:
    """Streamed steps of one group of `op` with effective dims m x k x n on a rows x cols array."""
    if dataflow == OS:
        skip_a = op.density_a <= op.density_b
        if skip_a:
            lanes = _lane_nnz(op.a_row_nnz, op.density_a, op.k, k)
            busy = _busiest_per_tile(lanes, rows) * (-(-m // rows) / -(-len(lanes) // rows))
            return SparseStream(float(busy * -(-n // cols)), _gated_mac_fraction(op))
        lanes = _lane_nnz(op.b_col_nnz, op.density_b, op.k, k)
        busy = _busiest_per_tile(lanes, cols) * (-(-n // cols) / -(-len(lanes) // cols))
        return SparseStream(float(busy * -(-m // rows)), _gated_mac_fraction(op))
    if dataflow == WS:
        steps = _streamed_vectors(op.a_row_nnz, op.density_a, op.k, k, m, rows)
        return SparseStream(steps * -(-n // cols), _gated_mac_fraction(op))
    if dataflow == IS:
        steps = _streamed_vectors(op.b_col_nnz, op.density_b, op.k, k, n, rows)
        return SparseStream(steps * -(-m // cols), _gated_mac_fraction(op))
    raise ValueError(f"unknown dataflow code {dataflow}")


def _gated_mac_fraction(op: GemmOp) -> float:
    return op.density_a * op.density_b


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


def _streamed_vectors(
    counts: np.ndarray | None, density: float, k_measured: int, k: int, vectors: int, rows: int
) -> float:
    """Sum over the k-tiles of the vectors that are not entirely zero within the tile."""
    full_tiles, last = divmod(k, rows)
    tile_sizes = [rows] * full_tiles + ([last] if last else [])
    total = 0.0
    for r, count in _tile_size_counts(tile_sizes):
        total += count * vectors * (1.0 - _zero_vector_fraction(counts, density, k_measured, k, r))
    return total


def _tile_size_counts(sizes: list[int]) -> list[tuple[int, int]]:
    out: dict[int, int] = {}
    for size in sizes:
        out[size] = out.get(size, 0) + 1
    return list(out.items())


def _zero_vector_fraction(
    counts: np.ndarray | None, density: float, k_measured: int, k: int, r: int
) -> float:
    if counts is None or len(counts) == 0:
        return float((1.0 - density) ** r)
    z = np.clip(np.round(np.asarray(counts, dtype=np.float64) * (k / k_measured)), 0, k)
    z = z.astype(np.int64)
    log_fact = _log_factorials(k)
    possible = z <= k - r
    zz = np.where(possible, z, 0)
    # C(k - r, z) / C(k, z) = (k - r)! (k - z)! / ((k - r - z)! k!)
    log_p = log_fact[k - r] + log_fact[k - zz] - log_fact[k - r - zz] - log_fact[k]
    return float(np.where(possible, np.exp(log_p), 0.0).mean())


@lru_cache(maxsize=32)
def _log_factorials(k: int) -> np.ndarray:
    """log(x!) for x = 0..k."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, k + 1)))])
