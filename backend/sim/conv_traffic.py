"""DRAM traffic of a convolution's real tensors, for accelerators that form windows on chip.

With `conv_operand_traffic = "tensor"` the im2col operands of a convolution's GEMMs are not
moved as im2col matrices. Three operands change (the others, dY and the weights, are real tensors
in the im2col convention already and keep backend.sim.memory's model):

    pass        operand   im2col words           tensor: what moves
    FWD         A         P x Cg*R*S windows      input rows (n, c, ih) read from DRAM
    BWD-WEIGHT  B         P x Cg*R*S windows      input rows (n, c, ih) read from DRAM
    BWD-DATA    C         P x Cg*R*S partials     dX rows (n, c, ih) accumulated on chip
                                                  (col2im) and written in image space

The unit of transfer is a ROW of a feature map: W words of one (image n, channel c, input row ih),
as a row-stationary or line-buffered accelerator moves them. Output rows oh in [a, b] of an image
read, through kernel rows [r0, r1] (dilation 1), the input rows ih = oh*stride - pad + r: the
strided span {ih in [max(0, a*stride - pad + r0), min(H - 1, b*stride - pad + r1)] :
(ih - r0 + pad) mod stride < r1 - r0 + 1}. The rows two such spans share are counted in closed
form (per residue mod stride), so no count enumerates rows: every count below is a sum of span
intersections, evaluated for all the folds of all the GEMMs of a config in one vectorised pass.

Folds run in SCALE-Sim's order (column folds outer, row folds inner). Each fold touches a set of
rows, given by its tile of output positions (P = N*OH*OW, row-major) and its tile of window
offsets (Cg*R*S, channel-major, then r, then s); a GEMM dimension that is not a window dimension
(the Kg filters) only repeats the fold, which makes the order periodic: each distinct fold and
each distinct transition between consecutive folds is counted once, with its multiplicity.

Residency (per operand, per SRAM half of S words):

- If all rows the GEMM touches fit in one half, each is moved once.
- Otherwise a fold moves the rows it touches minus those of the previous fold, which the other
  half still holds when they fit in a half (the halo between consecutive tiles, and a repeated
  tile). Anything older has been overwritten and moves again.
- Outputs (dX): a fold's rows stay on chip for the next fold under the same rule; a row leaving
  the chip is written, and read back when a later fold updates it again. Rows no window touches
  are zero and written once; the whole dX fits in the OFMAP half -> written once, never read.

These are the same rules for reads of the input and for dX; tests/sim/test_conv_traffic.py checks
the counts against a fold-by-fold loop over the real elements of the tensors.

Two ways to the same counts: FoldRows lists one config's folds and transitions (the reference,
used for a few configs); moved_rows counts many configs of one GEMM at once, from per-tile-size
tables of rows per kernel-row interval and the offset tiles' few distinct patterns (below,
"Counting for many accelerators at once"); tests/sim/test_design_search.py holds them equal.

Open choices, stated: whole rows move (columns a tile does not need come along: a row is the
transfer unit); a fold's own rows are assumed to fit its half while it runs; dilation > 1 is not
modelled (such convolutions keep the im2col convention, and the simulation says so). Whole rows
cost more than the windows when tiles are few positions wide and the rows long (small
input-stationary arrays): there, per operand and layer, the accelerator moves the windows
instead (the smaller of the two counts is taken, as a compiler choosing its transfer would).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property, lru_cache

import numpy as np

from backend.sim.memory import DramTraffic
from backend.sim.systolic import IS, OS, WS, ceil_div
from backend.sim.workload import ConvGeometry, GemmOp, TrainingPass

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
class _Pairs:
    """Pairs (position tile, kernel rows) x (position tile, kernel rows) of one channel, whose
    common input rows go, times a multiplicity, into a bin; a fold's rows are the rows it
    shares with itself. Pairs of many GEMMs are counted together, each carrying its geometry."""

    bin: np.ndarray
    n0: np.ndarray  # the first tile: images n0..n1, from row a0 to row b1; kernel rows r0..r1
    a0: np.ndarray
    n1: np.ndarray
    b1: np.ndarray
    r0: np.ndarray
    r1: np.ndarray
    m0: np.ndarray  # the second tile, likewise: m0, c0, m1, d1; kernel rows q0..q1
    c0: np.ndarray
    m1: np.ndarray
    d1: np.ndarray
    q0: np.ndarray
    q1: np.ndarray
    weight: np.ndarray
    out_h: np.ndarray
    height: np.ndarray
    stride: np.ndarray
    pad: np.ndarray

    def take(self, idx: np.ndarray) -> _Pairs:
        return _Pairs(*(getattr(self, f.name)[idx] for f in fields(self)))


@dataclass(frozen=True)
class _Span:
    """Input rows {ih in [lo, hi] : (ih - phase) mod stride < length} of one image: the rows that
    output rows oh in [a, b] read through kernel rows [r0, r1], as ih = oh*stride - pad + r."""

    lo: np.ndarray
    hi: np.ndarray
    phase: np.ndarray
    length: np.ndarray


def _span(t: _Pairs, a: np.ndarray, b: np.ndarray, r0: np.ndarray, r1: np.ndarray) -> _Span:
    phase = r0 - t.pad
    return _Span(
        lo=np.maximum(a * t.stride + phase, 0),
        hi=np.minimum(b * t.stride - t.pad + r1, t.height - 1),
        phase=phase,
        length=r1 - r0 + 1,
    )


def _count_both(stride: np.ndarray, x: _Span, y: _Span) -> np.ndarray:
    """|x & y|: the rows of [max lo, min hi] whose residue mod stride both spans admit (with
    stride 1, every row: a span's length is at least 1)."""
    lo, hi = np.maximum(x.lo, y.lo), np.minimum(x.hi, y.hi)
    total = np.maximum(hi - lo + 1, 0)
    strided = np.flatnonzero(stride > 1)
    if len(strided) == 0:
        return total
    s, lo, hi = stride[strided], lo[strided], hi[strided]
    x_phase, x_length = x.phase[strided], x.length[strided]
    y_phase, y_length = y.phase[strided], y.length[strided]
    counted = np.zeros(len(strided), dtype=np.int64)
    for residue in range(int(s.max())):
        admitted = (
            (residue < s)
            & ((residue - x_phase) % s < x_length)
            & ((residue - y_phase) % s < y_length)
        )
        in_range = (hi - residue) // s - (lo - 1 - residue) // s
        counted += admitted * np.maximum(in_range, 0)
    total[strided] = counted
    return total


def _count_pairs(t: _Pairs, bins: int) -> np.ndarray:
    """Per bin: the rows common to each pair's two (tile, kernel rows), times its multiplicity.
    Two tiles share the images both hold: the first and last of them partly, those between
    whole (every output row); most pairs share one image at most."""
    first, last = np.maximum(t.n0, t.m0), np.minimum(t.n1, t.m1)
    rows = np.where(last >= first, _count_in_image(t, first), 0)
    more = np.flatnonzero(last > first)
    if len(more):
        m = t.take(more)
        end = m.out_h - 1
        whole = _count_both(m.stride, _span(m, 0, end, m.r0, m.r1), _span(m, 0, end, m.q0, m.q1))
        middle = last[more] - first[more] - 1
        rows[more] += _count_in_image(m, last[more]) + middle * whole
    return np.bincount(t.bin, weights=rows * t.weight, minlength=bins).astype(np.int64)


def _count_in_image(t: _Pairs, image: np.ndarray) -> np.ndarray:
    """Rows of `image` (which both tiles of each pair hold) common to the pair."""
    end = t.out_h - 1
    a, b = np.where(image == t.n0, t.a0, 0), np.where(image == t.n1, t.b1, end)
    c, d = np.where(image == t.m0, t.c0, 0), np.where(image == t.m1, t.d1, end)
    return _count_both(t.stride, _span(t, a, b, t.r0, t.r1), _span(t, c, d, t.q0, t.q1))


@dataclass(frozen=True)
class _PositionTiles:
    """Tiles of consecutive output positions: first image and output row, last image and row,
    as the rows of a (4, tiles) array."""

    n0_a0_n1_b1: np.ndarray


def _position_tiles(g: _Rows, tile: int | None) -> _PositionTiles:
    if tile is None:  # one tile holding every position
        return _PositionTiles(np.array([[0], [0], [g.batch - 1], [g.out_h - 1]]))
    per_image = g.out_h * g.out_w
    start = np.arange(0, g.positions, tile, dtype=np.int64)
    last = np.minimum(start + tile, g.positions) - 1
    return _PositionTiles(
        np.stack([start // per_image, (start % per_image) // g.out_w, last // per_image,
                  (last % per_image) // g.out_w])
    )  # fmt: skip


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


def _kernel_rows(g: _Rows, start: np.ndarray, end: np.ndarray, channel: np.ndarray) -> np.ndarray:
    """Kernel rows [r0, r1] (a (2, n) array) of `channel` among the offsets [start, end)."""
    block = g.kernel_h * g.kernel_w
    first = np.maximum(start, channel * block) - channel * block
    last = np.minimum(end, (channel + 1) * block) - 1 - channel * block
    return np.stack([first, last]) // g.kernel_w


@dataclass(frozen=True)
class FoldCounts:
    """The folds of one group's operand, each distinct fold and transition listed once.

    A dimension that only repeats the fold (the filters, REP) makes SCALE-Sim's order periodic:
    as the inner loop, each fold runs k times in a row (k - 1 transitions from the fold to
    itself, which shares all its rows); as the outer loop, the inner sequence runs k times (k - 1
    transitions from its last fold back to its first)."""

    rows: np.ndarray  # per listed fold: rows it touches
    repeats: np.ndarray  # how often it runs
    before: np.ndarray  # per transition: rows of the fold before
    shared: np.ndarray  # rows both folds touch
    times: np.ndarray  # how often the transition occurs

    def moved(self, row_words: int, half_words: float) -> int:
        """Rows moved over all folds: each fold's rows, but those the fold before still holds
        in the other SRAM half (when that fold's rows fit one)."""
        held = self.before * row_words <= half_words
        kept = (self.shared * self.times * held).sum()
        return int((self.rows * self.repeats).sum() - kept)


@dataclass(frozen=True)
class FoldRows:
    """The rows of one group's operand fold by fold (SCALE-Sim order), counted on first use (or
    for many GEMMs at once by `count_folds`): when the whole tensor fits one SRAM half, the
    traffic needs only `touched` or `image_rows`."""

    geometry: _Rows
    outer: tuple[str, int]
    inner: tuple[str, int]
    touched: int  # distinct rows over all folds
    image_rows: int  # every row of the tensor (N * Cg * H)
    row_words: int

    @cached_property
    def counts(self) -> FoldCounts:
        (counts,) = _fold_counts([self])
        return counts


def count_folds(many: list[FoldRows]) -> None:
    """Count the folds of every GEMM in `many` not counted yet, all in one vectorised pass."""
    todo = list({id(f): f for f in many if "counts" not in f.__dict__}.values())
    if todo:
        for folds, counts in zip(todo, _fold_counts(todo), strict=True):
            folds.__dict__["counts"] = counts  # what the cached property would have stored


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


@lru_cache(maxsize=4096)
def _tensor_rows(conv: ConvGeometry) -> tuple[int, int, int]:
    """(rows any window touches, rows of the tensor, words per row) of one group's operand."""
    g = _rows_geometry(conv)
    image_rows_read = {
        oh * g.stride - g.pad + r for oh in range(g.out_h) for r in range(g.kernel_h)
    } & set(range(g.height))
    return g.batch * g.channels * len(image_rows_read), g.batch * g.channels * g.height, g.width


@lru_cache(maxsize=512)
def fold_rows(
    conv: ConvGeometry, pass_: TrainingPass, dataflow: int, rows: int, cols: int
) -> FoldRows:
    """The rows of the pass's im2col operand (FWD A, BWD-WEIGHT B, BWD-DATA C) fold by fold."""
    g = _rows_geometry(conv)
    outer, inner = _fold_order(pass_, dataflow, rows, cols, conv.out_channels // conv.groups)
    touched, image_rows, row_words = _tensor_rows(conv)
    return FoldRows(g, outer, inner, touched, image_rows, row_words)


def _fold_counts(many: list[FoldRows]) -> list[FoldCounts]:
    """The fold counts of each GEMM of `many`, every pair counted in one vectorised pass."""
    plans = [_fold_plan(f.geometry, f.outer, f.inner) for f in many]
    bases = np.cumsum([0] + [plan.bins for plan in plans])
    geometry = np.array([[f.geometry.out_h, f.geometry.height, f.geometry.stride,
                          f.geometry.pad] for f in many]).T  # fmt: skip
    gemm = np.repeat(np.arange(len(plans)), [len(plan.weight) for plan in plans])
    pairs = _Pairs(
        np.concatenate([plan.bin + base for plan, base in zip(plans, bases, strict=False)]),
        *np.concatenate([plan.tiles[:, plan.first] for plan in plans], axis=1),
        *np.concatenate([plan.first_rows for plan in plans], axis=1),
        *np.concatenate([plan.tiles[:, plan.second] for plan in plans], axis=1),
        *np.concatenate([plan.second_rows for plan in plans], axis=1),
        np.concatenate([plan.weight for plan in plans]),
        *geometry[:, gemm],
    )
    counts = _count_pairs(pairs, int(bases[-1]))
    out = []
    for plan, base in zip(plans, bases, strict=False):
        listed = len(plan.repeats)
        rows = counts[base : base + listed]
        shared = counts[base + listed : base + plan.bins]
        itself = plan.frm == plan.to  # a fold shares all its rows with itself
        out.append(
            FoldCounts(
                rows=rows,
                repeats=plan.repeats,
                before=rows[plan.frm],
                shared=np.where(itself, rows[plan.to], shared),
                times=plan.times,
            )
        )
    return out


@dataclass(frozen=True)
class _FoldPlan:
    """The listed folds (with repeats), the transitions between them (from, to, times), and the
    pairs whose counts give each listed fold's rows (bins [0, listed)) and the rows shared
    across each transition (bin listed + t; left empty for a fold followed by itself). A pair
    is (listed fold `first`, kernel rows `first_rows`) x (`second`, `second_rows`) of one
    channel, with its multiplicity `weight`; `tiles` holds each listed fold's position tile."""

    repeats: np.ndarray
    frm: np.ndarray
    to: np.ndarray
    times: np.ndarray
    tiles: np.ndarray
    bin: np.ndarray
    first: np.ndarray
    first_rows: np.ndarray
    second: np.ndarray
    second_rows: np.ndarray
    weight: np.ndarray

    @property
    def bins(self) -> int:
        return len(self.repeats) + len(self.frm)


def _fold_plan(g: _Rows, outer: tuple[str, int], inner: tuple[str, int]) -> _FoldPlan:
    """A fold's offset tile holds, per channel it touches, one piece of kernel rows: its first
    channel's, its last channel's, and whole kernels for the channels between. A fold's rows
    pair each piece with itself. Rows shared across a transition: the same offset tile, each
    piece with itself; different offset tiles (disjoint runs of offsets) share at most one
    channel, the larger of their first channels, if both hold it."""
    dims = dict([outer, inner])
    pos = _position_tiles(g, dims.get(POS))
    off = _offset_tiles(g, dims.get(OFF))
    sizes = {POS: pos.n0_a0_n1_b1.shape[1], OFF: len(off.start)}

    if outer[0] == REP or inner[0] == REP:
        kind, k = (inner[0], outer[1]) if outer[0] == REP else (outer[0], inner[1])
        listed = np.arange(sizes[kind])
        p_idx = listed if kind == POS else np.zeros_like(listed)
        q_idx = listed if kind == OFF else np.zeros_like(listed)
        n = len(listed)
        steps = (listed[:-1], listed[1:])
        if outer[0] == REP:  # the sequence runs k times: each step k times, the wrap k - 1
            frm, to = np.append(steps[0], n - 1), np.append(steps[1], 0)
            times = np.append(np.full(n - 1, k), k - 1)
        else:  # each fold runs k times: each step once, each fold after itself k - 1 times
            frm, to = np.concatenate([steps[0], listed]), np.concatenate([steps[1], listed])
            times = np.concatenate([np.ones(n - 1, np.int64), np.full(n, k - 1)])
        repeats = np.full(n, k)
    else:
        o_idx, i_idx = np.meshgrid(
            np.arange(sizes[outer[0]]), np.arange(sizes[inner[0]]), indexing="ij"
        )
        o_idx, i_idx = o_idx.ravel(), i_idx.ravel()
        p_idx, q_idx = (o_idx, i_idx) if outer[0] == POS else (i_idx, o_idx)
        n = len(p_idx)
        frm, to = np.arange(n - 1), np.arange(1, n)
        repeats, times = np.ones(n, np.int64), np.ones(n - 1, np.int64)

    start, end = off.start[q_idx], off.end[q_idx]
    first, last = off.first_channel[q_idx], off.last_channel[q_idx]
    between = np.maximum(last - first - 1, 0)

    # Transitions from a fold to itself need no pair: the fold shares all its rows.
    every, moves = np.arange(n), np.flatnonzero(frm != to)
    a, b = frm[moves], to[moves]
    m = len(moves)
    same = q_idx[a] == q_idx[b]
    channel = np.maximum(first[a], first[b])
    common = ~same & (channel <= np.minimum(last[a], last[b]))
    # Kernel rows of: each fold's first and last channel, the channel shared across each move.
    kernel_rows = _kernel_rows(
        g,
        np.concatenate([start, start, start[a], start[b]]),
        np.concatenate([end, end, end[a], end[b]]),
        np.concatenate([first, last, channel, channel]),
    )
    whole_kernel = np.array([[0], [g.kernel_h - 1]]).repeat(n, axis=1)
    pieces = np.concatenate([kernel_rows[:, : 2 * n], whole_kernel], axis=1)
    next_pieces = pieces.reshape(2, 3, n)[:, :, b].reshape(2, -1)
    shared_channel_rows = kernel_rows[:, 2 * n : 2 * n + m], kernel_rows[:, 2 * n + m :]
    weight = np.concatenate(
        [np.ones_like(first), last > first, between,
         same, same & (last[b] > first[b]), same * between[b], common]
    )  # fmt: skip
    keep = np.flatnonzero(weight)
    return _FoldPlan(
        repeats=repeats,
        frm=frm,
        to=to,
        times=times,
        tiles=pos.n0_a0_n1_b1[:, p_idx],
        bin=np.concatenate([every, every, every] + [n + moves] * 4)[keep],
        first=np.concatenate([every, every, every, a, a, a, a])[keep],
        first_rows=np.concatenate([pieces, next_pieces, shared_channel_rows[0]], 1)[:, keep],
        second=np.concatenate([every, every, every, b, b, b, b])[keep],
        second_rows=np.concatenate([pieces, next_pieces, shared_channel_rows[1]], 1)[:, keep],
        weight=weight[keep],
    )


def _fit_one_half(rows: int, row_words: int, half_words: float) -> bool:
    """Residency's first rule: rows that fit one SRAM half are each moved once."""
    return rows * row_words <= half_words


def input_reads(folds: FoldRows, half_words: float) -> float:
    """Words of input rows read from DRAM for one group."""
    w = folds.row_words
    if _fit_one_half(folds.touched, w, half_words):
        return float(folds.touched * w)
    return float(folds.counts.moved(w, half_words) * w)


def output_traffic(folds: FoldRows, half_words: float) -> tuple[float, float]:
    """(writes, reads) of dX in image space for one group."""
    w = folds.row_words
    if _fit_one_half(folds.image_rows, w, half_words):
        return float(folds.image_rows * w), 0.0
    written = folds.counts.moved(w, half_words)
    untouched = folds.image_rows - folds.touched
    return float((written + untouched) * w), float((written - folds.touched) * w)


# From this many configs of one GEMM on, moved_rows counts them together (the same numbers).
BATCHED_FROM = 32

_HALF_OF_PASS = {
    TrainingPass.FWD: "ifmap",
    TrainingPass.BWD_WEIGHT: "filter",
    TrainingPass.BWD_DATA: "ofmap",
}


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
    configs flagged in `tensor` and the GEMMs that carry a supported convolution geometry:
    per GEMM, every config at once (moved_rows), or, below BATCHED_FROM configs, each config's
    FoldRows (input_reads, output_traffic): the same numbers."""
    shape = on_array.shape

    def writable(values: np.ndarray) -> np.ndarray:
        return np.array(np.broadcast_to(values, shape), dtype=np.float64)

    ifmap, filt = writable(traffic.ifmap_reads), writable(traffic.filter_reads)
    ofmap_reads, ofmap_writes = writable(traffic.ofmap_reads), writable(traffic.ofmap_writes)
    flagged = tensor.reshape(-1)
    for i, op in enumerate(ops):
        if not supports_tensor_traffic(op.conv):
            continue
        p = np.flatnonzero(flagged & on_array[:, i])
        if not len(p):
            continue
        touched, image_rows, w = _tensor_rows(op.conv)
        half = half_words[_HALF_OF_PASS[op.pass_]][p, 0]
        output = op.pass_ is TrainingPass.BWD_DATA
        fits = (image_rows if output else touched) * w <= half
        moved = np.zeros(len(p), dtype=np.int64)
        spill = np.flatnonzero(~fits)
        q = p[spill]
        if len(spill) >= BATCHED_FROM:
            moved[spill] = moved_rows(
                op.conv, op.pass_, df[q, 0], rows[q, 0], cols[q, 0], half[spill] // w
            )
        elif len(spill):  # a few configs: fold by fold costs less than setting up the batch
            moved[spill] = [
                fold_rows(op.conv, op.pass_, int(f), int(r), int(c)).counts.moved(w, float(h))
                for f, r, c, h in zip(df[q, 0], rows[q, 0], cols[q, 0], half[spill], strict=True)
            ]
        if not output:
            reads = np.where(fits, touched, moved) * w
            target = ifmap if op.pass_ is TrainingPass.FWD else filt
            target[p, i] = np.minimum(target[p, i], reads.astype(np.float64))
            continue
        writes = np.where(fits, image_rows, moved + image_rows - touched) * w
        reads = np.where(fits, 0, moved - touched) * w
        better = writes + reads < ofmap_writes[p, i] + ofmap_reads[p, i]
        ofmap_writes[p[better], i] = writes[better]
        ofmap_reads[p[better], i] = reads[better]
    return DramTraffic(
        ifmap_reads=ifmap,
        filter_reads=filt,
        ofmap_reads=ofmap_reads,
        ofmap_writes=ofmap_writes,
        first_fold_words=traffic.first_fold_words,
        ifmap_writes=traffic.ifmap_writes,
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


# Counting for many accelerators at once (what with_tensor_traffic runs; the FoldRows path above
# is the per-GEMM reference the tests hold it to).
#
# A fold (position tile p, offset tile q) touches, per channel piece of q, the input rows of p's
# output rows through that piece's kernel rows [r0, r1]; channels are alike, so
#     rows(p, q) = C[q] . F[p]
# with C[q] the count of q's pieces per kernel-row interval (its first and last channel's pieces,
# and its whole kernels) and F[p] the rows of tile p per interval. Consecutive folds share, with
# the same offset tile, C[q] . G[p] (G: per interval, the rows tiles p and p' share); with
# different offset tiles, only the channel both hold (at most one), through each one's kernel
# rows. Offset tiles take few distinct C (their starts modulo one kernel), so every transition of
# a sequence is listed once per distinct (C[q], p) with its multiplicity, not once per fold. The
# rows a sequence keeps across transitions are a sum of shared rows over transitions whose
# "before" fits an SRAM half: per config, a search in the transitions sorted by "before".


def _common_rows(
    g: _Rows, ta: np.ndarray, ra: np.ndarray, tb: np.ndarray, rb: np.ndarray
) -> np.ndarray:
    """Rows common to (position tile ta, kernel rows ra) and (tb, rb), element by element:
    tiles as (4, n) arrays (n0, a0, n1, b1), kernel rows as (2, n) arrays (r0, r1)."""
    n = ta.shape[1]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    geometry = [np.full(n, v, dtype=np.int64) for v in (g.out_h, g.height, g.stride, g.pad)]
    pairs = _Pairs(np.arange(n), *ta, *ra, *tb, *rb, np.ones(n, dtype=np.int64), *geometry)
    return _count_pairs(pairs, n)


def _intervals(g: _Rows) -> np.ndarray:
    """Every kernel-row interval [r0, r1] as a (2, I) array; interval slot r0 * R + r1."""
    r0, r1 = np.triu_indices(g.kernel_h)
    return np.stack([r0, r1]).astype(np.int64)


def _slot(g: _Rows, rows: np.ndarray) -> np.ndarray:
    return rows[0] * g.kernel_h + rows[1]


class _PositionTable:
    """Per position tile p and kernel-row interval: the rows p touches (F), the rows p and p + 1
    share (G), and the rows the last and the first tile share per pair of intervals (X); other
    pairs of intervals on demand (`pair`)."""

    def __init__(self, g: _Rows, tile: int | None) -> None:
        self.g = g
        self.tiles = _position_tiles(g, tile).n0_a0_n1_b1
        count = self.tiles.shape[1]
        intervals = _intervals(g)
        width = g.kernel_h * g.kernel_h
        slots = _slot(g, intervals)
        self.F = self._grid(np.arange(count), np.arange(count), intervals, slots, width)
        self.G = self._grid(np.arange(count - 1), np.arange(1, count), intervals, slots, width)
        last, first = np.array([count - 1]), np.array([0])
        ia, ib = np.meshgrid(np.arange(len(slots)), np.arange(len(slots)), indexing="ij")
        x = _common_rows(
            g,
            self.tiles[:, last.repeat(ia.size)],
            intervals[:, ia.ravel()],
            self.tiles[:, first.repeat(ia.size)],
            intervals[:, ib.ravel()],
        )
        self.X = np.zeros((width, width), dtype=np.int64)
        self.X[slots[ia.ravel()], slots[ib.ravel()]] = x
        self._pairs: dict[tuple[int, int, int], np.ndarray] = {}

    def _grid(
        self, pa: np.ndarray, pb: np.ndarray, intervals: np.ndarray, slots: np.ndarray, width: int
    ) -> np.ndarray:
        out = np.zeros((len(pa), width), dtype=np.int64)
        if len(pa):
            n = len(slots)
            counts = _common_rows(
                self.g,
                self.tiles[:, pa.repeat(n)],
                np.tile(intervals, len(pa)),
                self.tiles[:, pb.repeat(n)],
                np.tile(intervals, len(pa)),
            )
            out[:, slots] = counts.reshape(len(pa), n)
        return out

    def pair(self, step: int, sa: int, sb: int) -> np.ndarray:
        """Rows common to (p, interval slot sa) and (p + step, slot sb), per p."""
        key = (step, sa, sb)
        if key not in self._pairs:
            count = self.tiles.shape[1] - step
            p = np.arange(max(count, 0))
            r = self.g.kernel_h
            ra = np.array([[sa // r], [sa % r]]).repeat(len(p), axis=1)
            rb = np.array([[sb // r], [sb % r]]).repeat(len(p), axis=1)
            self._pairs[key] = _common_rows(
                self.g, self.tiles[:, p], ra, self.tiles[:, p + step], rb
            )
        return self._pairs[key]


@lru_cache(maxsize=65536)
def _position_table(g: _Rows, tile: int | None) -> _PositionTable:
    return _PositionTable(g, tile)


@dataclass(frozen=True)
class _OffsetPlan:
    """The offset tiles of one tile size: each tile's pieces per interval slot (C, distinct rows
    `patterns` with their multiplicity), and the transitions between consecutive tiles that
    share a channel (each with the before tile's C row, the shared channel's interval slot in
    either tile, and its multiplicity), and the wrap from the last tile to the first."""

    C: np.ndarray  # (Q, I)
    patterns: np.ndarray  # (distinct, I)
    pattern_count: np.ndarray
    moves: np.ndarray  # (distinct, I + 2): C of the tile before, slot in it, slot in the next
    move_count: np.ndarray
    wrap: tuple[int, int] | None  # the channel shared by the last and the first tile (slots)


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(rows) == 0:
        return rows, np.zeros(0, dtype=np.int64)
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    return distinct, counts.astype(np.int64)


@lru_cache(maxsize=65536)
def _offset_plan(g: _Rows, tile: int | None) -> _OffsetPlan:
    off = _offset_tiles(g, tile)
    count, width = len(off.start), g.kernel_h * g.kernel_h
    first, last = off.first_channel, off.last_channel
    tiles = np.arange(count)
    C = np.zeros((count, width), dtype=np.int64)
    np.add.at(C, (tiles, _slot(g, _kernel_rows(g, off.start, off.end, first))), 1)
    split = last > first
    last_slot = _slot(g, _kernel_rows(g, off.start, off.end, last))
    np.add.at(C, (tiles[split], last_slot[split]), 1)
    C[:, g.kernel_h - 1] += np.maximum(last - first - 1, 0)  # whole kernels: slot of [0, R-1]

    def shared_channel(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        channel = np.maximum(first[a], first[b])
        common = channel <= np.minimum(last[a], last[b])
        sa = _slot(g, _kernel_rows(g, off.start[a], off.end[a], channel))
        sb = _slot(g, _kernel_rows(g, off.start[b], off.end[b], channel))
        return common, sa, sb

    a, b = tiles[:-1], tiles[1:]
    common, sa, sb = shared_channel(a, b)
    moves = np.concatenate([C[a], sa[:, None], sb[:, None]], axis=1)[common]
    wrap = None
    if count > 1:
        w_common, w_sa, w_sb = shared_channel(np.array([count - 1]), np.array([0]))
        wrap = (int(w_sa[0]), int(w_sb[0])) if w_common[0] else None
    return _OffsetPlan(C, *_distinct_rows(C), *_distinct_rows(moves), wrap)


def _held_sums(
    row: np.ndarray,
    value: np.ndarray,
    weight: np.ndarray,
    rows: int,
    query_row: np.ndarray,
    threshold: np.ndarray,
) -> np.ndarray:
    """Per query j: the sum of the weights of the items of row `query_row[j]` whose value is
    at most `threshold[j]` (items: `row`, `value`, `weight`; rows numbered 0..rows-1). A row
    asked once compares its items with its threshold; rows asked more often are sorted once
    and searched."""
    asked = np.bincount(query_row, minlength=rows)
    once = asked[row] == 1
    row_threshold = np.full(rows, -1, dtype=np.int64)
    row_threshold[query_row] = threshold
    held = once & (value <= row_threshold[row])
    sums = np.bincount(row[held], weights=weight[held], minlength=rows).astype(np.int64)
    out = sums[query_row]
    again = np.flatnonzero(asked[query_row] > 1)
    if len(again):  # sorted by (row, value): the held ones are a prefix of the row's items
        many = ~once
        span = int(value[many].max(initial=0)) + 2
        keys = row[many] * span + value[many]
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        cumulative = np.concatenate([[0], np.cumsum(weight[many][order])])
        asked_row = query_row[again]
        start = np.searchsorted(keys, asked_row * span)
        query = asked_row * span + np.clip(threshold[again], -1, span - 2)
        out[again] = cumulative[np.searchsorted(keys, query, side="right")] - cumulative[start]
    return out


def _ragged(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items listed owner by owner, `lengths[o]` items each: each item's owner and its
    position within the owner's items."""
    lengths = np.asarray(lengths, dtype=np.int64)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    first = np.cumsum(lengths) - lengths
    return owner, np.arange(len(owner)) - first[owner]


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b)


def moved_rows(
    conv: ConvGeometry,
    pass_: TrainingPass,
    dataflow: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    half_rows: np.ndarray,
) -> np.ndarray:
    """Rows of the pass's im2col operand moved over all folds (FoldCounts.moved), per config:
    `half_rows` is the number of whole rows one SRAM half holds (half words // row words)."""
    g = _rows_geometry(conv)
    filters = conv.out_channels // conv.groups
    out = np.zeros(len(rows), dtype=np.int64)
    for flow in np.unique(dataflow):
        where = np.flatnonzero(dataflow == flow)
        outer, inner = _fold_order(pass_, int(flow), 1, 1, filters)
        out[where] = _moved_one_order(
            g, outer[0], inner[0], filters, rows[where], cols[where], half_rows[where]
        )
    return out


def _moved_one_order(
    g: _Rows,
    outer: str,
    inner: str,
    filters: int,
    rows: np.ndarray,
    cols: np.ndarray,
    half_rows: np.ndarray,
) -> np.ndarray:
    """moved_rows for configs that share the fold order (outer, inner): the inner dimension is
    tiled by the array's rows, the outer by its columns (SCALE-Sim's order). Every distinct
    (position tile, offset tile) pair is one key; the transitions of all keys are listed as
    items (row of the key, rows before, rows shared x multiplicity) in a few array operations."""
    none = np.full(len(rows), -1)
    pos_tile = np.where(inner == POS, rows, cols) if POS in (outer, inner) else none
    off_tile = np.where(inner == OFF, rows, cols) if OFF in (outer, inner) else none
    rep = "outer" if outer == REP else "inner" if inner == REP else None
    k = ceil_div(filters, cols if rep == "outer" else rows) if rep else np.ones_like(rows)
    by_positions = outer == POS and inner == OFF  # position tiles outer, offset tiles inner
    p_values, p_of_config = np.unique(pos_tile, return_inverse=True)
    u_values, u_of_config = np.unique(off_tile, return_inverse=True)
    pair = p_of_config.reshape(-1) * len(u_values) + u_of_config.reshape(-1)
    keys, key_of_config = np.unique(pair, return_inverse=True)
    kp, ku = keys // len(u_values), keys % len(u_values)
    t = _Tables([_position_table(g, None if v < 0 else int(v)) for v in p_values.tolist()])
    o = _Plans([_offset_plan(g, None if v < 0 else int(v)) for v in u_values.tolist()])
    items = _position_major(t, o, kp, ku) if by_positions else _offset_major(t, o, kp, ku, rep)
    row, value, weight = (np.concatenate(part) for part in zip(*items, strict=True))
    which = key_of_config.reshape(-1)
    kept = _held_sums(
        row,
        value,
        weight,
        2 * len(kp),
        np.concatenate([2 * which, 2 * which + 1]),
        np.concatenate([half_rows, half_rows]),
    )
    kept_steps, kept_extra = kept[: len(which)], kept[len(which) :]
    total = _dot(o.total_C[ku], t.F_sum[kp])[which]
    if rep == "outer":
        return k * total - k * kept_steps - (k - 1) * kept_extra
    if rep == "inner":
        return k * total - kept_steps - (k - 1) * kept_extra
    return total - kept_steps


class _Tables:
    """Position tables of several tile sizes, stacked: F and G rows of table i start at
    F_start[i] and G_start[i]."""

    def __init__(self, tables: list[_PositionTable]) -> None:
        self.tables = tables
        self.P = np.array([t.F.shape[0] for t in tables])
        self.F = np.concatenate([t.F for t in tables])
        self.G = np.concatenate([t.G for t in tables])
        self.F_start = np.cumsum(self.P) - self.P
        self.G_start = self.F_start - np.arange(len(tables))
        self.F_last = np.stack([t.F[-1] for t in tables])
        self.F_sum = np.stack([t.F.sum(axis=0) for t in tables])
        self.X = np.stack([t.X for t in tables])

    def pairs(
        self, table: np.ndarray, step: int, sa: np.ndarray, sb: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows common to (p, sa) and (p + step, sb) of each (table, sa, sb), pooled: the
        pool, and where each one's vector starts in it."""
        slots = int(max(sa.max(initial=0), sb.max(initial=0))) + 1
        combos, which = np.unique((table * slots + sa) * slots + sb, return_inverse=True)
        vectors = [
            self.tables[c // (slots * slots)].pair(step, c // slots % slots, c % slots)
            for c in combos.tolist()
        ]
        lengths = np.array([len(v) for v in vectors], dtype=np.int64)
        pool = np.concatenate(vectors) if vectors else np.zeros(0, np.int64)
        return pool, (np.cumsum(lengths) - lengths)[which.reshape(-1)]


class _Plans:
    """Offset plans of several tile sizes, stacked (patterns and moves of plan i from
    pattern_start[i] and move_start[i])."""

    def __init__(self, plans: list[_OffsetPlan]) -> None:
        self.patterns = np.concatenate([p.patterns for p in plans])
        self.pattern_count = np.concatenate([p.pattern_count for p in plans])
        self.pattern_n = np.array([len(p.patterns) for p in plans])
        self.pattern_start = np.cumsum(self.pattern_n) - self.pattern_n
        moves = np.concatenate([p.moves for p in plans])
        width = self.patterns.shape[1]
        self.moves, self.move_sa, self.move_sb = (
            moves[:, :width],
            moves[:, width],
            moves[:, width + 1],
        )
        self.move_count = np.concatenate([p.move_count for p in plans])
        self.move_n = np.array([len(p.moves) for p in plans])
        self.move_start = np.cumsum(self.move_n) - self.move_n
        self.tiles = np.array([len(p.C) for p in plans])
        self.C_first = np.stack([p.C[0] for p in plans])
        self.C_last = np.stack([p.C[-1] for p in plans])
        self.total_C = np.stack([p.C.sum(axis=0) for p in plans])
        self.has_wrap = np.array([p.wrap is not None for p in plans])
        wraps = np.array([p.wrap or (0, 0) for p in plans], dtype=np.int64).reshape(-1, 2)
        self.wrap_sa, self.wrap_sb = wraps[:, 0], wraps[:, 1]


_Items = tuple[np.ndarray, np.ndarray, np.ndarray]  # row, value (rows before), weight (shared)


def _offset_major(
    t: _Tables, o: _Plans, kp: np.ndarray, ku: np.ndarray, rep: str | None
) -> list[_Items]:
    """Offset tiles outer, position tiles inner: within an offset tile p -> p + 1 (C . G);
    between offset tiles (q, last p) -> (q + 1, 0) (the shared channel, X). Extra items: each
    fold after itself (inner REP) or the last fold back to the first (outer REP)."""
    P = t.P[kp]
    key, local = _ragged(o.pattern_n[ku] * (P - 1))
    steps = np.maximum(P - 1, 1)[key]
    j = o.pattern_start[ku][key] + local // steps
    y = local % steps
    within = (
        2 * key,
        _dot(o.patterns[j], t.F[t.F_start[kp][key] + y]),
        _dot(o.patterns[j], t.G[t.G_start[kp][key] + y]) * o.pattern_count[j],
    )
    key, local = _ragged(o.move_n[ku])
    j = o.move_start[ku][key] + local
    cross = (
        2 * key,
        _dot(o.moves[j], t.F_last[kp][key]),
        t.X[kp[key], o.move_sa[j], o.move_sb[j]] * o.move_count[j],
    )
    items = [within, cross]
    if rep == "inner":  # every fold after itself: all its rows
        key, local = _ragged(o.pattern_n[ku] * P)
        j = o.pattern_start[ku][key] + local // P[key]
        before = _dot(o.patterns[j], t.F[t.F_start[kp][key] + local % P[key]])
        items.append((2 * key + 1, before, before * o.pattern_count[j]))
    elif rep == "outer":  # the last fold (last q, last p) back to the first (0, 0)
        diagonal = np.diagonal(t.X, axis1=1, axis2=2)
        shared = np.where(
            o.tiles[ku] == 1,
            _dot(o.C_first[ku], diagonal[kp]),
            np.where(o.has_wrap[ku], t.X[kp, o.wrap_sa[ku], o.wrap_sb[ku]], 0),
        )
        items.append((2 * np.arange(len(kp)) + 1, _dot(o.C_last[ku], t.F_last[kp]), shared))
    return items


def _position_major(t: _Tables, o: _Plans, kp: np.ndarray, ku: np.ndarray) -> list[_Items]:
    """Position tiles outer, offset tiles inner: within a position tile q -> q + 1 (their
    shared channel); between position tiles (p, last q) -> (p + 1, 0)."""
    P = t.P[kp]
    move_key, move_local = _ragged(o.move_n[ku])
    move = o.move_start[ku][move_key] + move_local
    pool, pool_start = t.pairs(kp[move_key], 0, o.move_sa[move], o.move_sb[move])
    owner, y = _ragged(P[move_key])
    key, j = move_key[owner], move[owner]
    within = (
        2 * key,
        _dot(o.moves[j], t.F[t.F_start[kp][key] + y]),
        pool[pool_start[owner] + y] * o.move_count[j],
    )
    one_tile = o.tiles[ku] == 1
    crossing = np.flatnonzero(one_tile | o.has_wrap[ku])
    owner, y = _ragged(P[crossing] - 1)
    key = crossing[owner]
    F_rows = t.F[t.F_start[kp][key] + y]
    wrapped = np.flatnonzero(~one_tile[key])
    shared = _dot(o.C_first[ku][key], t.G[t.G_start[kp][key] + y])
    if len(wrapped):
        pool, pool_start = t.pairs(
            kp[key[wrapped]], 1, o.wrap_sa[ku][key[wrapped]], o.wrap_sb[ku][key[wrapped]]
        )
        shared[wrapped] = pool[pool_start + y[wrapped]]
    cross = (2 * key, _dot(o.C_last[ku][key], F_rows), shared)
    return [within, cross]
