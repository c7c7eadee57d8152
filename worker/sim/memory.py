"""DRAM traffic from tiling the GEMM into the SRAMs, and the stalls when DRAM cannot keep up.

Each SRAM is double-buffered: half holds the working set while the other half is filled, so an
operand's capacity is half its SRAM in words. The folds run in SCALE-Sim's order (column folds
outer, row folds inner; see worker.sim.systolic), which fixes what is reused:

- os: a column fold's B tile (k x C) serves every row fold; A is swept once per column fold.
- ws: B tiles are stationary and read once; A is swept once per column fold; each column fold's
  m x C partial sums accumulate over the row (k) folds.
- is: A tiles are stationary and read once; B is swept once per column (m) fold; each column
  fold's C x n partial sums accumulate over the row (k) folds.

A swept operand of W words with capacity S is read W + (sweeps - 1) * max(0, W - S) times: the part
that fits stays resident, the rest is fetched again each sweep. Partial sums that overflow the
OFMAP half are written out and read back once per extra row fold. Outputs are written once.

Stalls: transfers overlap compute (double buffering), but the array cannot start before the first
fold's operands have arrived, nor finish before all traffic has moved. The layer takes the larger
of these two bounds: total = max(compute + ceil(first / bw), ceil(words / bw)), so
stall = max(ceil(first / bw), ceil(words / bw) - compute).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.specs.accelerator import AcceleratorConfig
from worker.sim.systolic import IS, OS, WS, ArrayMapping
from worker.sim.workload import GemmOp, TrainingPass


@dataclass(frozen=True)
class DramTraffic:
    ifmap_reads: np.ndarray
    filter_reads: np.ndarray
    ofmap_reads: np.ndarray  # partial sums read back after a spill
    ofmap_writes: np.ndarray
    first_fold_words: np.ndarray

    @property
    def reads(self) -> np.ndarray:
        return self.ifmap_reads + self.filter_reads + self.ofmap_reads

    @property
    def words(self) -> np.ndarray:
        return self.reads + self.ofmap_writes

    def stored(self, per_element: dict[str, np.ndarray]) -> DramTraffic:
        """The traffic with each operand moved in its storage format (words per element, see
        stored_words_per_element). Spilled partial sums move dense; C's final write, its
        stored format."""
        final_writes = self.ofmap_writes - self.ofmap_reads
        return DramTraffic(
            ifmap_reads=self.ifmap_reads * per_element["ifmap"],
            filter_reads=self.filter_reads * per_element["filter"],
            ofmap_reads=self.ofmap_reads,
            ofmap_writes=final_writes * per_element["ofmap"] + self.ofmap_reads,
            first_fold_words=self.first_fold_words,
        )


def dram_traffic(
    m: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    mapping: ArrayMapping,
    rows: np.ndarray,
    cols: np.ndarray,
    df: np.ndarray,
    ifmap_words: np.ndarray,
    filter_words: np.ndarray,
    ofmap_words: np.ndarray,
) -> DramTraffic:
    """Words moved for one group of one GEMM; *_words are SRAM capacities in words."""
    cap_a, cap_b, cap_c = ifmap_words // 2, filter_words // 2, ofmap_words // 2
    a_words, b_words, c_words = m * k, k * n, m * n
    row_folds, col_folds = mapping.row_folds, mapping.col_folds

    swept_a = a_words + (col_folds - 1) * np.maximum(0, a_words - cap_a)
    ifmap_reads = np.where(df == IS, a_words, swept_a)

    # Tiles are as wide as the array (a partly filled last tile still takes a full-width slot),
    # which keeps traffic monotone in every dimension.
    b_tile = k * np.minimum(n, cols)
    os_b = b_words + (row_folds - 1) * col_folds * np.maximum(0, b_tile - cap_b)
    is_b = b_words + (col_folds - 1) * np.maximum(0, b_words - cap_b)
    filter_reads = np.where(df == OS, os_b, np.where(df == WS, b_words, is_b))

    psum_tile = np.where(df == WS, m * np.minimum(n, cols), np.minimum(m, cols) * n)
    spilled = np.where(df == OS, 0, (row_folds - 1) * col_folds * np.maximum(0, psum_tile - cap_c))
    first_r = np.minimum(k, rows)
    first_fold_words = np.where(
        df == OS,
        np.minimum(m, rows) * k + k * np.minimum(n, cols),
        np.where(
            df == WS,
            first_r * np.minimum(n, cols) + m * first_r,
            first_r * np.minimum(m, cols) + n * first_r,
        ),
    )
    return DramTraffic(
        ifmap_reads=np.ceil(ifmap_reads),
        filter_reads=np.ceil(filter_reads),
        ofmap_reads=np.ceil(spilled),
        ofmap_writes=np.ceil(c_words + spilled),
        first_fold_words=first_fold_words,
    )


def stall_cycles(
    traffic: DramTraffic, compute_cycles: np.ndarray, bandwidth: np.ndarray
) -> np.ndarray:
    words = traffic.words
    prologue = np.ceil(np.minimum(traffic.first_fold_words, words) / bandwidth)
    return np.maximum(prologue, np.ceil(words / bandwidth) - compute_cycles)


_FORMAT_CODES = {"dense": 0, "bitmap": 1, "compressed": 2}
# Which kind of tensor each operand of each pass holds (worker.sim.lowering).
_OPERAND_KINDS = {
    TrainingPass.FWD: ("activations", "weights", "activations"),
    TrainingPass.BWD_DATA: ("gradients", "weights", "gradients"),
    TrainingPass.BWD_WEIGHT: ("gradients", "activations", "gradients"),
}


def stored_words_per_element(
    accels: list[AcceleratorConfig], ops: list[GemmOp]
) -> dict[str, np.ndarray] | None:
    """(configs x GEMMs) words per element of A ("ifmap"), B ("filter") and C ("ofmap") in each
    accelerator's storage format, at the GEMM's measured densities; None when every accelerator
    stores everything dense (one word per element)."""
    kinds = ("activations", "gradients", "weights")
    codes = np.asarray(
        [[_FORMAT_CODES[getattr(a.storage, kind)] for kind in kinds] for a in accels]
    )  # (configs, kinds)
    if not codes.any():
        return None
    word_bits = np.asarray([8.0 * a.word_bytes for a in accels]).reshape(-1, 1)
    index_bits = np.asarray([float(a.storage.index_bits) for a in accels]).reshape(-1, 1)
    densities = [
        [op.density_a for op in ops],
        [op.density_b for op in ops],
        [op.density_c for op in ops],
    ]
    out = {}
    for slot, name in enumerate(("ifmap", "filter", "ofmap")):
        kind = np.asarray([kinds.index(_OPERAND_KINDS[op.pass_][slot]) for op in ops])
        fmt = codes[:, kind]  # (configs, GEMMs)
        d = np.asarray(densities[slot], dtype=np.float64).reshape(1, -1)
        out[name] = np.where(
            fmt == 0,
            1.0,
            np.where(fmt == 1, d + 1.0 / word_bits, d * (1.0 + index_bits / word_bits)),
        )
    return out
