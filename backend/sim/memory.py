"""DRAM traffic from tiling the GEMM into the SRAMs, and the stalls when DRAM cannot keep up.

This module moves GEMM operands as matrices: SCALE-Sim's convention, where a convolution's
operands are im2col matrices (every window copied). With `conv_operand_traffic = "tensor"` the
im2col operands of a convolution (FWD A, BWD-WEIGHT B, BWD-DATA C) are replaced by the real
feature maps, counted in backend.sim.conv_traffic; dY and the weights are real tensors already.

Each SRAM is double-buffered: half holds the working set while the other half is filled, so an
operand's capacity is half its SRAM in words. The folds run in SCALE-Sim's order (column folds
outer, row folds inner; see backend.sim.systolic), which fixes what is reused:

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

Reuse (MERCURY; applied in backend.sim.simulate): the array computes a reduced GEMM, FWD without
its hit rows, BWD-WEIGHT with each hit group's positions folded into one. The tiling above is the
reduced GEMM's (it sets the folds and every re-read), and the words it leaves out that still move
are added once each: every A element left out is read once (a hit row's window, which its
signature needs; every dY of a folded group, summed on chip as it streams in) and every hit
row's output is written once (the copy lands in the output tensor the next layer reads whole).
B is the reduced GEMM's (FWD: the weights; BWD-WEIGHT: only the groups' representative windows).
BWD-WEIGHT's later sweeps of A (os, ws: one per column fold) need the group sums again: the sums
that do not stay resident are written out once, packed (single-position groups too) and in
A's storage format, after the first sweep (max(0, m * k_folded - S) elements) and re-read like
any swept operand; summing the dY again from DRAM on each sweep would move more.

Storage formats (stored_words_per_element): an accelerator may store activations, gradients and
weights dense, as a bitmap or compressed. A tensor with non-zero fraction d then takes, per
element, 1 word (dense), d + 1/w (bitmap: values plus a presence bit; w bits per word) or
d * (1 + index_bits / w) (compressed: each non-zero with its index) in DRAM and in the SRAM
requests of the array; spilled partial sums are dense, C's final write is in C's format. With
`storage.dense_fallback` (the default) a tensor is stored dense where its format would be larger
(min(1, the format's words): a compressed tensor of density above 1 / (1 + index_bits / w),
2/3 for 16-bit indices in 32-bit words, moves dense), decided per tensor at its measured density,
not per tile or mini-batch (a finer choice would save more where density varies). The
densities are the workload's measured ones: A and B as the GEMM reads them (after ReLU, pruning),
C as the GEMM writes it (`density_c`; FWD before any activation, since the models run
activations as separate layers; 1.0 where not measured). The tiling above is kept dense (fold
counts and SRAM capacities in dense words), so a compressed operand's reuse is not credited with
the extra room it leaves in SRAM: a conservative choice.

Compared with SCALE-Sim v3.0.0 in its USER bandwidth mode (benchmarks/sim_vs_scalesim.py prints
the table), with the same array, dataflow, SRAM sizes and bandwidth, on its own conv and GEMM
topologies. Dense compute cycles are equal (tests/sim/test_scalesim_equality.py); the traffic
and stalls differ systematically, for these reasons:

1. Re-fetching: SCALE-Sim's read buffers prefetch each operand's address trace in order through
   an active/prefetch window and keep nothing beyond it, so an operand that is read again (A once
   per column fold, os's B once per row fold) comes from DRAM again unless the whole trace fits
   the window. On GEMMs it reads far more: e.g. 128x288x32 on a 16x16 ws array with 64 KB
   SRAMs, 360,470 ifmap words against our 40,960 (A is 36,864 words, swept twice); with 8 KB
   SRAMs on 32x32 os it reads the 28x28x16 conv's 97,344 im2col words 8 times (783,100). We keep
   what fits one SRAM half resident across sweeps and re-read only the rest.
2. Weight-stationary partial sums: SCALE-Sim writes the ofmap to DRAM after every row (k) fold,
   so its WS ofmap writes are row_folds x m x n (97,351 for the 28x28x16 3x3->16 conv on 16x16
   ws, 9 x 10,816); we accumulate partial sums in the OFMAP SRAM and spill only what does not fit
   a half (10,816 writes there).
3. The initial fill: SCALE-Sim's "Total Cycles" start after the first operands have arrived (its
   "Total Cycles (incl. prefetch)" include them); our total cycles always include that prologue.
4. Bandwidth: our `dram_bandwidth` is one DRAM interface shared by all operands, a hard cap in
   words per cycle. SCALE-Sim's USER bandwidth is per operand buffer, and its v3 banked read
   buffers are not capped by it: on the 28x28x16 conv (16x16 os, bandwidth 4) its ifmap buffer
   took 98,340 words in 12,108 cycles (8.1 per cycle). So on layers whose traffic exceeds
   bandwidth x compute cycles we stall more than it does (20,135 against 2,332 stall cycles
   there), while on GEMMs where its re-fetching dominates (1.) it stalls more.
5. Convolutions: both count im2col traffic under "im2col" (98,340 against our 97,344 ifmap words
   on that conv: SCALE-Sim reads a few words past the tiles); a row-stationary or line-buffered
   array moves 12,544, the real input, which is what "tensor" counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from backend.sim.systolic import IS, OS, WS, ArrayMapping
from backend.sim.workload import GemmOp, TrainingPass


@dataclass(frozen=True)
class DramTraffic:
    ifmap_reads: np.ndarray
    filter_reads: np.ndarray
    ofmap_reads: np.ndarray  # partial sums read back after a spill
    ofmap_writes: np.ndarray
    first_fold_words: np.ndarray
    # A's own writes: BWD-WEIGHT's folded group sums written out for later sweeps (Reuse).
    ifmap_writes: np.ndarray | float = 0.0

    @property
    def reads(self) -> np.ndarray:
        return self.ifmap_reads + self.filter_reads + self.ofmap_reads

    @property
    def words(self) -> np.ndarray:
        return self.reads + self.ofmap_writes + self.ifmap_writes

    def stored(self, per_element: dict[str, np.ndarray]) -> DramTraffic:
        """The traffic with each operand moved in its storage format (words per element, see
        stored_words_per_element). Spilled partial sums move dense; C's final write, its
        stored format; A's writes (folded group sums), A's."""
        final_writes = self.ofmap_writes - self.ofmap_reads
        return DramTraffic(
            ifmap_reads=self.ifmap_reads * per_element["ifmap"],
            filter_reads=self.filter_reads * per_element["filter"],
            ofmap_reads=self.ofmap_reads,
            ofmap_writes=final_writes * per_element["ofmap"] + self.ofmap_reads,
            first_fold_words=self.first_fold_words,
            ifmap_writes=self.ifmap_writes * per_element["ifmap"],
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


STORAGE_CODES = {"dense": 0, "bitmap": 1, "compressed": 2}
# Which kind of tensor each operand of each pass holds (backend.sim.lowering).
_OPERAND_KINDS = {
    TrainingPass.FWD: ("activations", "weights", "activations"),
    TrainingPass.BWD_DATA: ("gradients", "weights", "gradients"),
    TrainingPass.BWD_WEIGHT: ("gradients", "activations", "gradients"),
}


STORAGE_KINDS = ("activations", "gradients", "weights")


def stored_words_per_element(
    cfg: Mapping[str, np.ndarray], ops: list[GemmOp]
) -> dict[str, np.ndarray] | None:
    """(configs x GEMMs) words per element of A ("ifmap"), B ("filter") and C ("ofmap") in each
    accelerator's storage format, at the GEMM's measured densities; None when every accelerator
    stores everything dense (one word per element). `cfg`: the accelerators' fields as (P, 1)
    columns (backend.sim.simulate.ConfigColumns): storage.<kind> as STORAGE_CODES,
    storage.index_bits, storage.dense_fallback, word_bytes."""
    codes = np.concatenate([cfg[f"storage.{kind}"] for kind in STORAGE_KINDS], axis=1)
    if not codes.any():
        return None
    word_bits = 8.0 * cfg["word_bytes"]
    index_bits = cfg["storage.index_bits"].astype(np.float64)
    fallback = cfg["storage.dense_fallback"]
    densities = [
        [op.density_a for op in ops],
        [op.density_b for op in ops],
        [op.density_c for op in ops],
    ]
    out = {}
    for slot, name in enumerate(("ifmap", "filter", "ofmap")):
        kind = np.asarray([STORAGE_KINDS.index(_OPERAND_KINDS[op.pass_][slot]) for op in ops])
        fmt = codes[:, kind]  # (configs, GEMMs)
        d = np.asarray(densities[slot], dtype=np.float64).reshape(1, -1)
        words = np.where(
            fmt == 0,
            1.0,
            np.where(fmt == 1, d + 1.0 / word_bits, d * (1.0 + index_bits / word_bits)),
        )
        out[name] = np.where(fallback, np.minimum(words, 1.0), words)
    return out
