"""DRAM traffic of a convolution's real tensors, for accelerators that form windows on chip.

With `conv_operand_traffic = "tensor"` the im2col operands of a convolution's GEMMs are not
moved as im2col matrices. Three operands change (the others, dY and the weights, are real tensors
in the im2col convention already and keep worker.sim.memory's model):

    pass        operand   im2col words           tensor: what moves
    FWD         A         P x Cg*R*S windows      input rows (n, c, ih) read from DRAM
    BWD-WEIGHT  B         P x Cg*R*S windows      input rows (n, c, ih) read from DRAM
    BWD-DATA    C         P x Cg*R*S partials     dX rows (n, c, ih) accumulated on chip
                                                  (col2im) and written in image space

The unit of transfer is a ROW of a feature map: W words of one (image n, channel c, input row ih),
as a row-stationary or line-buffered accelerator moves them. A fold needs the rows its windows
touch: for output rows oh in [a, b] of an image and kernel rows r in [r0, r1] (dilation 1), input
row ih is touched iff some oh in [a, b] has oh*stride - pad + r = ih for some r in [r0, r1], i.e.
iff [ceil((ih + pad - r1) / stride), floor((ih + pad - r0) / stride)] meets [a, b] and
[0, OH - 1]. Summing that indicator over the H input rows gives every count below in closed form
per row; counts are summed over the folds with numpy.

Folds run in SCALE-Sim's order (column folds outer, row folds inner). Each fold touches a set of
rows, given by its tile of output positions (P = N*OH*OW, row-major) and its tile of window
offsets (Cg*R*S, channel-major, then r, then s); a GEMM dimension that is not a window dimension
(the Kg filters) only repeats the fold. Residency (per operand, per SRAM half of S words):

- If all rows the GEMM touches fit in one half, each is moved once.
- Otherwise a fold moves the rows it touches minus those of the previous fold, which the other
  half still holds when they fit in a half (the halo between consecutive tiles, and a repeated
  tile). Anything older has been overwritten and moves again.
- Outputs (dX): a fold's rows stay on chip for the next fold under the same rule; a row leaving
  the chip is written, and read back when a later fold updates it again. Rows no window touches
  are zero and written once; the whole dX fits in the OFMAP half -> written once, never read.

These are the same rules for reads of the input and for dX; tests/sim/test_conv_traffic.py checks
the counts against a fold-by-fold loop over the real elements of the tensors.

Open choices, stated: whole rows move (columns a tile does not need come along: a row is the
transfer unit); a fold's own rows are assumed to fit its half while it runs; dilation > 1 is not
modelled (such convolutions keep the im2col convention, and the simulation says so). Whole rows
cost more than the windows when tiles are few positions wide and the rows long (small
input-stationary arrays): there, per operand and layer, the accelerator moves the windows
instead (the smaller of the two counts is taken, as a compiler choosing its transfer would).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from worker.sim.memory import DramTraffic
from worker.sim.systolic import IS, OS, WS, ceil_div
from worker.sim.workload import ConvGeometry, GemmOp, TrainingPass

POS, OFF, REP = "pos", "off", "rep"


def supports_tensor_traffic(conv: ConvGeometry | None) -> bool:
    return conv is not None and conv.dilation_h == 1 and conv.dilation_w == 1


@dataclass(frozen=True)
class _Span:
    """Input rows {ih in [lo, hi] : (ih - phase) mod stride < length} of one image: the rows that
    output rows oh in [a, b] read through kernel rows [r0, r1], as ih = oh*stride - pad + r."""

    lo: np.ndarray
    hi: np.ndarray
    phase: np.ndarray
    length: np.ndarray


@dataclass(frozen=True)
class _Rows:
    """One group's feature-map geometry along the height axis (rows are W words)."""

    batch: int
    channels: int  # Cg
    height: int
    width: int
    out_h: int
    out_w: int
    kernel_h: int
    kernel_w: int
    stride: int
    pad: int

    @property
    def positions(self) -> int:
        return self.batch * self.out_h * self.out_w

    @property
    def offsets(self) -> int:
        return self.channels * self.kernel_h * self.kernel_w

    def span(self, a: np.ndarray, b: np.ndarray, r0: np.ndarray, r1: np.ndarray) -> _Span:
        """Input rows touched by output rows [a, b] with kernel rows [r0, r1] (dilation 1)."""
        phase = r0 - self.pad
        return _Span(
            lo=np.maximum(a * self.stride + phase, 0),
            hi=np.minimum(b * self.stride - self.pad + r1, self.height - 1),
            phase=phase,
            length=r1 - r0 + 1,
        )

    def count_both(self, x: _Span, y: _Span) -> np.ndarray:
        """|x & y|: the rows of [max lo, min hi] whose residue mod stride both spans admit."""
        s = self.stride
        lo, hi = np.maximum(x.lo, y.lo), np.minimum(x.hi, y.hi)
        if s == 1:  # every residue admitted (a span's length is at least 1)
            return np.maximum(hi - lo + 1, 0)
        total = np.zeros(np.broadcast(lo, hi).shape, dtype=np.int64)
        for residue in range(s):
            admitted = ((residue - x.phase) % s < x.length) & ((residue - y.phase) % s < y.length)
            in_range = (hi - residue) // s - (lo - 1 - residue) // s
            total += admitted * np.maximum(in_range, 0)
        return total


def _rows_geometry(conv: ConvGeometry) -> _Rows:
    return _Rows(
        batch=conv.batch,
        channels=conv.in_channels // conv.groups,
        height=conv.height,
        width=conv.width,
        out_h=conv.out_h,
        out_w=conv.out_w,
        kernel_h=conv.kernel_h,
        kernel_w=conv.kernel_w,
        stride=conv.stride_h,
        pad=conv.pad_h,
    )


@dataclass(frozen=True)
class _PositionTiles:
    """Tiles of consecutive output positions: first image and output row, last image and row."""

    n0: np.ndarray
    a0: np.ndarray
    n1: np.ndarray
    b1: np.ndarray

    def take(self, idx: np.ndarray) -> _PositionTiles:
        return _PositionTiles(self.n0[idx], self.a0[idx], self.n1[idx], self.b1[idx])

    def image_rows(self, image: np.ndarray, out_h: int) -> tuple[np.ndarray, np.ndarray]:
        """Output rows [a, b] of `image` inside each tile (the image must lie in the tile)."""
        a = np.where(image == self.n0, self.a0, 0)
        b = np.where(image == self.n1, self.b1, out_h - 1)
        return a, b


def _position_tiles(g: _Rows, tile: int | None) -> _PositionTiles:
    if tile is None:  # one tile holding every position
        one = np.zeros(1, dtype=np.int64)
        return _PositionTiles(one, one, one + g.batch - 1, one + g.out_h - 1)
    per_image = g.out_h * g.out_w
    start = np.arange(0, g.positions, tile, dtype=np.int64)
    last = np.minimum(start + tile, g.positions) - 1
    return _PositionTiles(
        start // per_image, (start % per_image) // g.out_w, last // per_image,
        (last % per_image) // g.out_w,
    )  # fmt: skip


def _tile_rows(g: _Rows, t: _PositionTiles, r0: np.ndarray, r1: np.ndarray) -> np.ndarray:
    """Rows per channel touched by each position tile with kernel rows [r0, r1]: its first
    image's, its last image's, and every row a window reaches in the whole images between."""
    one_image = t.n0 == t.n1
    head = g.span(t.a0, np.where(one_image, t.b1, g.out_h - 1), r0, r1)
    rows = g.count_both(head, head)
    if one_image.all():
        return rows
    tail = g.span(0, t.b1, r0, r1)
    full = g.span(0, g.out_h - 1, r0, r1)
    middle = np.maximum(t.n1 - t.n0 - 1, 0)
    return rows + np.where(
        one_image, 0, g.count_both(tail, tail) + middle * g.count_both(full, full)
    )


def _pair_rows(
    g: _Rows,
    prev: _PositionTiles,
    r_prev: tuple[np.ndarray, np.ndarray],
    next_: _PositionTiles,
    r_next: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """Rows per channel touched both by (tile prev, kernel rows r_prev) and (next_, r_next):
    the images both tiles hold, the first and last of them partly, those between whole."""
    first = np.maximum(prev.n0, next_.n0)
    last = np.minimum(prev.n1, next_.n1)

    def both(image: np.ndarray) -> np.ndarray:
        a, b = prev.image_rows(image, g.out_h)
        c, d = next_.image_rows(image, g.out_h)
        return g.count_both(g.span(a, b, *r_prev), g.span(c, d, *r_next))

    rows = both(first)
    if (last > first).any():
        rows += np.where(last > first, both(last), 0)
        middle = np.maximum(last - first - 1, 0)
        end = g.out_h - 1
        rows += middle * g.count_both(g.span(0, end, *r_prev), g.span(0, end, *r_next))
    return np.where(last >= first, rows, 0)


@dataclass(frozen=True)
class _OffsetTiles:
    """Tiles of consecutive window offsets (c, r, s), channel-major: offsets [start, end)."""

    start: np.ndarray
    end: np.ndarray
    first_channel: np.ndarray
    last_channel: np.ndarray


def _offset_tiles(g: _Rows, tile: int | None) -> _OffsetTiles:
    block = g.kernel_h * g.kernel_w
    step = g.offsets if tile is None else tile
    start = np.arange(0, g.offsets, step, dtype=np.int64)
    end = np.minimum(start + step, g.offsets)
    return _OffsetTiles(start, end, start // block, (end - 1) // block)


def _kernel_rows(
    g: _Rows, start: np.ndarray, end: np.ndarray, channel: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Kernel rows [r0, r1] of `channel` among the offsets [start, end) of a tile."""
    block = g.kernel_h * g.kernel_w
    first = np.maximum(start, channel * block) - channel * block
    last = np.minimum(end, (channel + 1) * block) - 1 - channel * block
    return first // g.kernel_w, last // g.kernel_w


@dataclass(frozen=True)
class FoldRows:
    """Per fold (SCALE-Sim order): rows touched, and rows shared with the previous fold.

    The per-fold counts are computed on first use: when the whole tensor fits one SRAM half,
    the traffic needs only `touched` or `image_rows`."""

    geometry: _Rows
    outer: tuple[str, int]
    inner: tuple[str, int]
    touched: int  # distinct rows over all folds
    image_rows: int  # every row of the tensor (N * Cg * H)
    row_words: int

    @cached_property
    def _counts(self) -> tuple[np.ndarray, np.ndarray]:
        return _fold_counts(self.geometry, self.outer, self.inner)

    @property
    def rows(self) -> np.ndarray:
        return self._counts[0]

    @property
    def shared_with_previous(self) -> np.ndarray:  # [0] is 0
        return self._counts[1]


def _fold_order(
    operand: TrainingPass, dataflow: int, rows: int, cols: int, filters: int
) -> tuple[tuple[str, int], tuple[str, int]]:
    """(outer, inner) fold dimensions: (POS|OFF, tile size) or (REP, repeats)."""
    row_reps, col_reps = int(ceil_div(filters, rows)), int(ceil_div(filters, cols))
    orders = {
        (TrainingPass.FWD, OS): ((REP, col_reps), (POS, rows)),
        (TrainingPass.FWD, WS): ((REP, col_reps), (OFF, rows)),
        (TrainingPass.FWD, IS): ((POS, cols), (OFF, rows)),
        (TrainingPass.BWD_WEIGHT, OS): ((OFF, cols), (REP, row_reps)),
        (TrainingPass.BWD_WEIGHT, WS): ((OFF, cols), (POS, rows)),
        (TrainingPass.BWD_WEIGHT, IS): ((REP, col_reps), (POS, rows)),
        (TrainingPass.BWD_DATA, OS): ((OFF, cols), (POS, rows)),
        (TrainingPass.BWD_DATA, WS): ((OFF, cols), (REP, row_reps)),
        (TrainingPass.BWD_DATA, IS): ((POS, cols), (REP, row_reps)),
    }
    return orders[(operand, dataflow)]


@lru_cache(maxsize=512)
def fold_rows(
    conv: ConvGeometry, pass_: TrainingPass, dataflow: int, rows: int, cols: int
) -> FoldRows:
    """The rows of the pass's im2col operand (FWD A, BWD-WEIGHT B, BWD-DATA C) fold by fold."""
    g = _rows_geometry(conv)
    outer, inner = _fold_order(pass_, dataflow, rows, cols, conv.out_channels // conv.groups)
    everything = _tile_rows(g, _position_tiles(g, None), 0, g.kernel_h - 1)
    return FoldRows(
        geometry=g,
        outer=outer,
        inner=inner,
        touched=int(everything[0]) * g.channels,
        image_rows=g.batch * g.channels * g.height,
        row_words=g.width,
    )


def _fold_counts(
    g: _Rows, outer: tuple[str, int], inner: tuple[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, rows shared with the previous fold) per fold.

    A fold's offset tile holds, per channel it touches, one piece of kernel rows: its first
    channel's, its last channel's, and whole kernels for the channels between. Each count below
    is a sum over those pieces, every piece of every fold evaluated in one vectorised pass and
    summed back per fold."""
    dims = dict([outer, inner])
    pos = _position_tiles(g, dims.get(POS))
    off = _offset_tiles(g, dims.get(OFF))

    # The folds in order, as (position tile, offset tile) indices.
    counts = {POS: len(pos.n0), OFF: len(off.start)}
    counts[REP] = inner[1] if inner[0] == REP else outer[1]
    o_idx, i_idx = np.meshgrid(
        np.arange(counts[outer[0]]), np.arange(counts[inner[0]]), indexing="ij"
    )
    o_idx, i_idx = o_idx.ravel(), i_idx.ravel()

    def index(kind: str) -> np.ndarray:
        if outer[0] == kind:
            return o_idx
        if inner[0] == kind:
            return i_idx
        return np.zeros_like(o_idx)

    p_idx, q_idx = index(POS), index(OFF)
    folds = len(p_idx)
    start, end = off.start[q_idx], off.end[q_idx]
    first, last = off.first_channel[q_idx], off.last_channel[q_idx]
    whole_kernel = (np.zeros_like(first), np.full_like(first, g.kernel_h - 1))
    first_rows, last_rows = _kernel_rows(g, start, end, first), _kernel_rows(g, start, end, last)
    between = np.maximum(last - first - 1, 0)

    # A fold's rows are the rows it shares with itself. Rows shared with the fold before: the
    # same offset tile, each piece with itself; different offset tiles (disjoint runs of
    # offsets) share at most one channel, the larger of their first channels, if both hold it.
    # Count bins: [0, folds) each fold's rows, folds + f - 1 what fold f shares with fold f - 1.
    every, prev, nxt = np.arange(folds), np.arange(folds - 1), np.arange(1, folds)
    same = q_idx[prev] == q_idx[nxt]
    channel = np.maximum(first[prev], first[nxt])
    common = ~same & (channel <= np.minimum(last[prev], last[nxt]))
    shared_bin = folds + prev
    pieces = _Pieces.of(
        2 * folds - 1,
        [
            (every, p_idx, first_rows, p_idx, first_rows, 1),
            (every, p_idx, last_rows, p_idx, last_rows, last > first),
            (every, p_idx, whole_kernel, p_idx, whole_kernel, between),
            (shared_bin, p_idx[prev], _at(first_rows, nxt), p_idx[nxt], _at(first_rows, nxt), same),
            (shared_bin, p_idx[prev], _at(last_rows, nxt), p_idx[nxt], _at(last_rows, nxt),
             same & (last[nxt] > first[nxt])),
            (shared_bin, p_idx[prev], _at(whole_kernel, nxt), p_idx[nxt], _at(whole_kernel, nxt),
             same * between[nxt]),
            (shared_bin, p_idx[prev], _kernel_rows(g, start[prev], end[prev], channel),
             p_idx[nxt], _kernel_rows(g, start[nxt], end[nxt], channel), common),
        ],
    )  # fmt: skip
    counts = pieces.total(
        _pair_rows(g, pos.take(pieces.tile_prev), pieces.r_prev, pos.take(pieces.tile_next),
                   pieces.r_next)
    )  # fmt: skip
    return counts[:folds], np.concatenate([[0], counts[folds:]])


def _at(rows: tuple[np.ndarray, np.ndarray], idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return rows[0][idx], rows[1][idx]


@dataclass(frozen=True)
class _Pieces:
    """Channel pieces to count: each a pair (position tile, kernel rows) x (position tile,
    kernel rows) whose common rows go, times a multiplicity, into a bin; pieces of
    multiplicity 0 are left out."""

    bins: int
    bin: np.ndarray
    tile_prev: np.ndarray
    r_prev: tuple[np.ndarray, np.ndarray]
    tile_next: np.ndarray
    r_next: tuple[np.ndarray, np.ndarray]
    weight: np.ndarray

    @classmethod
    def of(cls, bins: int, parts: list[tuple]) -> _Pieces:
        """`parts`: (bin, tile_prev, r_prev, tile_next, r_next, weight), one per kind of piece."""
        blocks = []
        for b, tp, rp, tn, rn, w in parts:
            block = np.empty((8, len(b)), dtype=np.int64)
            block[0], block[1], block[2:4], block[4], block[5:7], block[7] = b, tp, rp, tn, rn, w
            blocks.append(block)
        table = np.concatenate(blocks, axis=1)
        b, tp, r0p, r1p, tn, r0n, r1n, w = table[:, table[7] != 0]
        return cls(bins, b, tp, (r0p, r1p), tn, (r0n, r1n), w)

    def total(self, per_piece: np.ndarray) -> np.ndarray:
        """Per bin: the sum of its pieces' counts times their multiplicities."""
        summed = np.bincount(self.bin, weights=per_piece * self.weight, minlength=self.bins)
        return summed.astype(np.int64)


def input_reads(folds: FoldRows, half_words: float) -> float:
    """Words of input rows read from DRAM for one group."""
    w = folds.row_words
    if folds.touched * w <= half_words:
        return float(folds.touched * w)
    held = folds.rows[:-1] * w <= half_words
    refetched = folds.rows.sum() - (folds.shared_with_previous[1:] * held).sum()
    return float(refetched * w)


def output_traffic(folds: FoldRows, half_words: float) -> tuple[float, float]:
    """(writes, reads) of dX in image space for one group."""
    w = folds.row_words
    if folds.image_rows * w <= half_words:
        return float(folds.image_rows * w), 0.0
    held = folds.rows[:-1] * w <= half_words
    written = folds.rows.sum() - (folds.shared_with_previous[1:] * held).sum()
    untouched = folds.image_rows - folds.touched
    return float((written + untouched) * w), float((written - folds.touched) * w)


def with_tensor_traffic(
    traffic: DramTraffic,
    ops: list[GemmOp],
    tensor: np.ndarray,
    on_array: np.ndarray,
    df: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    half_words: dict[str, np.ndarray],
) -> DramTraffic:
    """`traffic` (configs x GEMMs, im2col convention) with the real-tensor counts put in for the
    configs flagged in `tensor` and the GEMMs that carry a supported convolution geometry."""
    shape = on_array.shape

    def writable(values: np.ndarray) -> np.ndarray:
        return np.array(np.broadcast_to(values, shape), dtype=np.float64)

    ifmap, filt = writable(traffic.ifmap_reads), writable(traffic.filter_reads)
    ofmap_reads, ofmap_writes = writable(traffic.ofmap_reads), writable(traffic.ofmap_writes)
    configs = np.flatnonzero(tensor.reshape(-1))
    for i, op in enumerate(ops):
        if not supports_tensor_traffic(op.conv):
            continue
        for p in configs:
            if not on_array[p, i]:
                continue
            folds = fold_rows(op.conv, op.pass_, int(df[p, 0]), int(rows[p, 0]), int(cols[p, 0]))
            if op.pass_ is TrainingPass.FWD:
                rows_read = input_reads(folds, float(half_words["ifmap"][p, 0]))
                ifmap[p, i] = min(ifmap[p, i], rows_read)
            elif op.pass_ is TrainingPass.BWD_WEIGHT:
                rows_read = input_reads(folds, float(half_words["filter"][p, 0]))
                filt[p, i] = min(filt[p, i], rows_read)
            else:
                writes, reads = output_traffic(folds, float(half_words["ofmap"][p, 0]))
                if writes + reads < ofmap_writes[p, i] + ofmap_reads[p, i]:
                    ofmap_writes[p, i], ofmap_reads[p, i] = writes, reads
    return DramTraffic(
        ifmap_reads=ifmap,
        filter_reads=filt,
        ofmap_reads=ofmap_reads,
        ofmap_writes=ofmap_writes,
        first_fold_words=traffic.first_fold_words,
    )


def tensor_traffic_notes(ops: list[GemmOp]) -> list[str]:
    """What a simulation under "tensor" traffic must say about GEMMs that keep the im2col
    convention: a workload none of whose GEMMs carries convolution geometry (stored before
    geometry was recorded, or without convolutions: linear layers and attention move the same
    words either way), and dilated convolutions."""
    notes = []
    if ops and all(op.conv is None for op in ops):
        notes.append(
            "no GEMM of this workload carries convolution geometry (stored before it was "
            "recorded, or no convolutions): any convolution moved im2col matrices"
        )
    dilated = sorted({op.layer for op in ops if op.conv and not supports_tensor_traffic(op.conv)})
    if dilated:
        notes.append("dilated convolutions moved im2col matrices: " + ", ".join(dilated))
    return notes
