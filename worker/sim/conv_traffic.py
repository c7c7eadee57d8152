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
from functools import lru_cache

import numpy as np

from worker.sim.memory import DramTraffic
from worker.sim.systolic import IS, OS, WS, ceil_div
from worker.sim.workload import ConvGeometry, GemmOp, TrainingPass

POS, OFF, REP = "pos", "off", "rep"


def supports_tensor_traffic(conv: ConvGeometry | None) -> bool:
    return conv is not None and conv.dilation_h == 1 and conv.dilation_w == 1


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

    def covered(self, a: np.ndarray, b: np.ndarray, r0: int, r1: int) -> np.ndarray:
        """(K, H) indicator: input row ih is touched by output rows [a, b], kernel rows [r0, r1]."""
        shift = np.arange(self.height) + self.pad
        first = -((r1 - shift) // self.stride)  # ceil((ih + pad - r1) / stride)
        last = (shift - r0) // self.stride
        lo = np.maximum(np.maximum(first, 0), a[:, None])
        hi = np.minimum(np.minimum(last, self.out_h - 1), b[:, None])
        return lo <= hi

    def rows(self, a: np.ndarray, b: np.ndarray, r0: int, r1: int) -> np.ndarray:
        """Input rows touched by output rows [a, b] with kernel rows [r0, r1], per element."""
        keys, inverse = np.unique(a * self.out_h + b, return_inverse=True)
        counts = self.covered(keys // self.out_h, keys % self.out_h, r0, r1).sum(1)
        return counts[inverse.ravel()]

    def rows_both(
        self,
        a: np.ndarray,
        b: np.ndarray,
        r_first: tuple[int, int],
        c: np.ndarray,
        d: np.ndarray,
        r_second: tuple[int, int],
    ) -> np.ndarray:
        """Input rows touched both by ([a, b], r_first) and by ([c, d], r_second)."""
        h = self.out_h
        keys, inverse = np.unique(((a * h + b) * h + c) * h + d, return_inverse=True)
        ab, cd = keys // (h * h), keys % (h * h)
        both = self.covered(ab // h, ab % h, *r_first) & self.covered(cd // h, cd % h, *r_second)
        return both.sum(1)[inverse.ravel()]


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


def _image_range(
    tiles: _PositionTiles, idx: np.ndarray, image: np.ndarray, out_h: int
) -> tuple[np.ndarray, np.ndarray]:
    """Output rows [a, b] of `image` inside tile `idx` (the image must lie in the tile)."""
    a = np.where(image == tiles.n0[idx], tiles.a0[idx], 0)
    b = np.where(image == tiles.n1[idx], tiles.b1[idx], out_h - 1)
    return a, b


def _tile_rows(g: _Rows, tiles: _PositionTiles, r0: int, r1: int) -> np.ndarray:
    """Rows per channel touched by each position tile with kernel rows [r0, r1]."""
    one_image = tiles.n0 == tiles.n1
    head = g.rows(tiles.a0, np.where(one_image, tiles.b1, g.out_h - 1), r0, r1)
    tail = g.rows(np.zeros_like(tiles.b1), tiles.b1, r0, r1)
    full = g.rows(np.zeros(1, np.int64), np.full(1, g.out_h - 1), r0, r1)[0]
    middle = np.maximum(tiles.n1 - tiles.n0 - 1, 0)
    return np.where(one_image, head, head + tail + middle * full)


def _pair_rows(
    g: _Rows,
    tiles: _PositionTiles,
    i_prev: np.ndarray,
    r_prev: tuple[int, int],
    i_next: np.ndarray,
    r_next: tuple[int, int],
) -> np.ndarray:
    """Rows per channel touched by both (tile i_prev, kernel rows r_prev) and (i_next, r_next)."""
    first = np.maximum(tiles.n0[i_prev], tiles.n0[i_next])
    last = np.minimum(tiles.n1[i_prev], tiles.n1[i_next])
    shared = last >= first

    def both(image: np.ndarray) -> np.ndarray:
        a, b = _image_range(tiles, i_prev, image, g.out_h)
        c, d = _image_range(tiles, i_next, image, g.out_h)
        return g.rows_both(a, b, r_prev, c, d, r_next)

    ends = both(first) + np.where(last > first, both(last), 0)
    zero, end = np.zeros(1, np.int64), np.full(1, g.out_h - 1)
    whole = g.rows_both(zero, end, r_prev, zero, end, r_next)[0]
    middle = np.maximum(last - first - 1, 0)
    return np.where(shared, ends + middle * whole, 0)


@dataclass(frozen=True)
class _OffsetTiles:
    """Tiles of consecutive window offsets (c, r, s): each channel's kernel rows inside a tile.

    `pieces` lists (tile, channel, r0, r1) for every channel a tile touches, in order."""

    count: int
    tile: np.ndarray
    channel: np.ndarray
    r0: np.ndarray
    r1: np.ndarray


def _offset_tiles(g: _Rows, tile: int | None) -> _OffsetTiles:
    block = g.kernel_h * g.kernel_w
    total = g.offsets
    step = total if tile is None else tile
    cuts = np.union1d(np.arange(0, total, block), np.arange(0, total, step))
    ends = np.append(cuts[1:], total)
    channel = cuts // block
    return _OffsetTiles(
        count=int(ceil_div(total, step)),
        tile=cuts // step,
        channel=channel,
        r0=(cuts - channel * block) // g.kernel_w,
        r1=(ends - 1 - channel * block) // g.kernel_w,
    )


@dataclass(frozen=True)
class FoldRows:
    """Per fold (SCALE-Sim order): rows touched, and rows shared with the previous fold."""

    rows: np.ndarray
    shared_with_previous: np.ndarray  # [0] is 0
    touched: int  # distinct rows over all folds
    image_rows: int  # every row of the tensor (N * Cg * H)
    row_words: int


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
    dims = dict([outer, inner])
    pos = _position_tiles(g, dims.get(POS))
    off = _offset_tiles(g, dims.get(OFF))
    n_pos, n_off = len(pos.n0), off.count

    # Rows of every (position tile, offset tile): sum over the offset tile's channel pieces.
    ranges, piece_range = np.unique(np.stack([off.r0, off.r1], 1), axis=0, return_inverse=True)
    piece_range = piece_range.ravel()
    per_range = np.stack([_tile_rows(g, pos, int(a), int(b)) for a, b in ranges])  # (ranges, n_pos)
    mix = np.zeros((n_off, len(ranges)), dtype=np.int64)
    np.add.at(mix, (off.tile, piece_range), 1)
    size = (mix @ per_range).T  # (n_pos, n_off)

    # The folds in order, as (position tile, offset tile) indices.
    counts = {POS: n_pos, OFF: n_off, REP: inner[1] if inner[0] == REP else outer[1]}
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
    fold_size = size[p_idx, q_idx]
    shared = np.zeros_like(fold_size)
    if len(fold_size) > 1:
        shared[1:] = _shared_rows(g, pos, off, mix, ranges, p_idx, q_idx)
    everything = _tile_rows(g, _position_tiles(g, None), 0, g.kernel_h - 1)
    touched = int(everything[0]) * g.channels
    return FoldRows(
        rows=fold_size,
        shared_with_previous=shared,
        touched=touched,
        image_rows=g.batch * g.channels * g.height,
        row_words=g.width,
    )


def _shared_rows(
    g: _Rows,
    pos: _PositionTiles,
    off: _OffsetTiles,
    mix: np.ndarray,
    ranges: np.ndarray,
    p_idx: np.ndarray,
    q_idx: np.ndarray,
) -> np.ndarray:
    """Rows each fold shares with the fold before it."""
    p_prev, p_next, q_prev, q_next = p_idx[:-1], p_idx[1:], q_idx[:-1], q_idx[1:]
    shared = np.zeros(len(p_next), dtype=np.int64)

    # Same offset tile: every channel piece of the tile, with its own kernel rows.
    same = q_prev == q_next
    if same.any():
        n_pos = len(pos.n0)
        keys, inverse = np.unique(p_prev[same] * n_pos + p_next[same], return_inverse=True)
        pairs = np.stack([keys // n_pos, keys % n_pos], 1)
        per_pair = np.zeros((len(pairs), len(ranges)), dtype=np.int64)
        for r, (a, b) in enumerate(ranges):
            kernel_rows = int(a), int(b)
            per_pair[:, r] = _pair_rows(g, pos, pairs[:, 0], kernel_rows, pairs[:, 1], kernel_rows)
        shared[same] = (per_pair[inverse.ravel()] * mix[q_next[same]]).sum(1)

    # Different offset tiles share at most one channel (tiles are disjoint runs of offsets, and a
    # tile holds one piece per channel): the larger of their first channels, if both hold it.
    differ = np.flatnonzero(~same)
    if len(differ):
        first_piece = np.searchsorted(off.tile, np.arange(off.count))
        last_piece = np.searchsorted(off.tile, np.arange(off.count), side="right") - 1
        qa, qb = q_prev[differ], q_next[differ]
        ca, cb = off.channel[first_piece[qa]], off.channel[first_piece[qb]]
        channel = np.maximum(ca, cb)
        common = channel <= np.minimum(off.channel[last_piece[qa]], off.channel[last_piece[qb]])
        last = len(off.r0) - 1  # (clipped where the tiles share no channel; those are unused)
        piece_a = np.minimum(first_piece[qa] + channel - ca, last)
        piece_b = np.minimum(first_piece[qb] + channel - cb, last)
        k = g.kernel_h
        combo = ((off.r0[piece_a] * k + off.r1[piece_a]) * k + off.r0[piece_b]) * k + off.r1[
            piece_b
        ]
        for key in np.unique(combo[common]):
            f = np.flatnonzero(common & (combo == key))
            r0a, r1a, r0b, r1b = key // k**3, key // k**2 % k, key // k % k, key % k
            shared[differ[f]] = _pair_rows(
                g, pos, p_prev[differ[f]], (int(r0a), int(r1a)),
                p_next[differ[f]], (int(r0b), int(r1b)),
            )  # fmt: skip
    return shared


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
