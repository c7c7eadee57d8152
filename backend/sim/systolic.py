"""Dense systolic-array compute, exactly as SCALE-Sim v3.0.0 counts it, vectorised with numpy.

A GEMM multiplies A (m x k, "ifmap") by B (k x n, "filter") into C (m x n, "ofmap"). Each
dataflow maps two GEMM dimensions onto the array (Sr onto the R rows, Sc onto the C columns) and
streams the third over time (T):

    dataflow  Sr  Sc  T   cycles per fold
    os        m   n   k   R + C + T - 2      (A rows and B columns stream in, outputs drain)
    ws        k   n   m   2R + C + T - 2     (B tile loaded, A streams, partial sums drain)
    is        k   m   n   2R + C + T - 2     (A tile loaded, B streams, partial sums drain)

Folds = ceil(Sr / R) * ceil(Sc / C), one after the other. SCALE-Sim's "Total Cycles" is the index
of the last cycle (cycles - 1), and its mapping efficiency is the mean over folds of the fraction of
PEs holding work; both are reproduced here, as are its SRAM request counts, including the
(R + C) extra OFMAP writes per fold it books under output stationary.

Every function takes arrays that broadcast together (GEMMs x accelerator configs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DATAFLOW_CODES = {"os": 0, "ws": 1, "is": 2, "row": 3}
OS, WS, IS = 0, 1, 2
ROW = 3  # the 1-D convolution dataflow (backend.sim.row_dataflow); not a systolic mapping


def ceil_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return -(-a // b)


@dataclass(frozen=True)
class ArrayMapping:
    """How one GEMM lands on one array: spatial dims, temporal dim and fold counts."""

    spatial_rows: np.ndarray  # Sr
    spatial_cols: np.ndarray  # Sc
    temporal: np.ndarray  # T
    row_folds: np.ndarray
    col_folds: np.ndarray
    fill_drain: np.ndarray  # cycles per fold on top of T

    @property
    def folds(self) -> np.ndarray:
        return self.row_folds * self.col_folds


def map_gemm(
    m: np.ndarray, k: np.ndarray, n: np.ndarray, rows: np.ndarray, cols: np.ndarray, df: np.ndarray
) -> ArrayMapping:
    spatial_rows, spatial_cols, temporal, rows, cols, df = np.broadcast_arrays(
        np.where(df == OS, m, k),
        np.where(df == IS, m, n),
        np.where(df == OS, k, np.where(df == WS, m, n)),
        rows,
        cols,
        df,
    )
    return ArrayMapping(
        spatial_rows=spatial_rows,
        spatial_cols=spatial_cols,
        temporal=temporal,
        row_folds=ceil_div(spatial_rows, rows),
        col_folds=ceil_div(spatial_cols, cols),
        fill_drain=np.where(df == OS, rows + cols - 2, 2 * rows + cols - 2),
    )


@dataclass(frozen=True)
class DenseCompute:
    """SCALE-Sim's figures for one dense GEMM (one group)."""

    cycles: np.ndarray  # SCALE-Sim "Total Cycles" without stalls
    mapping_efficiency: np.ndarray  # 0..1
    ifmap_reads: np.ndarray
    filter_reads: np.ndarray
    ofmap_writes: np.ndarray


def dense_compute(
    m: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    df: np.ndarray,
) -> DenseCompute:
    mp = map_gemm(m, k, n, rows, cols, df)
    cycles = mp.folds * (mp.temporal + mp.fill_drain) - 1
    # The mean over a grid of folds of (rows used / R) * (cols used / C) factorises; an empty
    # GEMM (no folds) maps nothing.
    mapping_efficiency = (mp.spatial_rows / (np.maximum(mp.row_folds, 1) * rows)) * (
        mp.spatial_cols / (np.maximum(mp.col_folds, 1) * cols)
    )
    a_words, b_words, c_words = m * k, k * n, m * n
    ifmap_reads = np.where(df == IS, a_words, mp.col_folds * a_words)
    filter_reads = np.where(
        df == WS, b_words, np.where(df == OS, mp.row_folds, mp.col_folds) * b_words
    )
    ofmap_writes = np.where(df == OS, c_words + mp.folds * (rows + cols), mp.row_folds * c_words)
    return DenseCompute(
        cycles=cycles,
        mapping_efficiency=mapping_efficiency,
        ifmap_reads=ifmap_reads,
        filter_reads=filter_reads,
        ofmap_writes=ofmap_writes,
    )
